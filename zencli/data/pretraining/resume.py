"""Resuming: the fingerprint of the settings that made an output folder, the manifest rewritten after each
shard, and what an earlier run left there: complete shards of the same fingerprint (reused) and the temp
files of an interrupted write (removed). See "Resuming" in `zencli.data.pretraining`."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zencli.data.pretraining.report import shard_totals
from zencli.data.pretraining.settings import DRAWS, PretrainDataSettings
from zencli.data.pretraining.workers import WORK_DIR
from zencli.data.shards import (
    FORMAT,
    FORMAT_VERSION,
    FREQS_NAME,
    MANIFEST_NAME,
    META_NAME,
    SHARD_PREFIX,
    TMP_PREFIX,
    file_checksum,
    lexicon_checksum,
    read_manifest,
    read_shard_meta,
    vocab_checksum,
    write_manifest,
)
from zencli.diffs import first_difference
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.reading import check_readable
from zencli.text.tokenizer import Tokenizer
from zencli.text.vocab import Vocab


def fingerprint_inputs(settings: PretrainDataSettings, vocab: Vocab, lexicon: Lexicon, tokenizer: Tokenizer,
                       files: Sequence[Path], segmenter: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(corpus files with their checksums, everything that changes the bytes of the shards); `segmenter`
    is `describe_segmenter`'s description. `workers` is not in it: it changes no byte."""
    corpus_info = [{"path": str(f), "sha256": file_checksum(check_readable(f)), "bytes": f.stat().st_size}
                   for f in files]
    inputs = {
        "format": FORMAT, "version": FORMAT_VERSION, "draws": DRAWS, "settings": asdict(settings),
        "vocab": vocab_checksum(vocab), "lexicon": lexicon_checksum(lexicon),
        "corpus": [c["sha256"] for c in corpus_info],
        "tokenizer": {"lowercase": tokenizer.lowercase, "strip_accents": tokenizer.strip_accents},
        "segmenter": segmenter,
    }
    return corpus_info, inputs


def fingerprint_of(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:24]


def open_output(out: Path, fingerprint: str, inputs: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """Make `out` ready for a run with `fingerprint` (emptied of our files with `overwrite`, else refused
    when it was made with other settings). Returns the manifest when every shard is already there."""
    if out.exists() and not out.is_dir():
        raise ZenError(f"{out}: exists and is not a folder; expected an output folder for shards")
    out.mkdir(parents=True, exist_ok=True)
    if overwrite:
        _clear_outputs(out)
    elif (out / MANIFEST_NAME).exists():
        old = read_manifest(out)
        if old.get("fingerprint") != fingerprint and not _earlier_draws(old, inputs):
            why = first_difference(old.get("inputs", {}), inputs) or "?"
            raise ZenError(f"{out}: holds shards made with other settings ({why}); "
                           "use another output folder or --overwrite")
        if old.get("complete") and all(read_shard_meta(out / s["name"]) is not None for s in old["shards"]):
            return old
    for p in _leftovers(out):  # of an interrupted run
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return None


def _earlier_draws(old: dict[str, Any], inputs: dict[str, Any]) -> bool:
    """True for a complete set of shards that differs from this run's only in being made by earlier draws
    (`DRAWS`): valid examples of the same settings, kept rather than made again."""
    if not old.get("complete"):
        return False
    unversioned = {k: v for k, v in json.loads(json.dumps(inputs)).items() if k != "draws"}
    return "draws" not in old.get("inputs", {}) and old.get("inputs") == unversioned


def complete_shards(out_dir: Path, fingerprint: str) -> dict[int, dict[str, Any]]:
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


@dataclass
class ShardManifest:
    """manifest.json: the run's `header` and the shards made so far (`done`, by index), rewritten after
    each shard so an interrupted run says how far it got."""

    out_dir: Path
    header: dict[str, Any]
    done: dict[int, dict[str, Any]]
    n_shards: int

    def add(self, meta: dict[str, Any]) -> None:
        self.done[int(meta["index"])] = meta
        self.save()

    def save(self) -> dict[str, Any]:
        shards = [self.done[i] for i in sorted(self.done)]
        manifest = {**self.header, "complete": len(self.done) == self.n_shards, "shards": shards,
                    "totals": shard_totals(shards)}
        write_manifest(self.out_dir, manifest)
        return manifest


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
