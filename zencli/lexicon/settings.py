"""`LexiconConfig`: the settings of an n-gram lexicon extraction (`zen lexicon`, recipe `job: lexicon`).

They live with the lexicon code that reads them, so the lexicon layer imports nothing above it; the recipe
schema (zencli.config.schema) lists this dataclass among the jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from zencli.errors import ZenError
from zencli.text.reading import EncodingErrors

Language = Literal["zh", "ar"]

# Counts files take about 48 bytes a character counted one pass to length 9; above this a first pass pays.
FIRST_PASS_ABOVE_BYTES = 256 << 20

# Paper (ZEN 2.0, §data): PMI 3 / frequency 15 for Chinese, PMI 10 / frequency 20 for Arabic word pieces.
LEXICON_DEFAULTS: dict[str, tuple[float, int]] = {"zh": (3.0, 15), "ar": (10.0, 20)}


@dataclass
class LexiconConfig:
    """`zen lexicon`: PMI + frequency n-gram extraction."""

    job: Literal["lexicon"] = "lexicon"
    corpus: list[Path] = field(default_factory=list)
    output: Path = Path("runs/lexicon/ngram.txt")
    language: Language = "zh"
    vocab: Path | None = None  # tokenize with this vocab.txt (WordPiece for Arabic); None: char pieces
    lowercase: bool | None = None  # None: True without a vocab; with a vocab, its vocab.json setting (else True)
    min_n: int = 2
    max_n: int = 8
    min_freq: int | None = None  # None: the language default
    min_pmi: float | None = None  # None: the language default
    # Branching entropy filter (bits; zencli/lexicon/pmi.py): keep n-grams whose left and right neighbours
    # both have entropy >= this. None: off. Needs the counts of (max_n+1)-grams, counted when it is set.
    min_entropy: float | None = None
    # keep at most this many n-grams, the most frequent of those that pass the filters: with the thresholds
    # fixed, a larger corpus passes more, and each is a row of the n-gram table a model pretrains. None: all
    max_size: int | None = None
    workers: int = 0  # 0: one per CPU core
    chunk_chars: int = 8_000_000  # characters per counting chunk; bounds memory
    style: Literal["tokens", "raw"] = "tokens"  # ngram.txt: space-joined tokens (ZEN 2.0) or raw (ZEN 1.0)
    tmp_dir: Path | None = None  # spill folder for counts/merge (None: next to the output); needs disk space
    # count the n-grams up to this length in a first pass, then up to twice that, ..., each pass leaving out
    # what the one before rules out (counting/prune.py): the same lexicon with a fraction of the disk. None:
    # 3 for a corpus over 256 MB, else one pass; 0: one pass
    first_pass_n: int | None = None
    # invalid UTF-8 in the text read: "strict" an error naming the file, line and byte; "replace" each undecodable
    # sequence as one U+FFFD, with a count of the lines and sequences replaced (--encoding-errors)
    encoding_errors: EncodingErrors = "strict"

    def validate(self) -> None:
        if not 1 <= self.min_n <= self.max_n <= 8:
            raise ZenError(f"min_n/max_n: expected 1 <= min_n <= max_n <= 8, got {self.min_n}..{self.max_n}")
        if self.min_freq is not None and self.min_freq < 1:
            raise ZenError(f"min_freq: expected an integer >= 1, got {self.min_freq}")
        if self.workers < 0:
            raise ZenError(f"workers: expected >= 0, got {self.workers}")
        if self.min_entropy is not None and not self.min_entropy >= 0:
            raise ZenError(f"min_entropy: expected a number of bits >= 0 (or null: off), got {self.min_entropy}")
        if self.max_size is not None and self.max_size < 1:
            raise ZenError(f"max_size: expected an integer >= 1 (or null: no cap), got {self.max_size}")
        if self.first_pass_n is not None and not (self.first_pass_n == 0 or 2 <= self.first_pass_n <= 8):
            raise ZenError(f"first_pass_n: expected 0 (one pass), 2 to 8, or null (auto), got {self.first_pass_n}")
        if self.chunk_chars < 1000:
            raise ZenError(f"chunk_chars: expected >= 1000, got {self.chunk_chars}")

    @property
    def freq_threshold(self) -> int:
        return self.min_freq if self.min_freq is not None else LEXICON_DEFAULTS[self.language][1]

    @property
    def counted_n(self) -> int:
        """Longest n-grams to count: max_n, and one more for the right/left neighbours of the entropy filter."""
        return self.max_n + 1 if self.min_entropy is not None else self.max_n

    def passes(self, corpus_bytes: int) -> list[int]:
        """The longest n-gram each counting pass counts: first_pass_n, twice that, ..., then counted_n
        (prune.py); [counted_n] for one pass."""
        k = self.first_pass_n if self.first_pass_n is not None else (3 if corpus_bytes > FIRST_PASS_ABOVE_BYTES else 0)
        out = []
        while 0 < k < self.counted_n:
            out.append(k)
            k *= 2
        return out + [self.counted_n]

    @property
    def pmi_threshold(self) -> float:
        return self.min_pmi if self.min_pmi is not None else LEXICON_DEFAULTS[self.language][0]


# job name → settings class; later issues add pretrain/finetune/... here.
