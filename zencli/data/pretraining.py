"""Pretraining examples (NSP pairs + whole n-gram or character masking) generated into shards on disk.

Pipeline, per duplication round and shard:

    raw text ─ read_documents (layout) ─ Tokenizer.encode ─ make_pairs (NSP, nothing truncated)
      ─ masking units: segmenter pieces of A and of B merged into lexicon n-grams (whole n-gram masking,
        ZEN 2.0), or single tokens (character masking, ZEN 1.0 / BERT)
      ─ choose_masked_units (15% of the tokens) ─ corrupt (80% [MASK] / 10% random / 10% kept)
      ─ NgramFeaturizer on the CORRUPTED ids with the masked positions blocked ─ shard columns

N-grams are matched on the corrupted sequence and every n-gram covering a masked position is dropped
(kept and randomly replaced targets included), so the n-gram encoder never reveals an MLM target: with
whole n-gram masking the masked unit is usually itself a lexicon n-gram, which would otherwise be
matched in the clean text and hand the answer over.

Sharding and determinism. The tokenized documents are cut, in corpus order, into *parts* of whole
documents holding about `examples_per_shard` examples (estimated from document lengths; each part has
at least two documents, so NSP can draw a random B inside it). Shard `round · n_parts + part` is made
from part `part` with a generator seeded by (seed, round, part) alone: its bytes do not depend on the
number of workers or on which shards were made before. A random B comes from another document of the
same part (BERT draws from the whole corpus; a part holds thousands of documents at the default size).

Resuming. A shard folder appears only complete (temp folder + rename, see `zencli.data.shards`), and
`manifest.json` is rewritten after each one. A run first lists the complete shards whose fingerprint
matches (the fingerprint covers every setting that changes the bytes: corpus, vocab and lexicon
contents, tokenizer, segmenter and generation settings; not `workers`) and makes only the missing ones,
so an interrupted run finishes with exactly the shards a clean run makes. An output folder made with
other settings is an error unless `overwrite=True`.

Bad input is a one-line ZenError: corpus files holding no text, a corpus of one document (NSP needs
two), a lexicon most of whose n-grams contain tokens the vocabulary lacks (they could never be matched;
when at most half are affected, their number is reported in the manifest as `lexicon.unmatched_ngrams`).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import time
from array import array
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zencli.atomic_write import atomic_write
from zencli.data.documents import make_pairs, read_documents
from zencli.data.features import RULES, NgramFeaturizer
from zencli.data.masking import (
    char_units,
    choose_masked_units,
    corrupt,
    merge_with_lexicon,
)
from zencli.data.segmenters import (
    LexiconSegmenter,
    ModelLoader,
    describe_segmenter,
    lexicon_ngram_set,
    make_segmenter,
)
from zencli.data.shards import (
    FORMAT,
    FORMAT_VERSION,
    FREQS_NAME,
    MANIFEST_NAME,
    MAX_SEQ_LEN_LIMIT,
    META_NAME,
    SHARD_PREFIX,
    TMP_PREFIX,
    file_checksum,
    lexicon_checksum,
    read_manifest,
    read_shard_meta,
    shard_name,
    token_dtype,
    vocab_checksum,
    write_manifest,
    write_shard,
)
from zencli.diffs import first_difference
from zencli.errors import ZenError
from zencli.lexicon.matcher import RELEASED_VERSIONS, NgramMatcher
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.reading import check_readable
from zencli.text.tokenizer import Tokenizer
from zencli.text.vocab import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, Vocab

MASKING = ("ngram", "char")
LAYOUTS = ("auto", "blank-line", "line")
MERGE_MAX_N = 8  # longest unit (in tokens) that merging segmenter pieces may build; the lexicon's limit
MATCH_MAX_N = 8  # longest n-gram the matcher finds (the "zen" rules' default)
WORK_DIR = ".work-tokens"
FEATURIZE_CHUNK = 1024  # examples per batched n-gram matching call
_UNUSED = re.compile(r"\[unused\d+\]")


@dataclass(frozen=True)
class PretrainDataSettings:
    """Everything that decides the bytes of the shards (all of it enters the fingerprint)."""

    max_seq_len: int = 128
    dupe_factor: int = 1  # rounds over the corpus, each with fresh pairs and masks
    masking: str = "ngram"  # "ngram": whole n-gram masking (ZEN 2.0); "char": per token (ZEN 1.0 / BERT)
    segmenter: str = "lexicon"  # lexicon | jieba | model:DIR (used by ngram masking)
    mask_rate: float = 0.15
    short_seq_prob: float = 0.1
    # N-gram slots per example; None: max_seq_len (the released density, 128 slots at 128 tokens). Rarely
    # reached (PD98 at 128 tokens: median 35 matches, 99th percentile 133); the "zen" rules then keep the
    # longest, most frequent n-grams.
    max_ngrams: int | None = None
    ngram_rules: str = "zen"  # "zen" or "released" (see zencli.data.features)
    released_version: str = "zen2"
    seed: int = 0
    examples_per_shard: int = 10_000
    layout: str = "auto"

    def validate(self) -> None:
        if not 5 <= self.max_seq_len <= MAX_SEQ_LEN_LIMIT:
            raise ZenError(f"max_seq_len: expected 5..{MAX_SEQ_LEN_LIMIT}, got {self.max_seq_len}")
        if self.dupe_factor < 1:
            raise ZenError(f"dupe_factor: expected >= 1, got {self.dupe_factor}")
        if self.masking not in MASKING:
            raise ZenError(f"masking: expected one of {', '.join(MASKING)}, got {self.masking!r}")
        if not 0.0 < self.mask_rate < 1.0:
            raise ZenError(f"mask_rate: expected a fraction in (0, 1), got {self.mask_rate}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ZenError(f"short_seq_prob: expected a probability in [0, 1], got {self.short_seq_prob}")
        if self.max_ngrams is not None and self.max_ngrams < 0:
            raise ZenError(f"max_ngrams: expected >= 0 or none, got {self.max_ngrams}")
        if self.ngram_rules not in RULES:
            raise ZenError(f"ngram_rules: expected one of {', '.join(RULES)}, got {self.ngram_rules!r}")
        if self.released_version not in RELEASED_VERSIONS:
            raise ZenError(f"released_version: expected one of {', '.join(RELEASED_VERSIONS)}, "
                           f"got {self.released_version!r}")
        if self.seed < 0:
            raise ZenError(f"seed: expected an integer >= 0, got {self.seed}")
        if self.examples_per_shard < 1:
            raise ZenError(f"examples_per_shard: expected >= 1, got {self.examples_per_shard}")
        if self.layout not in LAYOUTS:
            raise ZenError(f"layout: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")


@dataclass
class GenerationResult:
    out_dir: Path
    manifest: dict[str, Any]
    made: int  # shards made by this run
    reused: int  # complete shards found from an earlier run
    seconds_read: float = 0.0  # reading + tokenizing the corpus
    seconds_generate: float = 0.0  # making the shards (all workers, wall clock)
    corpus_chars: int = 0
    made_examples: int = 0

    def as_dict(self) -> dict[str, Any]:
        rate = self.made_examples / self.seconds_generate if self.seconds_generate > 0 else None
        # Characters the made shards cover (all shards of a round cover the corpus once).
        rounds = self.made / max(self.manifest["n_parts"], 1)
        chars = self.corpus_chars * rounds
        return {
            "out_dir": str(self.out_dir),
            "shards_made": self.made,
            "shards_reused": self.reused,
            "seconds_read": round(self.seconds_read, 3),
            "seconds_generate": round(self.seconds_generate, 3),
            "examples_per_second": None if rate is None else round(rate, 1),
            "chars_per_second": None if not self.seconds_generate else round(chars / self.seconds_generate, 1),
            "totals": self.manifest["totals"],
        }


# ----------------------------------------------------------------------------------------------------
# checks


def check_lexicon_vocab(lexicon: Lexicon, vocab: Vocab, lexicon_name: str = "the lexicon") -> int:
    """The number of lexicon n-grams holding a token the vocabulary lacks (they can never match).

    More than half such n-grams means the two files do not belong together: a ZenError.
    """
    ids = vocab.token_ids
    unmatched = sum(1 for g in lexicon.ngrams if any(t not in ids for t in g))
    if len(lexicon) and unmatched * 2 > len(lexicon):
        raise ZenError(
            f"{lexicon_name}: lexicon does not match the vocabulary: {unmatched} of {len(lexicon)} n-grams contain "
            f"tokens not in {vocab.source}; build the lexicon with this vocabulary (or pass the matching vocab)"
        )
    return unmatched


def random_token_ids(vocab: Vocab) -> np.ndarray:
    """Ids a random replacement may draw: every token except [PAD]/[UNK]/[CLS]/[SEP]/[MASK] and [unusedN]."""
    keep = [i for i, t in enumerate(vocab) if t not in SPECIAL_TOKENS and not _UNUSED.fullmatch(t)]
    if not keep:
        raise ZenError(f"{vocab.source}: the vocabulary holds only special tokens; nothing to pretrain on")
    return np.array(keep, np.int64)


# ----------------------------------------------------------------------------------------------------
# the corpus, tokenized once per run


@dataclass
class TokenizedCorpus:
    ids: np.ndarray  # [T] int32 all tokens
    sent_offsets: np.ndarray  # [S+1] int64 sentence s is ids[sent_offsets[s]:sent_offsets[s+1]]
    doc_offsets: np.ndarray  # [D+1] int64 document d is sentences doc_offsets[d]:doc_offsets[d+1]
    chars: int  # characters of the sentences read

    @property
    def n_docs(self) -> int:
        return len(self.doc_offsets) - 1

    def doc_tokens(self) -> np.ndarray:
        """[D] tokens per document."""
        return np.diff(self.sent_offsets[self.doc_offsets])

    def documents(self, lo: int, hi: int) -> list[list[list[int]]]:
        """Documents lo..hi-1 as lists of sentences of token ids (what make_pairs takes)."""
        so = self.sent_offsets
        out = []
        for d in range(lo, hi):
            s0, s1 = int(self.doc_offsets[d]), int(self.doc_offsets[d + 1])
            flat = self.ids[so[s0] : so[s1]].tolist()
            bounds = (so[s0 : s1 + 1] - so[s0]).tolist()
            out.append([flat[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)])
        return out

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("ids", "sent_offsets", "doc_offsets"):
            np.save(directory / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, directory: Path, chars: int = 0) -> TokenizedCorpus:
        arrays = {n: np.load(directory / f"{n}.npy", mmap_mode="r") for n in ("ids", "sent_offsets", "doc_offsets")}
        return cls(chars=chars, **arrays)


def tokenize_corpus(
    files: Sequence[Path], tokenizer: Tokenizer, layout: str, on_doc: Callable[[int, int], None] | None = None
) -> TokenizedCorpus:
    """Read and tokenize every document; sentences and documents left without tokens are skipped."""
    ids = array("i")
    sent_offsets = array("q", [0])
    doc_offsets = array("q", [0])
    chars = 0
    encode = tokenizer.encode
    n_docs = 0
    for doc in read_documents(files, layout):  # type: ignore[arg-type]
        n_sent = 0
        for sentence in doc:
            chars += len(sentence)
            toks = encode(sentence)
            if toks:
                ids.extend(toks)
                sent_offsets.append(len(ids))
                n_sent += 1
        if n_sent:
            doc_offsets.append(len(sent_offsets) - 1)
            n_docs += 1
            if on_doc is not None and n_docs % 1000 == 0:
                on_doc(n_docs, chars)
    if on_doc is not None:
        on_doc(n_docs, chars)
    return TokenizedCorpus(
        np.frombuffer(ids, np.int32).copy(),
        np.frombuffer(sent_offsets, np.int64).copy(),
        np.frombuffer(doc_offsets, np.int64).copy(),
        chars,
    )


def plan_parts(doc_tokens: np.ndarray, max_seq_len: int, examples_per_shard: int) -> list[tuple[int, int]]:
    """Consecutive document ranges [lo, hi) of about `examples_per_shard` examples each (a document of
    n tokens gives about ceil(n / (max_seq_len - 3)) examples), each with at least two documents."""
    est = np.maximum(1, -(-np.asarray(doc_tokens, np.int64) // (max_seq_len - 3))).tolist()
    parts: list[tuple[int, int]] = []
    lo, acc = 0, 0
    for d, e in enumerate(est):
        acc += e
        if acc >= examples_per_shard and d + 1 - lo >= 2:
            parts.append((lo, d + 1))
            lo, acc = d + 1, 0
    n = len(est)
    if lo < n:
        if n - lo >= 2 or not parts:
            parts.append((lo, n))
        else:
            parts[-1] = (parts[-1][0], n)
    return parts


# ----------------------------------------------------------------------------------------------------
# one shard (runs in a worker process, or in the main process with workers=1)


@dataclass(frozen=True)
class ShardTask:
    index: int
    round: int
    part: int
    doc_lo: int
    doc_hi: int


@dataclass
class _WorkerConfig:
    vocab: Vocab
    lexicon: Lexicon
    settings: PretrainDataSettings
    out_dir: Path
    work_dir: Path
    fingerprint: str
    load_model: ModelLoader | None = None  # for a `model:DIR` segmenter (a module-level function: picklable)


def slot_featurizer(vocab: Vocab, lexicon: Lexicon | NgramMatcher, settings: PretrainDataSettings,
                    seed: int = 0) -> NgramFeaturizer:
    """The featurizer that fills a pretraining example's n-gram slots: the settings' rules and cap."""
    s = settings
    return NgramFeaturizer(vocab, lexicon, rules=s.ngram_rules,  # type: ignore[arg-type]
                           max_ngrams=s.max_seq_len if s.max_ngrams is None else s.max_ngrams,
                           max_seq_len=s.max_seq_len, max_len=MATCH_MAX_N, released_version=s.released_version,
                           seed=seed)


class ExampleMaker:
    """Turns the documents of one part into the columns of one shard (see the module docstring)."""

    def __init__(self, vocab: Vocab, lexicon: Lexicon, settings: PretrainDataSettings,
                 load_model: ModelLoader | None = None):
        self.vocab = vocab
        self.settings = settings
        self.tokens = vocab.tokens
        self.cls_id, self.sep_id, self.mask_id, self.pad_id = vocab.cls_id, vocab.sep_id, vocab.mask_id, vocab.pad_id
        self.random_ids = random_token_ids(vocab)
        self.dtype = token_dtype(len(vocab))
        self.segmenter = None
        if settings.masking == "ngram":
            self.segmenter = make_segmenter(settings.segmenter, lexicon, max_n=MERGE_MAX_N, load_model=load_model)
            ngram_set = (self.segmenter.ngrams if isinstance(self.segmenter, LexiconSegmenter)
                         else lexicon_ngram_set(lexicon, MERGE_MAX_N))
            self.in_lexicon = ngram_set.__contains__
            # Forward maximum matching already takes the longest lexicon n-gram (of <= MERGE_MAX_N tokens)
            # at each piece start, so merging its pieces with the same lexicon can never change them.
            self.merge = not (isinstance(self.segmenter, LexiconSegmenter) and self.segmenter.max_n >= MERGE_MAX_N)
        self.matcher = NgramMatcher.from_lexicon(lexicon, vocab.get, 2, MATCH_MAX_N)

    def units(self, toks: list[str], lo: int, hi: int) -> list[tuple[int, int]]:
        """Whole n-gram masking units of tokens lo..hi-1 (one segment), as positions in the example."""
        part = toks[lo:hi]
        pieces = self.segmenter.segment(part)  # type: ignore[union-attr]
        if self.merge:
            pieces = merge_with_lexicon(part, pieces, self.in_lexicon, MERGE_MAX_N)
        return [(lo + s, lo + e) for s, e in pieces]

    def make(self, docs: list[list[list[int]]], seeds: Sequence[int]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        s = self.settings
        rng = np.random.default_rng(list(seeds))
        pairs = make_pairs(docs, s.max_seq_len, rng, s.short_seq_prob)
        featurizer = slot_featurizer(self.vocab, self.matcher, s,
                                     seed=int(np.random.SeedSequence([*seeds, 1]).generate_state(1)[0]))
        n_ex = len(pairs)
        L = s.max_seq_len
        input_ids = np.full((n_ex, L), self.pad_id, self.dtype)
        lengths = np.empty(n_ex, np.uint16)
        seg_a = np.empty(n_ex, np.uint16)
        nsp = np.empty(n_ex, np.uint8)
        mlm_pos: list[np.ndarray] = []
        mlm_ids: list[np.ndarray] = []
        slot_ids: list[np.ndarray] = []
        slot_starts: list[np.ndarray] = []
        slot_lengths: list[np.ndarray] = []
        stats = {"examples": n_ex, "tokens": 0, "maskable": 0, "masked": 0, "masked_as_mask": 0,
                 "masked_as_random": 0, "masked_units": 0, "masked_multi_token_units": 0,
                 "nsp_random": 0, "ngram_slots": 0, "max_slots": 0}
        for c0 in range(0, n_ex, FEATURIZE_CHUNK):
            seg_as, seg_bs, blocked = [], [], []
            for i in range(c0, min(c0 + FEATURIZE_CHUNK, n_ex)):
                pair = pairs[i]
                la, lb = len(pair.a), len(pair.b)
                n = la + lb + 3
                ids = np.empty(n, np.int64)
                ids[0], ids[la + 1], ids[n - 1] = self.cls_id, self.sep_id, self.sep_id
                ids[1 : la + 1] = pair.a
                ids[la + 2 : n - 1] = pair.b
                maskable = np.ones(n, bool)
                maskable[[0, la + 1, n - 1]] = False
                if self.segmenter is not None:
                    toks = list(map(self.tokens.__getitem__, ids.tolist()))
                    units = self.units(toks, 1, la + 1) + self.units(toks, la + 2, n - 1)
                else:
                    units = char_units(maskable)
                masked = choose_masked_units(units, maskable, rng, s.mask_rate)
                inputs, _ = corrupt(ids, masked, rng, self.mask_id, self.random_ids)
                pos = np.flatnonzero(masked)
                seg_as.append(inputs[1 : la + 1])
                seg_bs.append(inputs[la + 2 : n - 1])
                blocked.append(masked)
                lengths[i], seg_a[i], nsp[i] = n, la + 2, pair.is_random_next
                mlm_pos.append(pos.astype(np.uint16))
                mlm_ids.append(ids[pos].astype(self.dtype))
                n_units, n_multi = _masked_unit_counts(units, masked)
                stats["tokens"] += n
                stats["maskable"] += n - 3
                stats["masked"] += len(pos)
                stats["masked_as_mask"] += int((inputs[pos] == self.mask_id).sum())
                stats["masked_as_random"] += int(((inputs[pos] != self.mask_id) & (inputs[pos] != ids[pos])).sum())
                stats["masked_units"] += n_units
                stats["masked_multi_token_units"] += n_multi
                stats["nsp_random"] += int(pair.is_random_next)
            records = featurizer.featurize_batch(seg_as, seg_bs, blocked=blocked)
            for i, rec in zip(range(c0, c0 + len(records)), records):
                input_ids[i, : len(rec["input_ids"])] = rec["input_ids"]
                slot_ids.append(rec["ngram_ids"])
                slot_starts.append(rec["ngram_starts"].astype(np.uint16))
                slot_lengths.append(rec["ngram_lengths"].astype(np.uint8))
                stats["ngram_slots"] += len(rec["ngram_ids"])
                stats["max_slots"] = max(stats["max_slots"], len(rec["ngram_ids"]))
        columns = {
            "input_ids": input_ids,
            "lengths": lengths,
            "seg_a": seg_a,
            "nsp_labels": nsp,
            "mlm_offsets": _offsets(mlm_pos),
            "mlm_positions": _concat(mlm_pos, np.uint16),
            "mlm_ids": _concat(mlm_ids, self.dtype),
            "ngram_offsets": _offsets(slot_ids),
            "ngram_ids": _concat(slot_ids, np.int32),
            "ngram_starts": _concat(slot_starts, np.uint16),
            "ngram_lengths": _concat(slot_lengths, np.uint8),
        }
        return columns, stats


def _masked_unit_counts(units: list[tuple[int, int]], masked: np.ndarray) -> tuple[int, int]:
    """(masked units, masked units of more than one token)."""
    n = multi = 0
    for s, e in units:
        if masked[s]:
            n += 1
            multi += e - s > 1
    return n, multi


def _offsets(parts: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=out[1:])
    return out


def _concat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


_STATE: dict[str, Any] = {}


def _init_worker(config: _WorkerConfig) -> None:
    _STATE.clear()
    _STATE["config"] = config
    _STATE["maker"] = ExampleMaker(config.vocab, config.lexicon, config.settings, config.load_model)
    _STATE["corpus"] = TokenizedCorpus.load(config.work_dir)


def _make_shard(task: ShardTask) -> dict[str, Any]:
    config: _WorkerConfig = _STATE["config"]
    maker: ExampleMaker = _STATE["maker"]
    corpus: TokenizedCorpus = _STATE["corpus"]
    t0 = time.perf_counter()
    docs = corpus.documents(task.doc_lo, task.doc_hi)
    columns, stats = maker.make(docs, (config.settings.seed, task.round, task.part))
    meta = {
        "name": shard_name(task.index), "index": task.index, "round": task.round, "part": task.part,
        "documents": [task.doc_lo, task.doc_hi], "fingerprint": config.fingerprint, **stats,
    }
    write_shard(config.out_dir, task.index, columns, meta)
    meta["seconds"] = round(time.perf_counter() - t0, 3)
    return meta


# ----------------------------------------------------------------------------------------------------
# the driver


def fingerprint_of(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:24]


def _leftovers(out_dir: Path) -> list[Path]:
    """Temp files and folders an interrupted run may leave: shard folders being written, and the
    `.NAME.tmp-PID` files of atomic writes."""
    return [p for p in out_dir.iterdir()
            if p.name.startswith(TMP_PREFIX) or (p.name.startswith(".") and ".tmp-" in p.name)]


def _clear_outputs(out_dir: Path) -> None:
    """Remove what generate_shards writes (and nothing else) from `out_dir`."""
    ours = [p for p in out_dir.iterdir()
            if p.name in (MANIFEST_NAME, FREQS_NAME) or p.name.startswith((SHARD_PREFIX, WORK_DIR))]
    for p in ours + _leftovers(out_dir):
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def _complete_shards(out_dir: Path, fingerprint: str) -> dict[int, dict[str, Any]]:
    """The shard folders of this fingerprint, by index; a folder of other settings is an error."""
    done: dict[int, dict[str, Any]] = {}
    for p in sorted(out_dir.glob(f"{SHARD_PREFIX}*")):
        meta = read_shard_meta(p)
        if meta is None:  # cannot happen through write_shard's rename; someone edited the folder
            raise ZenError(f"{p / META_NAME}: missing or unreadable; remove {p} or use --overwrite")
        if meta.get("fingerprint") != fingerprint or meta.get("name") != p.name:
            raise ZenError(
                f"{p}: a shard made with other settings (fingerprint {meta.get('fingerprint')}, now {fingerprint}); "
                f"use another output folder or --overwrite"
            )
        done[int(meta["index"])] = meta
    return done


def generate_shards(
    corpus_files: Sequence[str | Path],
    vocab: Vocab | str | Path,
    lexicon: Lexicon | str | Path,
    out_dir: str | Path,
    *,
    max_seq_len: int = 128,
    dupe_factor: int = 1,
    masking: str = "ngram",
    segmenter: str = "lexicon",
    mask_rate: float = 0.15,
    short_seq_prob: float = 0.1,
    max_ngrams: int | None = None,
    ngram_rules: str = "zen",
    released_version: str = "zen2",
    seed: int = 0,
    examples_per_shard: int = 10_000,
    layout: str = "auto",
    lowercase: bool | None = None,
    workers: int = 1,
    overwrite: bool = False,
    console: Any = None,
    load_model: ModelLoader | None = None,
) -> GenerationResult:
    """Generate (or finish) the pretraining shards of `corpus_files` in `out_dir`; see the module docstring.

    `workers`: processes making shards (0: one per CPU core). `console`: a Rich console for progress
    bars, None for silence. `load_model`: how a `model:DIR` segmenter is loaded (the tasks layer's
    `zencli.tasks.segmenter.load_model_segmenter`). Returns the manifest and timings.
    """
    settings = PretrainDataSettings(
        max_seq_len=max_seq_len, dupe_factor=dupe_factor, masking=masking, segmenter=segmenter,
        mask_rate=mask_rate, short_seq_prob=short_seq_prob, max_ngrams=max_ngrams, ngram_rules=ngram_rules,
        released_version=released_version, seed=seed, examples_per_shard=examples_per_shard, layout=layout,
    )
    settings.validate()
    if workers < 0:
        raise ZenError(f"workers: expected >= 0, got {workers}")
    workers = workers or os.cpu_count() or 1
    files = [Path(f) for f in corpus_files]
    if not files:
        raise ZenError("corpus: expected at least one text file")
    vocab_name = str(vocab) if not isinstance(vocab, Vocab) else vocab.source
    lexicon_name = str(lexicon) if not isinstance(lexicon, Lexicon) else "the lexicon"
    vocab = vocab if isinstance(vocab, Vocab) else Vocab.load(vocab)
    lexicon = lexicon if isinstance(lexicon, Lexicon) else Lexicon.load(lexicon)
    tokenizer = Tokenizer.from_vocab(vocab, lowercase=lowercase)
    unmatched = check_lexicon_vocab(lexicon, vocab, lexicon_name)
    seg_desc = "none (char masking)"
    if settings.masking == "ngram":
        seg_desc = describe_segmenter(make_segmenter(settings.segmenter, lexicon, max_n=MERGE_MAX_N,
                                                     load_model=load_model))
    for name in (PAD, CLS, SEP, MASK):  # an unusable vocabulary fails here, not in a worker
        vocab.special_id(name)
    random_token_ids(vocab)

    corpus_info = [{"path": str(f), "sha256": file_checksum(check_readable(f)), "bytes": f.stat().st_size}
                   for f in files]
    fp_inputs = {
        "format": FORMAT, "version": FORMAT_VERSION, "settings": asdict(settings),
        "vocab": vocab_checksum(vocab), "lexicon": lexicon_checksum(lexicon),
        "corpus": [c["sha256"] for c in corpus_info],
        "tokenizer": {"lowercase": tokenizer.lowercase, "strip_accents": tokenizer.strip_accents},
        "segmenter": seg_desc,
    }
    fingerprint = fingerprint_of(fp_inputs)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ZenError(f"{out}: exists and is not a folder; expected an output folder for shards")
    out.mkdir(parents=True, exist_ok=True)
    if overwrite:
        _clear_outputs(out)
    elif (out / MANIFEST_NAME).exists():
        old = read_manifest(out)
        if old.get("fingerprint") != fingerprint:
            why = first_difference(old.get("inputs", {}), fp_inputs) or "?"
            raise ZenError(f"{out}: holds shards made with other settings ({why}); "
                           "use another output folder or --overwrite")
        if old.get("complete") and all(read_shard_meta(out / s["name"]) is not None for s in old["shards"]):
            return GenerationResult(out, old, made=0, reused=len(old["shards"]))
    for p in _leftovers(out):  # of an interrupted run
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    done = _complete_shards(out, fingerprint)

    # Read and tokenize (each run: the plan and the workers need the token ids).
    t0 = time.perf_counter()
    with _progress(console) as progress:
        task = progress.add_task("reading", total=None, extra="") if progress else None

        def on_doc(n_docs: int, chars: int) -> None:
            if progress:
                rate = chars / max(time.perf_counter() - t0, 1e-9)
                progress.update(task, completed=n_docs, extra=f"{n_docs:,} documents, {rate / 1e6:.2f} M chars/s")

        corpus = tokenize_corpus(files, tokenizer, settings.layout, on_doc)
    seconds_read = time.perf_counter() - t0
    if corpus.n_docs == 0:
        raise ZenError(
            f"{', '.join(map(str, files))}: no text to pretrain on (only blank lines, or nothing the vocabulary "
            f"tokenizes); expected sentences, one per line"
        )
    if corpus.n_docs < 2:
        make_pairs(corpus.documents(0, corpus.n_docs), settings.max_seq_len, np.random.default_rng(0))  # raises

    parts = plan_parts(corpus.doc_tokens(), settings.max_seq_len, settings.examples_per_shard)
    tasks = [ShardTask(r * len(parts) + k, r, k, lo, hi)
             for r in range(settings.dupe_factor) for k, (lo, hi) in enumerate(parts)]
    stale = [i for i in done if i >= len(tasks)]
    if stale:
        raise ZenError(f"{out / shard_name(stale[0])}: not part of this run's plan; "
                       "use another output folder or --overwrite")
    freqs = np.concatenate([[0], np.asarray(lexicon.freqs, np.int64)]).astype(np.int64)  # [G+1] by n-gram id
    atomic_write(out / FREQS_NAME, lambda f: np.save(f, freqs))
    header = {
        "format": FORMAT, "version": FORMAT_VERSION, "fingerprint": fingerprint, "inputs": fp_inputs,
        "settings": asdict(settings), "corpus": corpus_info,
        "vocab": {"path": vocab_name, "size": len(vocab), "sha256": fp_inputs["vocab"]},
        "lexicon": {"path": lexicon_name, "size": len(lexicon), "sha256": fp_inputs["lexicon"],
                    "unmatched_ngrams": unmatched},
        "tokenizer": fp_inputs["tokenizer"], "segmenter": seg_desc,
        "pad_id": vocab.pad_id, "token_dtype": token_dtype(len(vocab)).name,
        "documents": corpus.n_docs, "corpus_chars": corpus.chars, "corpus_tokens": len(corpus.ids),
        "n_parts": len(parts), "n_shards": len(tasks),
    }

    def save_manifest() -> dict[str, Any]:
        shards = [done[i] for i in sorted(done)]
        manifest = {**header, "complete": len(done) == len(tasks), "shards": shards, "totals": _totals(shards)}
        write_manifest(out, manifest)
        return manifest

    pending = [t for t in tasks if t.index not in done]
    reused = len(tasks) - len(pending)
    work = out / WORK_DIR
    config = _WorkerConfig(vocab, lexicon, settings, out, work, fingerprint, load_model)
    made_examples = 0
    t1 = time.perf_counter()
    save_manifest()
    if pending:
        try:
            corpus.save(work)
            with _progress(console) as progress:
                ptask = progress.add_task("shards", total=len(tasks), completed=reused, extra="") if progress else None

                def finished(meta: dict[str, Any]) -> None:
                    nonlocal made_examples
                    done[int(meta["index"])] = meta
                    save_manifest()
                    made_examples += int(meta["examples"])
                    if progress:
                        rate = made_examples / max(time.perf_counter() - t1, 1e-9)
                        progress.update(ptask, advance=1, extra=f"{made_examples:,} examples, {rate:,.0f} examples/s")

                n_proc = min(workers, len(pending))
                if n_proc > 1:
                    _run_pool(pending, config, n_proc, finished)
                else:
                    _init_worker(config)
                    try:
                        for t in pending:
                            finished(_make_shard(t))
                    finally:
                        _STATE.clear()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    seconds_generate = time.perf_counter() - t1
    manifest = save_manifest()
    return GenerationResult(out, manifest, made=len(pending), reused=reused, seconds_read=seconds_read,
                            seconds_generate=seconds_generate, corpus_chars=corpus.chars, made_examples=made_examples)


def _run_pool(pending: list[ShardTask], config: _WorkerConfig, n_proc: int,
              finished: Callable[[dict[str, Any]], None]) -> None:
    """Make shards in `n_proc` spawned processes; the first failure cancels the rest and is raised."""
    ctx = mp.get_context("spawn")  # no fork: the parent may hold threads (torch, Rich)
    pool = ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx, initializer=_init_worker, initargs=(config,))
    try:
        futures = {pool.submit(_make_shard, t) for t in pending}
        while futures:
            ready, futures = wait(futures, return_when=FIRST_EXCEPTION)
            for f in ready:
                finished(f.result())  # re-raises a worker's exception
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _totals(shards: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("examples", "tokens", "maskable", "masked", "masked_as_mask", "masked_as_random", "masked_units",
            "masked_multi_token_units", "nsp_random", "ngram_slots")
    t: dict[str, Any] = {k: sum(int(s[k]) for s in shards) for k in keys}
    t["max_slots"] = max((int(s["max_slots"]) for s in shards), default=0)
    ex = t["examples"]
    t["masked_fraction"] = round(t["masked"] / t["maskable"], 6) if t["maskable"] else 0.0
    t["nsp_random_fraction"] = round(t["nsp_random"] / ex, 6) if ex else 0.0
    t["ngrams_per_example"] = round(t["ngram_slots"] / ex, 3) if ex else 0.0
    t["tokens_per_example"] = round(t["tokens"] / ex, 3) if ex else 0.0
    units = t["masked_units"]
    t["multi_token_unit_fraction"] = round(t["masked_multi_token_units"] / units, 6) if units else 0.0
    return t


class _progress:
    """A Rich progress display when a console is given, else None (as a context manager)."""

    def __init__(self, console: Any):
        self.console = console
        self.progress = None

    def __enter__(self):
        if self.console is None:
            return None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(TextColumn("[bold]{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[extra]}"), TimeRemainingColumn(), TimeElapsedColumn(),
                                 console=self.console)
        self.progress.__enter__()
        return self.progress

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)


def summary_table(result: GenerationResult):
    """A Rich table of the run and the dataset (the same numbers as `result.as_dict()`)."""
    from rich.table import Table

    d = result.as_dict()
    t = d["totals"]
    table = Table(title=f"pretraining shards: {result.out_dir}")
    table.add_column("", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("shards made / reused", f"{d['shards_made']} / {d['shards_reused']}"),
        ("examples", f"{t['examples']:,}"),
        ("tokens per example", f"{t['tokens_per_example']:.1f}"),
        ("masked fraction", f"{t['masked_fraction']:.4f}"),
        ("multi-token masked units", f"{t['multi_token_unit_fraction']:.4f}"),
        ("NSP random fraction", f"{t['nsp_random_fraction']:.4f}"),
        ("n-grams per example (max)", f"{t['ngrams_per_example']:.1f} ({t['max_slots']})"),
        ("time reading", f"{d['seconds_read']:.2f} s"),
        ("time generating", f"{d['seconds_generate']:.2f} s"),
    ]
    if d["examples_per_second"] is not None:
        rate = f"{d['examples_per_second']:,.0f} examples/s, {d['chars_per_second'] / 1e3:,.0f} k chars/s"
        rows.append(("throughput", rate))
    for k, v in rows:
        table.add_row(k, v)
    return table
