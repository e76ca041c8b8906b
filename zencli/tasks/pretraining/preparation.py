"""Stages 1–2 (`prepare`): check the corpus and the output directory, then the vocabulary and lexicon
(`vocab_lexicon`) and the shards (`shards`); and what they produced, loaded for training."""

from __future__ import annotations

import glob
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from zencli.atomic_write import atomic_write_text
from zencli.config.pretrain import PretrainConfig
from zencli.data.documents import read_documents
from zencli.data.shards import PretrainShards
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.tasks.pretraining.heldout import HeldoutSet
from zencli.tasks.pretraining.rundir import (
    RECIPE_NAME,
    built_files,
    check_output_dir,
    clear_outputs,
    recipe_yaml,
    write_marker,
)
from zencli.tasks.pretraining.shards import make_shards
from zencli.tasks.pretraining.vocab_lexicon import vocab_and_lexicon
from zencli.text.vocab import Vocab


@dataclass
class Prepared:
    """What stages 1–2 produced (plain data: it is broadcast to the other ranks)."""

    vocab: Path
    ngram: Path
    train_dir: Path
    heldout_dir: Path | None
    init_kind: str | None = None
    built: list[str] = field(default_factory=list)
    generation: dict[str, Any] = field(default_factory=dict)  # "train"/"heldout" → GenerationResult


def prepare(cfg: PretrainConfig, *, console: Console | None = None) -> Prepared:
    """Stages 1–2 (see `zencli.tasks.pretraining`) in `cfg.train.output_dir`; idempotent."""
    d = cfg.data
    out = Path(cfg.train.output_dir)

    def say(text: str) -> None:
        if console:
            console.print(escape(text), highlight=False, soft_wrap=True)

    if not d.corpus:
        raise ZenError("data.corpus: no corpus files; give raw text files in the recipe (data.corpus)")
    corpus = expand_corpus(d.corpus, "data.corpus")
    heldout = expand_corpus(d.heldout, "data.heldout") if d.heldout else []
    check_output_dir(cfg, out)
    check_documents(corpus, d.layout, "data.corpus")
    if heldout:
        check_documents(heldout, d.layout, "data.heldout")
    if cfg.train.overwrite and out.is_dir():
        clear_outputs(out)
    out.mkdir(parents=True, exist_ok=True)
    built = built_files(out)
    write_marker(cfg, out, built)
    atomic_write_text(out / RECIPE_NAME, recipe_yaml(cfg))
    vocab, ngram, init_kind = vocab_and_lexicon(cfg, corpus, out, built, say, console)
    train_dir, heldout_dir, generation = make_shards(cfg, corpus, heldout, vocab, ngram, out, say, console)
    return Prepared(vocab, ngram, train_dir, heldout_dir, init_kind, built, generation)


def expand_corpus(entries: list[Path], key: str) -> list[Path]:
    """Paths as given, glob patterns expanded (sorted); a missing file or an empty pattern is an error."""
    files: list[Path] = []
    for entry in entries:
        text = str(entry)
        if glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not found:
                raise ZenError(f"{key}: pattern {text!r} matches no file")
            files.extend(found)
        elif not entry.is_file():
            raise ZenError(f"{key}: {entry}: no such file; expected raw text, one sentence per line")
        else:
            files.append(entry)
    return files


def check_documents(files: list[Path], layout: str, key: str) -> None:
    """At least two documents with text (NSP draws its random B from another document). Stops reading
    at the second document, so a real corpus costs nothing."""
    names = ", ".join(map(str, files))
    n = sum(1 for _ in itertools.islice(read_documents(files, layout), 2))  # type: ignore[arg-type]
    if n == 0:
        raise ZenError(f"{key}: {names}: no text to pretrain on (empty, or blank lines only); "
                       "expected sentences, one per line")
    if n == 1:
        raise ZenError(f"{key}: {names}: holds a single document, so next-sentence prediction has no random "
                       "next segment; expected at least two documents (a blank line between documents, or "
                       "one document per line with data.layout: line)")



@dataclass
class PretrainData:
    """What training reads of the prepared files."""

    vocab: Vocab
    lexicon: Lexicon
    shards: PretrainShards  # training examples
    heldout: HeldoutSet | None


def load_prepared(cfg: PretrainConfig, prepared: Prepared) -> PretrainData:
    vocab = Vocab.load(prepared.vocab)
    lexicon = Lexicon.load(prepared.ngram)
    shards = PretrainShards(prepared.train_dir, vocab=vocab, lexicon=lexicon)
    heldout = None
    if prepared.heldout_dir is not None:
        heldout = HeldoutSet(PretrainShards(prepared.heldout_dir, vocab=vocab, lexicon=lexicon), vocab.mask_id,
                             cfg.data.eval_batch_size, cfg.data.heldout_examples)
    return PretrainData(vocab, lexicon, shards, heldout)
