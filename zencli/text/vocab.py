"""BERT `vocab.txt`: one token per line, token id = line index (0-based).

Strings are kept exactly as written (only the line end is removed, as BERT's and HF's loaders do), so a
released vocabulary round-trips byte for byte. A duplicate token or an empty line would silently shift or
alias ids of the embedding table, so both are errors naming the line. Special tokens are looked up by
name, never by position: zen's own vocabularies put them first, BERT-Chinese has [PAD]=0, [UNK]=100.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from zencli.atomic_write import atomic_write_text
from zencli.errors import ZenError, where
from zencli.text.reading import iter_lines

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)

SIDECAR_FORMAT = "zen-vocab"


class Vocab:
    """An ordered, duplicate-free list of token strings with O(1) lookups both ways."""

    def __init__(self, tokens: Iterable[str], *, source: str | Path | None = None):
        self._tokens: list[str] = list(tokens)
        self._ids: dict[str, int] = {}
        self.source = str(source) if source is not None else "<vocab>"
        for i, tok in enumerate(self._tokens):
            _check_token(tok, self.source, i)
            first = self._ids.setdefault(tok, i)
            if first != i:
                raise ZenError(
                    f"{self.source}: token {tok!r} at id {i} duplicates id {first}; token ids must be unique"
                )

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Read a vocab.txt; errors name the file and 1-based line."""
        tokens: list[str] = []
        ids: dict[str, int] = {}
        for lineno, text in iter_lines(path):
            if text == "":
                raise ZenError(f"{where(path, lineno)}: empty line in vocabulary; expected one token per line")
            first = ids.setdefault(text, lineno)
            if first != lineno:
                raise ZenError(
                    f"{where(path, lineno)}: duplicate token {text!r} (first on line {first}); "
                    "expected each token once (id = line index)"
                )
            tokens.append(text)
        return cls(tokens, source=path)

    def save(self, path: str | Path) -> None:
        """Write vocab.txt atomically (temp file + rename), one token per line, `\\n` line ends."""
        atomic_write_text(Path(path), "".join(tok + "\n" for tok in self._tokens))

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._tokens == other._tokens

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens from {self.source})"

    @property
    def tokens(self) -> list[str]:
        """The tokens in id order (a copy)."""
        return list(self._tokens)

    @property
    def token_ids(self) -> dict[str, int]:
        """The token → id mapping (shared, do not mutate): for hot loops that want `dict.get`."""
        return self._ids

    def get(self, token: str) -> int | None:
        """The id of `token`, or None if it is not in the vocabulary."""
        return self._ids.get(token)

    def token_to_id(self, token: str) -> int:
        """The id of `token`, or the [UNK] id if it is not in the vocabulary."""
        i = self._ids.get(token)
        return self.unk_id if i is None else i

    def id_to_token(self, i: int) -> str:
        if not 0 <= i < len(self._tokens):
            raise ZenError(f"{self.source}: token id {i} out of range; the vocabulary has ids 0..{len(self) - 1}")
        return self._tokens[i]

    def special_id(self, name: str) -> int:
        """The id of a special token such as "[MASK]"; a clear error if this vocabulary lacks it."""
        i = self._ids.get(name)
        if i is None:
            raise ZenError(f"{self.source}: vocabulary has no {name} token; expected one line reading exactly {name}")
        return i

    @property
    def pad_id(self) -> int:
        return self.special_id(PAD)

    @property
    def unk_id(self) -> int:
        return self.special_id(UNK)

    @property
    def cls_id(self) -> int:
        return self.special_id(CLS)

    @property
    def sep_id(self) -> int:
        return self.special_id(SEP)

    @property
    def mask_id(self) -> int:
        return self.special_id(MASK)


def _check_token(tok: str, source: str, i: int) -> None:
    if not isinstance(tok, str) or tok == "":
        raise ZenError(f"{source}: token id {i} is empty; expected a non-empty string")
    if "\n" in tok or "\r" in tok:
        raise ZenError(f"{source}: token id {i} ({tok!r}) contains a line break; vocab.txt holds one token per line")


def sidecar_path(vocab_path: str | Path) -> Path:
    """`vocab.txt` → `vocab.json`: the settings written next to a vocabulary built by zen."""
    return Path(vocab_path).with_suffix(".json")


def read_sidecar(vocab_path: str | Path) -> dict[str, Any] | None:
    """The settings zen stored next to `vocab_path` (lowercase, strip_accents, language, …), or None when
    there is no zen sidecar (released BERT/ZEN vocabularies have none; a foreign vocab.json is ignored)."""
    p = sidecar_path(vocab_path)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZenError(
            f"{p}: not valid UTF-8 JSON ({e}); expected the settings zen wrote with the vocabulary"
        ) from None
    if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
        return None
    return data


def write_sidecar(vocab_path: str | Path, data: dict[str, Any]) -> Path:
    p = sidecar_path(vocab_path)
    atomic_write_text(p, json.dumps({"format": SIDECAR_FORMAT, **data}, ensure_ascii=False, indent=2) + "\n")
    return p


