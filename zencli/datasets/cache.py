"""Where converted datasets live, and how a directory is known to be complete.

Cache root: $ZEN_CACHE_DIR, else $XDG_CACHE_HOME/zen, else ~/.cache/zen. A dataset NAME is the directory
`<root>/data/NAME/` (the docs/data.md layout, nothing added inside, so it compares with `diff -r`) plus the
manifest `<root>/data/NAME.manifest.json` beside it: the source archive's sha256 and each file's size,
sha256, lines and chars. A dataset is built in a temporary directory and renamed into place; the
manifest is written last, so a directory without a matching manifest is an interrupted build, never a
complete one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from zencli.atomic_write import atomic_write_text

MANIFEST_VERSION = 1


def cache_root() -> Path:
    if os.environ.get("ZEN_CACHE_DIR"):
        return Path(os.environ["ZEN_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "zen"
    return Path.home() / ".cache" / "zen"


def data_root() -> Path:
    return cache_root() / "data"


def downloads_dir() -> Path:
    return cache_root() / "downloads"


def manifest_path(dataset_dir: Path) -> Path:
    return dataset_dir.parent / f"{dataset_dir.name}.manifest.json"


def file_summary(path: Path) -> dict:
    data = path.read_bytes()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "lines": data.count(b"\n"),
            "chars": len(data.decode("utf-8"))}


def read_manifest(dataset_dir: Path, source_sha256: str) -> dict | None:
    """The manifest of a complete dataset directory built from `source_sha256`, else None.

    Completeness is checked by sizes (cheap); the sha256s are there for `sha256sum`-style audits."""
    try:
        manifest = json.loads(manifest_path(dataset_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION \
            or manifest.get("source_sha256") != source_sha256 or not isinstance(manifest.get("files"), dict):
        return None
    for rel, info in manifest["files"].items():
        f = dataset_dir / rel
        if not f.is_file() or not isinstance(info, dict) or f.stat().st_size != info.get("bytes"):
            return None
    return manifest


def build_atomically(target: Path, build: Callable[[Path], None], *, name: str, source: str,
                     source_sha256: str) -> dict:
    """Run `build(tmp_dir)`, then move tmp_dir to `target` (replacing it) and write its manifest."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.build-{os.getpid()}"
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        build(tmp)
        files = {p.relative_to(tmp).as_posix(): file_summary(p)
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = {"version": MANIFEST_VERSION, "name": name, "source": source,
                    "source_sha256": source_sha256, "files": files}
        manifest_path(target).unlink(missing_ok=True)
        if target.exists():
            target.rename(old)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not target.exists():
            old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)
    atomic_write_text(manifest_path(target), json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
    return manifest


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
