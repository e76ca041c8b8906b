"""Public benchmark datasets as data: where each file comes from (pinned), how it is checked, how it converts.

A module contributes `DATASETS: tuple[Dataset, ...]`; `MODULES` lists those modules (one missing from this
installation is skipped, so a language's converters plug in by adding their module), and `catalog` collects
them (here only the types and the machinery, so that the modules can import this one without a circle).
Fetching a dataset:

    1. each `Source` is taken from `<cache>/downloads/<name>/` when a verified copy is there, else from
       `--from DIR`, else downloaded (urllib; `ZEN_DATA_MIRROR=BASE` reads `https://HOST/PATH` from
       `BASE/HOST/PATH`, e.g. a local server or an institute's mirror);
    2. its sha256 (and size) must match the pin; a bad download is deleted, and the error names the URL,
       the expected and the found digest;
    3. `convert({source name: path}, tmp_dir)` writes zen's layout and returns stats; zen adds `NOTICE`
       (sources, commits, sha256, license, citation, the converter's notes) and `stats.json`, and moves the
       directory into `<cache>/data/<name>/` atomically with its manifest (`cache.build_atomically`).

A source whose sha256 could not be taken when it was pinned carries `sha256=""`, `size=0` and instead the git
blob id of the file at the pinned commit (`git_blob`, read from the repository's tree): the bytes GitHub serves
for that commit hash to exactly that id, so they are pinned all the same; the sha256 found goes into NOTICE.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zencli.datasets import cache
from zencli.errors import ZenError

MODULES = ("zencli.datasets.chinese", "zencli.datasets.arabic")
MIRROR_ENV = "ZEN_DATA_MIRROR"
TIMEOUT_S = 60
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Source:
    """One pinned file: saved as `<cache>/downloads/<dataset>/<name>`, handed to the converter under `name`."""

    name: str
    url: str      # pinned: a commit, tag or release in the URL
    sha256: str   # "" only with git_blob (see the module docstring)
    size: int     # bytes; 0 when unknown (git_blob sources)
    git_blob: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    task: str
    title: str
    license: str
    citation: str
    homepage: str
    sources: tuple[Source, ...]
    convert: Callable[[dict[str, Path], Path], dict]  # {source name: verified file}, out dir -> stats
    language: str = "zh"

    @property
    def download_bytes(self) -> int | None:
        """The sources' total size, None when one of them is unknown."""
        return None if any(s.size <= 0 for s in self.sources) else sum(s.size for s in self.sources)


def source_digest(ds: Dataset) -> str:
    """One digest of all pins of `ds`: the manifest's `source_sha256`, so a changed pin means a rebuild."""
    pins = "".join(f"{s.name}\t{s.url}\t{s.sha256 or 'git-blob:' + s.git_blob}\n" for s in ds.sources)
    return hashlib.sha256(pins.encode("utf-8")).hexdigest()


def pinned_ref(url: str) -> str:
    """The commit, tag or release a pinned URL names ('' when none can be told)."""
    m = re.match(r"https?://raw\.githubusercontent\.com/[^/]+/[^/]+/([^/]+)/", url)
    if m:
        return m.group(1)
    m = re.search(r"/(?:releases/download|archive|blob|raw)/([^/]+)/", url) or re.search(r"\b([0-9a-f]{40})\b", url)
    return m.group(1) if m else ""


def mirrored(url: str) -> str:
    """`url` read through $ZEN_DATA_MIRROR when set (BASE/HOST/PATH for https://HOST/PATH)."""
    base = os.environ.get(MIRROR_ENV, "").strip()
    if not base or not url.startswith("https://"):
        return url
    return base.rstrip("/") + "/" + url.removeprefix("https://")


# --- checking ---------------------------------------------------------------------------------------------

def digests(path: Path) -> tuple[str, str, int]:
    """(sha256, git blob sha1, size) of a file, in one read."""
    size = path.stat().st_size
    sha256, blob = hashlib.sha256(), hashlib.sha1()  # noqa: S324 - git's object id, not a security digest
    blob.update(f"blob {size}\0".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest(), size


def check(path: Path, source: Source, origin: str) -> str:
    """The sha256 of `path` if it is `source`'s pinned file, else a one-line ZenError naming `origin`."""
    sha256, blob, size = digests(path)
    if source.sha256:
        if sha256 != source.sha256:
            raise ZenError(f"{origin}: sha256 mismatch for {source.name}: expected {source.sha256}, got {sha256} "
                           f"({size:,} bytes, expected {source.size:,})")
    elif blob != source.git_blob:
        raise ZenError(f"{origin}: git blob id mismatch for {source.name}: expected {source.git_blob}, got {blob}")
    return sha256


def is_verified(path: Path, source: Source) -> bool:
    if not path.is_file() or (source.size and path.stat().st_size != source.size):
        return False
    try:
        check(path, source, str(path))
    except ZenError:
        return False
    return True


# --- getting the sources ----------------------------------------------------------------------------------

def offline_message(ds: Dataset, reason: str) -> str:
    wanted = ", ".join(f"{s.name} ({s.url})" for s in ds.sources)
    return (f"{reason}; without network, download {wanted} elsewhere into one folder DIR and run "
            f"`zen data fetch {ds.name} --from DIR` (the same sha256 check applies)")


ByteBar = Callable[[str, int], Callable[[int], None]]


def _no_bar(description: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def download(ds: Dataset, source: Source, dest: Path, bar: ByteBar = _no_bar) -> None:
    """Download `source` to `dest` (through a temporary file, so `dest` is complete or absent)."""
    url = mirrored(source.url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "zen-data-fetch"})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, open(part, "wb") as f:  # noqa: S310
            total = int(response.headers.get("Content-Length") or source.size or 0)
            advance = bar(f"{ds.name}/{source.name}", total)
            while block := response.read(_CHUNK):
                f.write(block)
                advance(len(block))
    except urllib.error.HTTPError as e:
        part.unlink(missing_ok=True)
        raise ZenError(offline_message(ds, f"could not download {url} (HTTP {e.code} {e.reason})")) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        part.unlink(missing_ok=True)
        reason = getattr(e, "reason", None) or e
        raise ZenError(offline_message(ds, f"could not download {url} ({reason})")) from None
    except BaseException:  # Ctrl-C: no partial file stays behind
        part.unlink(missing_ok=True)
        raise
    part.replace(dest)


def _local_copy(from_dir: Path, source: Source) -> Path:
    """The file for `source` in a `--from` folder: under its name, or under the URL's last part."""
    for candidate in (from_dir / source.name, from_dir / source.url.rsplit("/", 1)[-1]):
        if candidate.is_file():
            return candidate
    raise ZenError(f"{from_dir}: no file {source.name}; download it from {source.url} into that folder")


def gather(ds: Dataset, *, from_dir: Path | None = None, bar: ByteBar = _no_bar) -> dict[str, tuple[Path, str]]:
    """{source name: (verified file under <cache>/downloads/<name>/, its sha256)}: kept copies, `--from`
    copies or downloads. A file that fails its check is deleted (a download) or left alone (the user's)."""
    folder = cache.downloads_dir() / ds.name
    got: dict[str, tuple[Path, str]] = {}
    for source in ds.sources:
        kept = folder / source.name
        if is_verified(kept, source):
            got[source.name] = (kept, digests(kept)[0])
            continue
        kept.unlink(missing_ok=True)  # absent or damaged: replaced below
        if from_dir is not None:
            local = _local_copy(Path(from_dir).expanduser(), source)
            check(local, source, f"{local} (for {source.url})")
            folder.mkdir(parents=True, exist_ok=True)
            part = kept.with_name(f".{kept.name}.part-{os.getpid()}")
            shutil.copyfile(local, part)
            part.replace(kept)
        else:
            download(ds, source, kept, bar)
        try:
            sha256 = check(kept, source, source.url)
        except ZenError:
            kept.unlink(missing_ok=True)
            raise
        got[source.name] = (kept, sha256)
    return got


# --- converting -------------------------------------------------------------------------------------------

def notice(ds: Dataset, got: dict[str, tuple[Path, str]], notes: list[str]) -> str:
    lines = [ds.title, "", f"Dataset: {ds.name} (task {ds.task}, language {ds.language})",
             f"Homepage: {ds.homepage}", f"License: {ds.license}", "",
             "Sources (each checked against its pinned sha256 before conversion):"]
    for s in ds.sources:
        lines += [f"  {s.name}: {s.url}", f"    pinned at: {pinned_ref(s.url) or '-'}",
                  f"    sha256: {got[s.name][1]}" + (f" (git blob {s.git_blob})" if s.git_blob else "")]
    if notes:
        lines += ["", "Conversion notes:"] + [f"  - {n}" for n in notes]
    lines += ["", "Citation:", *("  " + c for c in ds.citation.strip().splitlines()), "",
              f"Converted by zen (`zen data fetch {ds.name}`); stats.json counts what was read, written and dropped.",
              "The data keeps its own license above; zen's license does not apply to it."]
    return "\n".join(lines) + "\n"


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def build(ds: Dataset, target: Path, got: dict[str, tuple[Path, str]]) -> None:
    """Convert the verified sources into `target` atomically (manifest last)."""
    paths = {name: path for name, (path, _) in got.items()}

    def make(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        stats = ds.convert(paths, tmp)
        if not isinstance(stats, dict):
            raise TypeError(f"the converter of {ds.name} returned {type(stats).__name__}, not a stats dict")
        notes = [str(n) for n in stats.get("notes", ())]
        provenance = {s.name: {"url": s.url, "pinned_at": pinned_ref(s.url), "sha256": got[s.name][1],
                               "bytes": got[s.name][0].stat().st_size} for s in ds.sources}
        # A converter may write a NOTICE of its own (e.g. a license block that must travel verbatim): it follows
        # zen's provenance, unchanged.
        own = (tmp / "NOTICE").read_text(encoding="utf-8") if (tmp / "NOTICE").is_file() else ""
        _write_text(tmp / "NOTICE", notice(ds, got, notes) + (f"\n{own}" if own else ""))
        _write_text(tmp / "stats.json", json.dumps({"dataset": ds.name, "task": ds.task, "provenance": provenance,
                                                    **stats}, ensure_ascii=False, indent=1) + "\n")

    cache.build_atomically(target, make, name=ds.name, source=", ".join(s.url for s in ds.sources),
                           source_sha256=source_digest(ds))
