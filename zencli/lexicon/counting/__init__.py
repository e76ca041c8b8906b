"""Exact n-gram counting with bounded memory: chunks → counts files → level-wise merge.

Design (one code path for `zen lexicon build`, `count` and `merge`):

1. **Count (map).** The input files are cut into byte ranges at line boundaries (`shard_byte_ranges`);
   worker processes read their ranges (`iter_lines`), tokenize each line and cut the stream into chunks of
   about `chunk_chars` characters. A chunk is counted on its own, entirely in numpy:
   * its distinct tokens are sorted (by code point) and numbered 0..V-1; the chunk becomes one int32
     array with -1 between lines, so no n-gram crosses a line end;
   * level by level, the n-gram starting at position i is (rank of its (n-1)-gram prefix at i, its last
     token). The pair and the position pack into one uint64 that is sorted (np.sort; argsort only if a
     huge chunk does not fit 64 bits); runs of equal pairs are the distinct n-grams, their lengths the
     counts, and the run index each position's rank for the next level. Ranks are in lexicographic token
     order at every level, and the n-grams never leave numpy.
   * The chunk is stored as a *section*: its token table, token counts and, per length n ≥ 2, three
     uint32 arrays (prefix rank, suffix rank, count) sorted by n-gram. This is an exact trie: nothing is
     hashed, two n-grams can never merge. Levels are written as they are counted, so a worker holds one
     level at a time (about 40 bytes per char of its chunk at peak).
   A counts file (`*.counts`) is the magic line `ZENCOUNTS 1` followed by sections; each section is
   `SECT`, u64 data length, the arrays (8-byte aligned), u64 header length and a JSON header (token table,
   tokenizer, source byte range, lines/chars/tokens, number of k-gram positions, array names, dtypes,
   offsets). Concatenating sections is valid, which is how `count` joins its workers' output. Counts
   files are large, about 50-60 bytes per character of text: they hold every distinct n-gram of every
   chunk, because any n-gram rare in one shard may be frequent overall.

2. **Merge (reduce), level-wise with apriori pruning.** An n-gram can reach `min_freq` only if its prefix
   and its suffix (the (n-1)-grams) reach it. So the merge works one length at a time and keeps global
   ids only for *frequent* n-grams:
   * level 1: token counts are summed over the sections' token tables; frequent tokens get global ids in
     sorted order, and every section gets a map local id → global id (-1: not frequent);
   * level n: each section's entries are translated through its level n-1 map; entries whose prefix or
     suffix is not frequent are dropped (exactly the apriori rule), the rest become int64 keys
     `gprefix * F[n-1] + gsuffix`, still sorted, and are spilled to a temp folder;
   * the spills are merged range by range (key ranges chosen from samples so that one range holds about
     `partition_entries` entries), counts summed, frequent n-grams kept; their global id is their rank;
   * each section's level-n map is then built by binary search and spilled for the next level.
   Peak memory is one section's arrays, one key range, and the frequent n-grams themselves; the full
   set of distinct n-grams of the corpus never sits in memory, only on disk.
   Because every count is exact and all ids follow lexicographic token order, the result does not depend
   on how the corpus was cut into shards, chunks or workers: merging counts files of shards equals a
   one-pass build of the concatenated corpus.

3. **Neighbours (optional, for the branching-entropy filter of pmi.py).** The left and right neighbours
   of an n-gram w are read off the (n+1)-grams a·w and w·b, so counting goes one level deeper (max_n + 1)
   and the merge, at level n+1, spills keys (global id of w, id of the neighbour among *all* tokens)
   taken before frequency pruning (a rare neighbour still counts). They are merged range by range like the
   n-grams, with range bounds that never split one w, and reduced to sum c·log2(c) per w in key order, so
   the entropies too are the same, bit for bit, whatever the sharding.

Modules, in the order of the stages:
- `count`: stage 1's byte ranges and worker processes (`count_corpus`);
- `chunk`: counting one chunk in numpy (`ChunkBuilder`, `iter_levels`);
- `counts_file`: the counts file format (`write_section`, `read_counts_file`, `CountsSection`);
- `merge`: stage 2, the level-wise merge (`merge_sections`) into `FrequentNgrams` (`frequent`);
- `spill`: sorted runs spilled to disk and merged range by range (stages 2 and 3);
- `neighbours`: stage 3, the branching-entropy statistics.
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

__all__ = [
    "MAGIC",
    "CountRun",
    "CountsSection",
    "FrequentNgrams",
    "concat_counts_files",
    "count_corpus",
    "iter_sections",
    "merge_sections",
    "read_counts_file",
]
