"""`ngram.txt`: the n-gram lexicon file of released ZEN checkpoints.

One `ngram,freq` per line; the n-gram's id is its line index + 1 (id 0 is padding), so a line that is
skipped or added shifts every id after it. Reading is therefore strict: every line must parse, no
empty lines, no duplicate n-grams.

Two styles exist in the wild:
  * "tokens" (ZEN 2.0): the n-gram's tokens joined by single spaces, `北 京,9000`;
  * "raw" (ZEN 1.0): the tokens concatenated, `北京,9000` (WordPiece `##` markers dropped).
A file in which any n-gram field contains a space is read as "tokens"; otherwise as "raw", each
character one token. The line is split on its LAST comma, since an n-gram may contain a comma itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from zencli.atomic_write import atomic_write
from zencli.errors import ZenError, where
from zencli.text.reading import iter_lines

STYLES = ("tokens", "raw")


def _shorten(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def raw_form(ngram: tuple[str, ...]) -> str:
    """The ZEN 1.0 spelling of an n-gram: tokens concatenated, `##` continuation markers removed."""
    return "".join(t[2:] if t.startswith("##") and len(t) > 2 else t for t in ngram)


_SAVE_BLOCK = 1 << 16  # lines written at once


@dataclass
class Lexicon:
    """An ordered n-gram lexicon; `id(ngram)` is the 1-based line number in ngram.txt (0: absent)."""

    ngrams: list[tuple[str, ...]]
    freqs: list[int]
    style: str = "tokens"
    _index: dict[tuple[str, ...], int] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.ngrams) != len(self.freqs):
            raise ValueError(f"{len(self.ngrams)} n-grams but {len(self.freqs)} frequencies")
        if self.style not in STYLES:
            raise ZenError(f"lexicon style: expected one of {', '.join(STYLES)}, got {self.style!r}")

    def __len__(self) -> int:
        return len(self.ngrams)

    def id(self, ngram: tuple[str, ...] | list[str]) -> int:
        """Line index + 1 of `ngram`, or 0 when it is not in the lexicon."""
        if self._index is None:
            self._index = {g: i + 1 for i, g in enumerate(self.ngrams)}
        return self._index.get(tuple(ngram), 0)

    def freq(self, ngram: tuple[str, ...] | list[str]) -> int:
        i = self.id(ngram)
        return self.freqs[i - 1] if i else 0

    # ------------------------------------------------------------------ reading

    @classmethod
    def load(cls, path: str | Path) -> Lexicon:
        """Read ngram.txt in either released style (see the module docstring)."""
        path = Path(path)
        fields: list[str] = []
        freqs: list[int] = []
        any_space = False
        for lineno, text in iter_lines(path):
            comma = text.rfind(",")
            ngram, freq = (text[:comma], text[comma + 1 :]) if comma >= 0 else (text, "")
            if comma < 0 or not ngram or not (freq.isascii() and freq.isdigit()):
                got = "an empty line" if not text else _shorten(text)
                raise ZenError(
                    f"{where(path, lineno)}: expected 'ngram,freq' with a non-empty n-gram and an integer "
                    f"freq >= 0, got {got} (an n-gram's id is its line number, so no line may be skipped)"
                )
            any_space = any_space or " " in ngram
            fields.append(ngram)
            freqs.append(int(freq))
        style = "tokens" if any_space else "raw"
        ngrams: list[tuple[str, ...]] = []
        seen: dict[tuple[str, ...], int] = {}
        for i, text in enumerate(fields):
            if style == "tokens":
                g = tuple(text.split(" "))
                if "" in g:
                    raise ZenError(
                        f"{where(path, i + 1)}: expected the n-gram's tokens separated by single spaces, "
                        f"got {_shorten(text)}"
                    )
            else:
                g = tuple(text)
            first = seen.setdefault(g, i + 1)
            if first != i + 1:
                raise ZenError(
                    f"{where(path, i + 1)}: n-gram {_shorten(text)} already on line {first}; "
                    f"expected each n-gram once (its id would be ambiguous)"
                )
            ngrams.append(g)
        lexicon = cls(ngrams, freqs, style)
        lexicon._index = {g: i for g, i in seen.items()}
        return lexicon

    # ------------------------------------------------------------------ writing

    def lines(self, style: str | None = None) -> list[str]:
        """The file's lines (without newline) in `style` (default: the lexicon's own)."""
        style = style or self.style
        if style not in STYLES:
            raise ZenError(f"lexicon style: expected one of {', '.join(STYLES)}, got {style!r}")
        out: list[str] = []
        seen: dict[str, int] = {}
        for i, (g, f) in enumerate(zip(self.ngrams, self.freqs)):
            if not g or any(not t or " " in t or "\n" in t or "\r" in t for t in g):
                raise ZenError(f"n-gram {i + 1} {g!r}: expected non-empty tokens without spaces or line ends")
            if f < 0:
                raise ZenError(f"n-gram {i + 1} {g!r}: expected a frequency >= 0, got {f}")
            text = " ".join(g) if style == "tokens" else raw_form(g)
            if style == "raw":
                first = seen.setdefault(text, i + 1)
                if first != i + 1:
                    raise ZenError(
                        f"n-grams {first} and {i + 1} are both {text!r} in style 'raw'; "
                        f"merge them first or save in style 'tokens'"
                    )
            out.append(f"{text},{f}")
        return out

    def save(self, path: str | Path, style: str | None = None) -> None:
        """Write ngram.txt (UTF-8, `\\n` line ends, one n-gram per line, id = line number)."""
        def write(f) -> None:  # a block of lines at a time: a large lexicon is never one string in memory
            block: list[str] = []
            for line in self.lines(style):
                block.append(line)
                if len(block) == _SAVE_BLOCK:
                    f.write(("\n".join(block) + "\n").encode("utf-8"))
                    block = []
            if block:
                f.write(("\n".join(block) + "\n").encode("utf-8"))

        atomic_write(path, write)
