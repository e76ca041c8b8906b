"""The lexicon pipeline: corpus → counts (workers) → merge (apriori) → PMI (+ entropy) selection →
ngram.txt + ngram.json.

`build` is literally `count` into a temp folder followed by `merge`, so a one-pass build and a map/merge
over shards run the same code (see zencli.lexicon.counting for why the results are identical).
"""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from zencli.atomic_write import atomic_write_text
from zencli.cpus import usable_cpus
from zencli.errors import MACHINE_ERRNOS, WriteError, ZenError
from zencli.lexicon.counting import (
    CountRun,
    FrequentNgrams,
    KnownFrequent,
    concat_counts_files,
    count_corpus,
    iter_sections,
    merge_sections,
)
from zencli.lexicon.ngram_file import Lexicon, raw_form
from zencli.lexicon.pmi import LOG_BASE, as_tuples, ranked_rows, select
from zencli.lexicon.settings import LexiconConfig
from zencli.progress import optional_progress
from zencli.text.tokenizer import BasicTokenizer, Tokenizer

if TYPE_CHECKING:
    from rich.progress import Progress

SIDECAR_FORMAT = "zen-lexicon/1"


# ----------------------------------------------------------------------------- tokenizer


class TextTokenizer:
    """Picklable `text -> tokens` for the workers: carries settings, builds the real tokenizer lazily.

    With a vocab: WordPiece pieces (`Tokenizer.from_vocab`, e.g. Arabic), lower-casing and accent
    stripping as the vocab's vocab.json says unless `lowercase` is given; without: vocabulary-free
    `char_pieces` (each CJK/punctuation char a token, other words `a ##b ##c`; lower-cased by default).
    """

    def __init__(self, vocab: str | Path | None = None, lowercase: bool | None = None):
        self.vocab = str(vocab) if vocab is not None else None
        self.lowercase = lowercase
        self._fn = None

    def __getstate__(self) -> dict[str, Any]:
        return {"vocab": self.vocab, "lowercase": self.lowercase}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fn = None

    def _build(self):
        if self.vocab is None:
            return BasicTokenizer(lowercase=True if self.lowercase is None else self.lowercase)

        return Tokenizer.from_vocab(self.vocab, lowercase=self.lowercase)

    def __call__(self, text: str) -> list[str]:
        if self._fn is None:
            tok = self._build()
            self._fn = tok.char_pieces if self.vocab is None else tok.tokens
        return self._fn(text)

    def signature(self) -> dict[str, Any]:
        """What makes two countings comparable; stored in counts files and checked at merge."""
        tok = self._build()
        if self.vocab is None:
            return {"kind": "char_pieces", "lowercase": tok.lowercase, "strip_accents": tok.strip_accents}
        digest = hashlib.sha256(Path(self.vocab).read_bytes()).hexdigest()
        return {"kind": "wordpiece", "vocab_sha256": digest, "lowercase": tok.lowercase,
                "strip_accents": tok.strip_accents}


def make_tokenizer(cfg: LexiconConfig) -> TextTokenizer:
    if cfg.vocab is None and cfg.language == "ar":
        raise ZenError("vocab: Arabic n-grams are counted over WordPiece pieces; expected a vocab.txt "
                       "(e.g. runs/vocab-ar/vocab.txt from `zen vocab build --language ar`)")
    if cfg.vocab is not None and not Path(cfg.vocab).exists():
        raise ZenError(f"vocab: {cfg.vocab}: no such file; build it first (`zen vocab build --language "
                       f"{cfg.language} CORPUS -o {cfg.vocab}`) or leave vocab empty to count characters")
    return TextTokenizer(cfg.vocab, cfg.lowercase)


# ----------------------------------------------------------------------------- memory


class PeakMemory:
    """Peak resident memory of this process plus its children, sampled every `interval` seconds, and the
    kernel's exact peak of this process (getrusage) at the end. A worker's peak is sampled too: the kernel's
    figure for children (RUSAGE_CHILDREN) counts the parent's pages a spawned child holds between its fork and
    its exec, so it reports this process's size at the time, not the worker's."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak_total = 0
        self.peak_child = 0
        self.stage: str | None = None
        self.stage_peaks: dict[str, int] = {}  # the sampled peak of the whole tree per stage (`at`)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            try:
                rss = child.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            self.peak_child = max(self.peak_child, rss)
        self.peak_total = max(self.peak_total, total)
        stage = self.stage
        if stage is not None:
            self.stage_peaks[stage] = max(self.stage_peaks.get(stage, 0), total)

    def at(self, stage: str) -> None:
        """What runs from now on is `stage` (its peak reported apart)."""
        self.stage = stage
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakMemory:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def report(self) -> dict[str, int]:
        # ru_maxrss is in KiB on Linux.
        return {
            "peak_rss_total_sampled": self.peak_total,
            "peak_rss_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_rss_worker_max": self.peak_child,
            **({"peak_rss_total_sampled_by_stage": dict(self.stage_peaks)} if self.stage_peaks else {}),
        }


# ----------------------------------------------------------------------------- progress


def progress_display(console, kind: str) -> AbstractContextManager[Progress | None]:
    """A Rich progress display ("bytes" for counting, "steps" for merging), or None when `console` is None."""
    return optional_progress(console, amount="bytes" if kind == "bytes" else "count", width=9, field="extra",
                             elapsed=True)


def _count_with_progress(console, cfg: LexiconConfig, files: Sequence[Path], tokenizer: TextTokenizer,
                         signature: dict[str, Any], out_dir: Path, max_n: int | None = None,
                         known: KnownFrequent | None = None, label: str = "counting") -> CountRun:
    workers = resolve_workers(cfg.workers)
    with progress_display(console, "bytes") as progress:
        task = progress.add_task(label, total=None, extra="") if progress is not None else None
        t0 = time.perf_counter()

        def on_progress(done: int, total: int, chars: int) -> None:
            if progress is not None:
                rate = chars / max(time.perf_counter() - t0, 1e-9)
                progress.update(task, completed=done, total=total, extra=f"{rate / 1e6:.2f} M chars/s")

        return count_corpus(files, tokenizer, signature, out_dir=out_dir, max_n=max_n or cfg.counted_n,
                            workers=workers, chunk_chars=cfg.chunk_chars, on_progress=on_progress, known=known)


def _merge_with_progress(console, cfg: LexiconConfig, counts_files: Sequence[Path], tmp: Path,
                         max_n: int | None = None, label: str = "merging") -> FrequentNgrams:
    """Merge to cfg.max_n (with the entropy's neighbours when the filter is on), or to `max_n` without."""
    sections = list(iter_sections(counts_files))
    steps = (max_n or cfg.counted_n) * len(sections)
    entropy_from = cfg.min_n if cfg.min_entropy is not None and max_n is None else None
    with progress_display(console, "steps") as progress:
        task = progress.add_task(label, total=steps, extra="") if progress is not None else None

        def on_step(level: int, done: int) -> None:
            if progress is not None:
                progress.update(task, completed=(level - 1) * len(sections) + done, extra=f"length {level}")

        freq = merge_sections(sections, max_n=max_n or cfg.max_n, min_freq=cfg.freq_threshold, tmp_dir=tmp,
                              on_step=on_step, entropy_from=entropy_from, workers=resolve_workers(cfg.workers))
        if progress is not None:
            progress.update(task, completed=steps, extra="done")
    return freq


def resolve_workers(workers: int) -> int:
    return workers if workers > 0 else usable_cpus()


@contextmanager
def _temp_folder(cfg: LexiconConfig, near: Path):
    parent = Path(cfg.tmp_dir) if cfg.tmp_dir is not None else near
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".zen-lexicon-", dir=parent))
    try:
        yield folder
    except OSError as e:
        if e.errno not in MACHINE_ERRNOS:
            raise
        # the counts and merge files (workers' errors arrive without a file name): name their folder
        raise WriteError(parent, e, "the n-gram counts are written there while counting (tmp_dir moves them "
                                    "to another disk)") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ----------------------------------------------------------------------------- results


@dataclass
class LexiconResult:
    """A selected lexicon and everything the JSON sidecar reports about how it was made."""

    lexicon: Lexicon
    settings: dict[str, Any]
    corpus: dict[str, Any]
    per_length: dict[int, dict[str, int]]
    times: dict[str, float] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    merged_raw: int = 0  # n-grams folded together because their raw (ZEN 1.0) spelling is equal

    def sidecar(self) -> dict[str, Any]:
        return {
            "format": SIDECAR_FORMAT,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "ngrams": len(self.lexicon),
            "settings": self.settings,
            "corpus": self.corpus,
            "per_length": {str(n): v for n, v in sorted(self.per_length.items())},
            "merged_raw_duplicates": self.merged_raw,
            "time_s": {k: round(v, 3) for k, v in self.times.items()},
            "memory_bytes": self.memory,
        }

    def save(self, output: str | Path) -> tuple[Path, Path]:
        """Write ngram.txt and its sidecar (same name, `.json`)."""
        output = Path(output)
        self.lexicon.save(output)
        side = sidecar_path(output)
        atomic_write_text(side, json.dumps(self.sidecar(), ensure_ascii=False, indent=2) + "\n")
        return output, side


def sidecar_path(ngram_path: str | Path) -> Path:
    return Path(ngram_path).with_suffix(".json")


def _settings(cfg: LexiconConfig, tokenizer: dict[str, Any]) -> dict[str, Any]:
    return {
        "language": cfg.language,
        "min_n": cfg.min_n,
        "max_n": cfg.max_n,
        "min_freq": cfg.freq_threshold,
        "min_pmi": cfg.pmi_threshold,
        "pmi": f"min over binary splits of log{LOG_BASE}(p(w) / (p(l) p(r))), p(x) = count(x) / N_len(x)",
        "min_entropy": cfg.min_entropy,
        "entropy": None if cfg.min_entropy is None else
        "min(left, right) branching entropy in bits; line edges distinct neighbours, `##` neighbours one",
        "max_size": cfg.max_size,
        "style": cfg.style,
        "vocab": str(cfg.vocab) if cfg.vocab is not None else None,
        "lowercase": cfg.lowercase,
        "tokenizer": tokenizer,
        "workers": resolve_workers(cfg.workers),
        "chunk_chars": cfg.chunk_chars,
    }


def _fold_raw(ngrams: list[tuple[str, ...]], freqs: list[int]) -> tuple[list[tuple[str, ...]], list[int], int]:
    """Raw style: an n-gram *is* its spelling; token sequences with the same spelling (`a ##b` and `a b`)
    are one entry, with their counts summed. Returns char tuples, as `Lexicon.load` would read them."""
    total: dict[str, int] = {}
    for g, f in zip(ngrams, freqs):
        key = raw_form(g)
        total[key] = total.get(key, 0) + f
    items = sorted(((tuple(k), f) for k, f in total.items()), key=lambda kv: (-kv[1], kv[0]))
    return [g for g, _ in items], [f for _, f in items], len(ngrams) - len(items)


def select_lexicon(freq: FrequentNgrams, cfg: LexiconConfig,
                   release: bool = False) -> tuple[Lexicon, dict[int, dict[str, int]], int]:
    """Apply the thresholds; the lexicon in `cfg.style`, counts per length, and raw duplicates folded.
    `release`: let go of `freq`'s levels once the selection is ranked (before its n-grams become tuples)."""
    sel = select(freq, min_n=cfg.min_n, max_n=cfg.max_n, min_freq=cfg.freq_threshold, min_pmi=cfg.pmi_threshold,
                 min_entropy=cfg.min_entropy)
    per_length = {
        n: {"candidates": int(freq.candidates.get(n, 0)), "frequent": freq.size(n),
            "pmi": int(sel.passed_pmi.get(n, 0)), "selected": int(len(sel.ids.get(n, ())))}
        for n in range(1, cfg.max_n + 1)
    }
    rows, counts = ranked_rows(freq, sel)
    del sel
    if release:
        freq.release_levels()
    ngrams, freqs = as_tuples(freq.tokens, rows), counts.tolist()
    del rows, counts
    if not ngrams:
        entropy = f" and min_entropy={cfg.min_entropy:g}" if cfg.min_entropy is not None else ""
        raise ZenError(
            f"no n-gram of length {cfg.min_n}..{cfg.max_n} reached min_freq={cfg.freq_threshold} and "
            f"min_pmi={cfg.pmi_threshold:g}{entropy} in {freq.chars:,} chars of corpus; lower the thresholds "
            f"(--min-freq/--min-pmi/--min-entropy) or use a larger corpus"
        )
    folded = 0
    if cfg.style == "raw":
        ngrams, freqs, folded = _fold_raw(ngrams, freqs)
    if cfg.max_size is not None:  # most frequent first (`ranked_rows`): the cap keeps the top
        ngrams, freqs = ngrams[: cfg.max_size], freqs[: cfg.max_size]
    return Lexicon(ngrams, freqs, cfg.style), per_length, folded


def _corpus_info(freq: FrequentNgrams) -> dict[str, Any]:
    return {
        "files": freq.sources,
        "lines": freq.lines,
        "chars": freq.chars,
        "tokens": freq.total_tokens,
        "positions": {str(n): freq.positions[n] for n in sorted(freq.positions)},
    }


def _finish(freq: FrequentNgrams, cfg: LexiconConfig, times: dict[str, float]) -> LexiconResult:
    t0 = time.perf_counter()
    lexicon, per_length, folded = select_lexicon(freq, cfg, release=True)  # the caller reads only its totals
    times["select"] = time.perf_counter() - t0
    return LexiconResult(lexicon, _settings(cfg, freq.tokenizer), _corpus_info(freq), per_length,
                         times=times, merged_raw=folded)


# ----------------------------------------------------------------------------- commands


def build(cfg: LexiconConfig, corpus: Sequence[str | Path] | None = None, *, console=None) -> LexiconResult:
    """Count `corpus` (default cfg.corpus) with the workers, merge, select, save. A large corpus is counted
    in passes (`LexiconConfig.passes`): short n-grams first, then longer, leaving out what cannot be frequent."""
    files = [Path(p) for p in (corpus if corpus else cfg.corpus)]
    if not files:
        raise ZenError("corpus: no corpus files given; expected one or more text files (one sentence per line)")
    tokenizer = make_tokenizer(cfg)
    signature = tokenizer.signature()
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    with PeakMemory() as mem, _temp_folder(cfg, Path(cfg.output).parent) as tmp:
        mem.at("first_passes")
        known = _shorter_passes(console, cfg, files, tokenizer, signature, tmp, times)
        mem.at("count")
        run = _count_with_progress(console, cfg, files, tokenizer, signature, tmp / "counts", known=known)
        times["count"] = run.seconds
        t1 = time.perf_counter()
        mem.at("merge")
        freq = _merge_with_progress(console, cfg, run.parts, tmp / "merge")
        times["merge"] = time.perf_counter() - t1
        mem.at("select")
        result = _finish(freq, cfg, times)
    times["total"] = time.perf_counter() - t0
    result.memory = mem.report()
    result.save(cfg.output)
    return result


def _shorter_passes(console, cfg: LexiconConfig, files: Sequence[Path], tokenizer: TextTokenizer,
                    signature: dict[str, Any], tmp: Path, times: dict[str, float]) -> KnownFrequent | None:
    """The frequent n-grams of the shorter passes before the last (`LexiconConfig.passes`), each pass
    pruned by the one before; None when one pass will do."""
    known = None
    t0 = time.perf_counter()
    for k in cfg.passes(sum(f.stat().st_size for f in files if f.is_file()))[:-1]:
        run = _count_with_progress(console, cfg, files, tokenizer, signature, tmp / f"pass-{k}", max_n=k,
                                   known=known, label=f"counting 1..{k}")
        freq = _merge_with_progress(console, cfg, run.parts, tmp / f"pass-{k}-merge", max_n=k,
                                    label=f"merging 1..{k}")
        for p in run.parts:
            p.unlink(missing_ok=True)
        known = KnownFrequent.from_frequent(freq, k)
    if known is not None:
        times["first_passes"] = time.perf_counter() - t0
    return known


def count(
    cfg: LexiconConfig, shards: Sequence[str | Path], output: str | Path, *, console=None
) -> tuple[CountRun, dict[str, int]]:
    """Map step: count `shards` into one counts file (exact; mergeable with `merge`)."""
    if not shards:
        raise ZenError("no shard files given; expected one or more text files to count")
    output = Path(output)
    tokenizer = make_tokenizer(cfg)
    signature = tokenizer.signature()
    with PeakMemory() as mem, _temp_folder(cfg, output.parent) as tmp:
        run = _count_with_progress(console, cfg, [Path(s) for s in shards], tokenizer, signature, tmp)
        concat_counts_files(run.parts, output)
    return run, mem.report()


def merge(cfg: LexiconConfig, counts_files: Sequence[str | Path], *, console=None) -> LexiconResult:
    """Reduce step: merge counts files, select, save cfg.output — identical to `build` on the corpus."""
    if not counts_files:
        raise ZenError("no counts files given; expected files made by `zen lexicon count`")
    paths = [Path(p) for p in counts_files]
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    with PeakMemory() as mem, _temp_folder(cfg, Path(cfg.output).parent) as tmp:
        freq = _merge_with_progress(console, cfg, paths, tmp)
        times["merge"] = time.perf_counter() - t0
        result = _finish(freq, cfg, times)
    times["total"] = time.perf_counter() - t0
    result.memory = mem.report()
    result.save(cfg.output)
    return result
