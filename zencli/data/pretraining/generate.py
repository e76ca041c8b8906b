"""`generate_shards`, the driver: check the inputs, fingerprint them, open the output folder, read and
tokenize the corpus, plan the shards and make the missing ones (the stages of `zencli.data.pretraining`)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zencli.atomic_write import atomic_write
from zencli.cpus import usable_cpus
from zencli.data.documents import pair_spans
from zencli.data.pretraining.corpus import TokenizedCorpus, plan_parts, tokenize_corpus
from zencli.data.pretraining.report import GenerationResult
from zencli.data.pretraining.resume import (
    ShardManifest,
    complete_shards,
    fingerprint_inputs,
    fingerprint_of,
    open_output,
)
from zencli.data.pretraining.settings import (
    MERGE_MAX_N,
    PretrainDataSettings,
    check_lexicon_vocab,
    random_token_ids,
)
from zencli.data.pretraining.workers import WORK_DIR, ShardTask, WorkerConfig, run_shards, shared_corpus
from zencli.data.segmenters import ModelLoader, describe_segmenter, make_segmenter
from zencli.data.shards import FORMAT, FORMAT_VERSION, FREQS_NAME, save_npy, shard_name, token_dtype
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.progress import optional_progress
from zencli.text.tokenizer import Tokenizer
from zencli.text.vocab import CLS, MASK, PAD, SEP, Vocab


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
    """Generate (or finish) the pretraining shards of `corpus_files` in `out_dir`; see `zencli.data.pretraining`.

    `workers`: processes tokenizing the corpus and making shards (0: one per CPU core). `console`: a Rich
    console for progress bars, None for silence. `load_model`: how a `model:DIR` segmenter is loaded (the tasks layer's
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
    workers = workers or usable_cpus()
    inputs = _load_inputs(corpus_files, vocab, lexicon, settings, lowercase, load_model)
    corpus_info, fp_inputs = fingerprint_inputs(settings, inputs.vocab, inputs.lexicon, inputs.tokenizer,
                                                inputs.files, inputs.segmenter)
    fingerprint = fingerprint_of(fp_inputs)
    out = Path(out_dir)
    finished = open_output(out, fingerprint, fp_inputs, overwrite)
    if finished is not None:
        return GenerationResult(out, finished, made=0, reused=len(finished["shards"]))
    done = complete_shards(out, fingerprint)

    # Read and tokenize on every run (also a resumed one): the plan and the workers need the token ids.
    # They go to the work folder as they are made (the workers read them there), removed at the end.
    work_dir = out / WORK_DIR
    try:
        corpus, seconds_read = _read_corpus(inputs.files, inputs.tokenizer, settings, console, work_dir, workers)
        n_parts, tasks = _plan_shards(corpus, settings, done, out)
        freqs = np.concatenate([[0], np.asarray(inputs.lexicon.freqs, np.int64)]).astype(np.int64)  # [G+1] by id
        atomic_write(out / FREQS_NAME, lambda f: save_npy(f, freqs))
        header = _manifest_header(inputs, settings, fingerprint, fp_inputs, corpus_info, corpus, n_parts,
                                  len(tasks))
        manifest = ShardManifest(out, header, done, len(tasks))

        pending = [t for t in tasks if t.index not in done]
        config = WorkerConfig(inputs.vocab, inputs.lexicon, settings, out, work_dir, fingerprint, load_model)
        made_examples, seconds_generate = _make_shards(pending, manifest, config, corpus, workers, console)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return GenerationResult(out, manifest.save(), made=len(pending), reused=len(tasks) - len(pending),
                            seconds_read=seconds_read, seconds_generate=seconds_generate,
                            corpus_chars=corpus.chars, made_examples=made_examples)


@dataclass
class _Inputs:
    files: list[Path]
    vocab: Vocab
    lexicon: Lexicon
    tokenizer: Tokenizer
    vocab_name: str
    lexicon_name: str
    unmatched: int  # lexicon n-grams the vocabulary cannot spell
    segmenter: str  # describe_segmenter's description


def _load_inputs(corpus_files: Sequence[str | Path], vocab: Vocab | str | Path, lexicon: Lexicon | str | Path,
                 settings: PretrainDataSettings, lowercase: bool | None, load_model: ModelLoader | None) -> _Inputs:
    """The corpus files, vocabulary, lexicon, tokenizer and segmenter, checked here so that an unusable
    one is a one-line error before any work, not an exception in a worker."""
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
    for name in (PAD, CLS, SEP, MASK):
        vocab.special_id(name)
    random_token_ids(vocab)
    return _Inputs(files, vocab, lexicon, tokenizer, vocab_name, lexicon_name, unmatched, seg_desc)


def _read_corpus(files: list[Path], tokenizer: Tokenizer, settings: PretrainDataSettings,
                 console: Any, work_dir: Path, workers: int) -> tuple[TokenizedCorpus, float]:
    """The tokenized corpus (written to `work_dir` by `workers` processes, read back memory-mapped) and the
    seconds reading it took; fewer than two documents is an error."""
    t0 = time.perf_counter()
    with _bars(console) as progress:
        task = progress.add_task("reading", total=None, extra="") if progress else None

        def on_doc(n_docs: int, chars: int) -> None:
            if progress:
                rate = chars / max(time.perf_counter() - t0, 1e-9)
                progress.update(task, completed=n_docs, extra=f"{n_docs:,} documents, {rate / 1e6:.2f} M chars/s")

        corpus = tokenize_corpus(files, tokenizer, settings.layout, on_doc, directory=work_dir, workers=workers)
    seconds = time.perf_counter() - t0
    if corpus.n_docs == 0:
        raise ZenError(
            f"{', '.join(map(str, files))}: no text to pretrain on (only blank lines, or nothing the vocabulary "
            f"tokenizes); expected sentences, one per line"
        )
    if corpus.n_docs < 2:
        # pair_spans raises its one-line error about a single document
        pair_spans(corpus.segments(0, corpus.n_docs, settings.max_seq_len), settings.max_seq_len,
                   np.random.default_rng(0))
    return corpus, seconds


def _plan_shards(corpus: TokenizedCorpus, settings: PretrainDataSettings, done: dict[int, dict[str, Any]],
                 out: Path) -> tuple[int, list[ShardTask]]:
    """(parts per round, the task of every shard: round r's part k is shard r · n_parts + k); a complete
    shard outside the plan is an error."""
    parts = plan_parts(corpus.doc_tokens(), settings.max_seq_len, settings.examples_per_shard)
    tasks = [ShardTask(r * len(parts) + k, r, k, lo, hi)
             for r in range(settings.dupe_factor) for k, (lo, hi) in enumerate(parts)]
    stale = [i for i in done if i >= len(tasks)]
    if stale:
        raise ZenError(f"{out / shard_name(stale[0])}: not part of this run's plan; "
                       "use another output folder or --overwrite")
    return len(parts), tasks


def _manifest_header(inputs: _Inputs, settings: PretrainDataSettings, fingerprint: str, fp_inputs: dict[str, Any],
                     corpus_info: list[dict[str, Any]], corpus: TokenizedCorpus, n_parts: int,
                     n_shards: int) -> dict[str, Any]:
    """What manifest.json says besides its shards: the inputs, settings and the corpus's size."""
    vocab, lexicon = inputs.vocab, inputs.lexicon
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "fingerprint": fingerprint, "inputs": fp_inputs,
        "settings": asdict(settings), "corpus": corpus_info,
        "vocab": {"path": inputs.vocab_name, "size": len(vocab), "sha256": fp_inputs["vocab"]},
        "lexicon": {"path": inputs.lexicon_name, "size": len(lexicon), "sha256": fp_inputs["lexicon"],
                    "unmatched_ngrams": inputs.unmatched},
        "tokenizer": fp_inputs["tokenizer"], "segmenter": inputs.segmenter,
        "pad_id": vocab.pad_id, "token_dtype": token_dtype(len(vocab)).name,
        "documents": corpus.n_docs, "corpus_chars": corpus.chars, "corpus_tokens": len(corpus.ids),
        "n_parts": n_parts, "n_shards": n_shards,
    }


def _make_shards(pending: list[ShardTask], manifest: ShardManifest, config: WorkerConfig, corpus: TokenizedCorpus,
                 workers: int, console: Any) -> tuple[int, float]:
    """Make the `pending` shards, each added to the manifest as it is written; (examples made, seconds)."""
    made_examples = 0
    t1 = time.perf_counter()
    manifest.save()
    if pending:
        with shared_corpus(corpus, config.work_dir), _bars(console) as progress:
            n_shards = manifest.n_shards
            ptask = (progress.add_task("shards", total=n_shards, completed=n_shards - len(pending), extra="")
                     if progress else None)

            def finished(meta: dict[str, Any]) -> None:
                nonlocal made_examples
                manifest.add(meta)
                made_examples += int(meta["examples"])
                if progress:
                    rate = made_examples / max(time.perf_counter() - t1, 1e-9)
                    progress.update(ptask, advance=1, extra=f"{made_examples:,} examples, {rate:,.0f} examples/s")

            run_shards(pending, config, min(workers, len(pending)), finished)
    return made_examples, time.perf_counter() - t1


def _bars(console: Any):
    """The tokenizing and shard bars (None when quiet): their rate goes in the `extra` field."""
    return optional_progress(console, width=8, field="extra", elapsed=True)
