"""People's Daily, January 1998 (PKU annotation) → the `pd98/` layout of docs/data.md.

Source: one paragraph per line, tokens `word/TAG` separated by whitespace. Each line becomes one sentence
in every output: `raw` (words joined), `cws` (words joined by one space), and three character-level
`char<TAB>label` files — `pos` (BMES prefix + PKU tag), `ner` (BMES over PER/LOC/ORG) and `ner-bio`.

Splits: the first `9n // 10` non-empty lines form the pool (the rest is the maintainers' blind test and is
not written); pool line i goes to test when i % 10 == 9, dev when i % 10 == 8, train otherwise.

Entities: LOC = an `ns` token, ORG = an `nt` token, PER = a person read off a run of `nr` tokens. PKU
writes a name as surname/nr + given-name/nr, and prints lists of names and bylines without separators,
so a run is cut into persons by `split_person_run`.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zencli.errors import ZenError

SPLITS = ("train", "dev", "test")
ENTITY_TYPES = ("PER", "LOC", "ORG")
ENTITY_OF_TAG = {"ns": "LOC", "nt": "ORG"}
# Two-character surnames that take the next nr token as given name, like a one-character surname does
# (欧阳, 司马, 诸葛, 南宫, 令狐, 司徒 occur before a given name in the January 1998 corpus).
COMPOUND_SURNAMES = frozenset({"欧阳", "司马", "诸葛", "南宫", "令狐", "司徒", "上官", "东方", "皇甫", "公孙",
                               "慕容", "尉迟", "长孙", "宇文", "夏侯", "澹台", "司空", "端木", "独孤", "轩辕"})
NR_MERGE = "heuristic"  # how nr runs become persons (split_person_run), recorded in stats.json
LONG_LINE = 510  # chars; the common fixed window of BERT-style models (512 minus [CLS]/[SEP])
OUTPUTS = tuple(f"{kind}/{split}.{ext}" for kind, ext in
                (("raw", "txt"), ("cws", "txt"), ("pos", "tsv"), ("ner", "tsv"), ("ner-bio", "tsv"))
                for split in SPLITS)

_GAP = re.compile(r"\s+")


@dataclass
class Sentence:
    words: list[str]
    tags: list[str]
    entities: list[tuple[int, int, str]]  # token spans [start, end) with their type
    nr_runs: list[tuple[int, int]]  # (run length, persons it was split into)


def pool_size(n_lines: int) -> int:
    """Lines 0..pool_size-1 are published; the last 10% are withheld."""
    return n_lines * 9 // 10


def split_of(index: int) -> str:
    r = index % 10
    return "test" if r == 9 else "dev" if r == 8 else "train"


def split_person_run(words: list[str]) -> list[tuple[int, int]]:
    """Cut a run of consecutive nr tokens into persons; returns [start, end) spans over `words`.

    A one-character token (or a compound surname) is a surname and takes the next token as given name;
    any other token is a person by itself. A run of exactly three tokens whose first two have one
    character each is one person with a double surname (陈 方 安生 → 陈方安生)."""
    if len(words) == 3 and len(words[0]) == 1 and len(words[1]) == 1:
        return [(0, 3)]
    spans, i = [], 0
    while i < len(words):
        is_surname = len(words[i]) == 1 or words[i] in COMPOUND_SURNAMES
        end = i + 2 if is_surname and i + 1 < len(words) else i + 1
        spans.append((i, end))
        i = end
    return spans


def find_entities(words: list[str], tags: list[str]) -> tuple[list[tuple[int, int, str]], list[tuple[int, int]]]:
    """Token-level entities of one sentence, and (length, persons) for each nr run in it."""
    entities: list[tuple[int, int, str]] = []
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(tags):
        if tags[i] == "nr":
            j = i
            while j < len(tags) and tags[j] == "nr":
                j += 1
            persons = split_person_run(words[i:j])
            entities.extend((i + a, i + b, "PER") for a, b in persons)
            runs.append((j - i, len(persons)))
            i = j
            continue
        if tags[i] in ENTITY_OF_TAG:
            entities.append((i, i + 1, ENTITY_OF_TAG[tags[i]]))
        i += 1
    return entities, runs


def parse_line(line: str, where: str) -> tuple[list[str], list[str]]:
    words, tags = [], []
    for token in line.split():
        word, slash, tag = token.rpartition("/")
        if not slash or not word or not tag:
            raise ZenError(f"{where}: token {token!r} is not WORD/TAG; expected PKU `word/tag` tokens "
                           "separated by spaces")
        words.append(word)
        tags.append(tag)
    return words, tags


def bmes(length: int) -> list[str]:
    return ["S"] if length == 1 else ["B"] + ["M"] * (length - 2) + ["E"]


def pos_labels(sentence: Sentence) -> list[str]:
    return [f"{p}-{tag}" for word, tag in zip(sentence.words, sentence.tags) for p in bmes(len(word))]


def ner_labels(sentence: Sentence, scheme: str = "bmes") -> list[str]:
    """One label per character: BMES (`ner/`) or BIO (`ner-bio/`) over the token-level entities."""
    starts = [0]
    for word in sentence.words:
        starts.append(starts[-1] + len(word))
    labels = ["O"] * starts[-1]
    for a, b, kind in sentence.entities:
        n = starts[b] - starts[a]
        prefixes = bmes(n) if scheme == "bmes" else ["B"] + ["I"] * (n - 1)
        for k, p in enumerate(prefixes):
            labels[starts[a] + k] = f"{p}-{kind}"
    return labels


def _char_block(chars: str, labels: list[str]) -> str:
    return "".join(f"{c}\t{label}\n" for c, label in zip(chars, labels)) + "\n"


Bar = Callable[[str, int], Callable[[int], None]]  # bar(description, total) -> advance(n)


def _no_bar(description: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def parse(text: str, source: str, bar: Bar = _no_bar) -> tuple[list[Sentence], dict]:
    """All non-empty lines of the source as Sentences (document order), and whole-source statistics."""
    sentences: list[Sentence] = []
    gaps: Counter[int] = Counter()
    fullwidth = digits = halfwidth = bracketed = 0
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    advance = bar("reading pd98", len(lines))
    for lineno, line in enumerate(lines, 1):
        advance(1)
        line = line.rstrip()
        if not line.strip():
            continue
        words, tags = parse_line(line, f"{source}:{lineno}")
        gaps.update(len(g) for g in _GAP.findall(line.strip()))
        for word in words:
            for c in word:
                o = ord(c)
                if 0xFF01 <= o <= 0xFF5E:
                    fullwidth += 1
                    digits += 0xFF10 <= o <= 0xFF19
                elif 0x21 <= o <= 0x7E:
                    halfwidth += 1
            # Inline completions and descriptions of rare characters: 郑（州）, 惠（君音）, 〈民音〉.
            bracketed += len(word) > 1 and any(unicodedata.category(c) in ("Ps", "Pe") for c in word)
        entities, runs = find_entities(words, tags)
        sentences.append(Sentence(words, tags, entities, runs))
    stats = {"source_lines": len(lines)}
    stats.update({f"separators_of_{n}_spaces": gaps[n] for n in sorted(gaps) if n != 2})
    stats.update(halfwidth_ascii_chars=halfwidth, fullwidth_ascii_chars=fullwidth, fullwidth_digits=digits,
                 tokens_with_inline_brackets=bracketed)
    return sentences, stats


def _split_stats(sentences: list[Sentence], train_words: set[str] | None) -> dict:
    lengths = [sum(len(w) for w in s.words) for s in sentences]
    words = [w for s in sentences for w in s.words]
    entities = Counter(kind for s in sentences for _, _, kind in s.entities)
    entity_chars: Counter[str] = Counter()
    for s in sentences:
        for a, b, kind in s.entities:
            entity_chars[kind] += sum(len(w) for w in s.words[a:b])
    tags = Counter(t for s in sentences for t in s.tags)
    labels = {label for s in sentences for label in pos_labels(s)}
    stats = {
        "sentences": len(sentences),
        "chars": sum(lengths),
        "words": len(words),
        "word_types": len(set(words)),
        "max_sentence_chars": max(lengths, default=0),
        "mean_sentence_chars": round(sum(lengths) / len(sentences), 1) if sentences else 0.0,
        "sentences_over_510_chars": sum(n > LONG_LINE for n in lengths),
        "entities": {k: entities[k] for k in ENTITY_TYPES},
        "entity_chars": {k: entity_chars[k] for k in ENTITY_TYPES},
        "pos_tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))),
        "pos_labels": len(labels),
        "pos_label_set": sorted(labels),
    }
    if train_words is not None:
        oov = sum(w not in train_words for w in words)
        stats["oov_rate_vs_train"] = round(oov / len(words), 4) if words else 0.0
    return stats


def convert(text: str, out: Path, source: str, bar: Bar = _no_bar) -> dict:
    """Write raw/ cws/ pos/ ner/ ner-bio/ under `out`; returns the statistics for stats.json (without the
    provenance header). `source` names the text in error messages."""
    sentences, source_stats = parse(text, source, bar)
    pool = pool_size(len(sentences))
    # The caption line `图片：` (photo) alone, the most frequent very short line; counted where published.
    source_stats["count_tupian"] = sum("".join(s.words) == "图片：" for s in sentences[:pool])
    by_split: dict[str, list[Sentence]] = {s: [] for s in SPLITS}
    for i, sentence in enumerate(sentences[:pool]):
        by_split[split_of(i)].append(sentence)

    for kind in ("raw", "cws", "pos", "ner", "ner-bio"):
        (out / kind).mkdir(parents=True, exist_ok=True)
    advance = bar("writing pd98", pool)
    for split, items in by_split.items():
        with open(out / "raw" / f"{split}.txt", "w", encoding="utf-8", newline="\n") as raw, \
                open(out / "cws" / f"{split}.txt", "w", encoding="utf-8", newline="\n") as cws, \
                open(out / "pos" / f"{split}.tsv", "w", encoding="utf-8", newline="\n") as pos, \
                open(out / "ner" / f"{split}.tsv", "w", encoding="utf-8", newline="\n") as ner, \
                open(out / "ner-bio" / f"{split}.tsv", "w", encoding="utf-8", newline="\n") as bio:
            for s in items:
                chars = "".join(s.words)
                raw.write(chars + "\n")
                cws.write(" ".join(s.words) + "\n")
                pos.write(_char_block(chars, pos_labels(s)))
                ner.write(_char_block(chars, ner_labels(s, "bmes")))
                bio.write(_char_block(chars, ner_labels(s, "bio")))
                advance(1)

    run_lengths = Counter(n for s in sentences for n, _ in s.nr_runs)
    train_words = {w for s in by_split["train"] for w in s.words}
    splits = {split: _split_stats(items, None if split == "train" else train_words)
              for split, items in by_split.items()}
    return {
        "source": source_stats,
        "n_lines": len(sentences),
        "n_pool": pool,
        "nr_run_lengths": {str(n): run_lengths[n] for n in sorted(run_lengths)},
        "nr_runs_split_into_several_persons": sum(p > 1 for s in sentences for _, p in s.nr_runs),
        "splits": splits,
    }
