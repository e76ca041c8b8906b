"""Exact n-gram counting with bounded memory: chunks → counts files → level-wise merge.

One code path for `zen lexicon build`, `count` and `merge`: worker processes count byte ranges of the corpus
into sorted counts files (map); the files are merged level by level, an n-gram kept only if its prefix and
suffix reached `min_freq` (apriori pruning: memory follows the frequent n-grams, not the corpus); and the
neighbours of the frequent n-grams are counted for the branching-entropy filter when it is on.

Modules, in the order of the stages:
- `count`: stage 1's byte ranges and worker processes (`count_corpus`);
- `chunk`: counting one chunk in numpy (`ChunkBuilder`, `iter_levels`);
- `counts_file`: the counts file format (`write_section`, `read_counts_file`, `CountsSection`);
- `merge`: stage 2, the level-wise merge (`merge_sections`) into `FrequentNgrams` (`frequent`);
- `prune`: what a first pass's frequent n-grams let the second pass leave out (`KnownFrequent`);
- `spill`: sorted runs spilled to disk and merged range by range (stages 2 and 3);
- `neighbours`: stage 3, the branching-entropy statistics.

More: docs/design.md, "Exact n-gram counting".
"""

# The names the lexicon pipeline (extract.py, pmi.py) uses; the stages live in the modules above.
from zencli.lexicon.counting.count import CountRun, count_corpus
from zencli.lexicon.counting.counts_file import (
    MAGIC,
    CountsSection,
    concat_counts_files,
    iter_sections,
    read_counts_file,
)
from zencli.lexicon.counting.frequent import FrequentNgrams
from zencli.lexicon.counting.merge import merge_sections
from zencli.lexicon.counting.prune import KnownFrequent

__all__ = [
    "MAGIC",
    "CountRun",
    "CountsSection",
    "FrequentNgrams",
    "KnownFrequent",
    "concat_counts_files",
    "count_corpus",
    "iter_sections",
    "merge_sections",
    "read_counts_file",
]
