"""Pretraining examples (NSP pairs + whole n-gram or character masking) generated into shards on disk.

Pipeline, per duplication round and shard:

    raw text ─ documents_in (layout) ─ Tokenizer.encode ─ Segments ─ pair_spans (NSP, nothing truncated)
      ─ masking units: segmenter pieces of A and of B merged into lexicon n-grams (whole n-gram masking,
        ZEN 2.0), or single tokens (character masking, ZEN 1.0 / BERT)
      ─ choose_masked_units (15% of the tokens) ─ corrupt (80% [MASK] / 10% random / 10% kept)
      ─ NgramFeaturizer on the CORRUPTED ids with the masked positions blocked ─ shard columns

N-grams are matched on the corrupted sequence and every n-gram covering a masked position is dropped
(kept and randomly replaced targets included), so the n-gram encoder never reveals an MLM target: with
whole n-gram masking the masked unit is usually itself a lexicon n-gram, which would otherwise be
matched in the clean text and hand the answer over.

One module per stage: settings.py (PretrainDataSettings, checks of the vocabulary and lexicon) ·
corpus.py (read and tokenize, in byte ranges on workers; plan the parts) · examples.py (pairs, masking,
n-gram slots: one shard's columns) · workers.py (make and write shards, in this process or a pool) ·
resume.py (fingerprint, manifest, what an earlier run left) · report.py (result, totals, progress, summary table) ·
generate.py (`generate_shards`, which runs them in order).

More: docs/design.md, "Pretraining examples".
"""

from zencli.data.pretraining.corpus import TokenizedCorpus, plan_parts, tokenize_corpus
from zencli.data.pretraining.examples import FEATURIZE_CHUNK, ExampleMaker, slot_featurizer
from zencli.data.pretraining.generate import generate_shards
from zencli.data.pretraining.report import GenerationResult, shard_totals, summary_table
from zencli.data.pretraining.resume import fingerprint_of
from zencli.data.pretraining.settings import (
    LAYOUTS,
    MASKING,
    MATCH_MAX_N,
    MERGE_MAX_N,
    PretrainDataSettings,
    check_lexicon_vocab,
    random_token_ids,
)
from zencli.data.pretraining.workers import WORK_DIR, ShardTask

__all__ = [
    "FEATURIZE_CHUNK", "LAYOUTS", "MASKING", "MATCH_MAX_N", "MERGE_MAX_N", "WORK_DIR", "ExampleMaker",
    "GenerationResult", "PretrainDataSettings", "ShardTask", "TokenizedCorpus", "check_lexicon_vocab",
    "fingerprint_of", "generate_shards", "plan_parts", "random_token_ids", "shard_totals", "slot_featurizer",
    "summary_table", "tokenize_corpus",
]
