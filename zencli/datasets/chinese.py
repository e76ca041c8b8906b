"""The Chinese benchmark sets of the ZEN and CHTE papers: pinned public copies and their converters.

Every converter reads the verified source files, writes zen's layout for its task (what the recipes under
zencli/recipes/ read) and returns stats: what it read, wrote and dropped, and `notes` (copied into NOTICE)
for every choice it made, such as a dev split cut from the training file. Bad input is a one-line ZenError
naming the file and line. Layouts:

    ner (weibo, resume, msra,   train.tsv dev.tsv test.tsv: `char<TAB>label`, a blank line after each sentence
         cluener)
    cws (msr, pku, nlpcc2016-   train.txt dev.txt test.txt: one sentence a line, words separated by one space
         cws)
    pos (ud-gsdsimp)            train.tsv dev.tsv test.tsv: `char<TAB>B-UPOS` (joint segmentation and POS)
    sa/dc (chnsenticorp, …)     train.tsv dev.tsv test.tsv: `label<TAB>text`
    mrc (cmrc2018)              train.json heldout.json cmrc2018_dev.json: SQuAD JSON

A dev split cut from the training data takes its last tenth (sentences, lines or articles, in file order),
so that it is the same on every machine; sets without any split are shuffled with `random.Random(SEED)` and
cut 80/10/10.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from zencli.datasets.registry import Dataset, Source
from zencli.errors import ZenError
from zencli.text.labels import segment_labels

SEED = 42
SPLITS = ("train", "dev", "test")
DEV_FRACTION = 10  # the last 1/10 of the training data becomes dev where a set has no dev split

GITHUB_RAW = "https://raw.githubusercontent.com"

# --- reading ----------------------------------------------------------------------------------------------


def decode(data: bytes, where: str) -> str:
    """UTF-8 text (a leading BOM dropped, CRLF read as LF); invalid bytes are an error naming the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ZenError(f"{where}:{line}: invalid UTF-8 at byte offset {e.start}; expected a UTF-8 text file") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n")


def read_lines(path: Path) -> list[str]:
    text = decode(path.read_bytes(), str(path))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def zip_member(path: Path, member: str) -> bytes:
    try:
        with zipfile.ZipFile(path) as z:
            return z.read(member)
    except KeyError:
        raise ZenError(f"{path}: member {member} is missing from the zip archive") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise ZenError(f"{path}: not a readable zip archive ({e})") from None


Sentence = list[tuple[str, str]]  # (char, label) pairs


def blocks(lines: list[str], where: str, parse: Callable[[str, int], tuple[str, str]]
           ) -> list[tuple[int, Sentence]]:
    """Blank-line-separated sentences of one token a line: (first line number, [parse(line, lineno)])."""
    found: list[tuple[int, Sentence]] = []
    current: Sentence = []
    start = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            if current:
                found.append((start, current))
                current = []
            continue
        if not current:
            start = lineno
        current.append(parse(line, lineno))
    if current:
        found.append((start, current))
    return found


_LABEL = re.compile(r"^(O|[BIMES]-\S+)$")


def check_label(label: str, where: str, lineno: int) -> str:
    if not _LABEL.match(label):
        raise ZenError(f"{where}:{lineno}: label {label!r} is not O or B-/I-/M-/E-/S-TYPE")
    return label


# --- writing ----------------------------------------------------------------------------------------------


def write_lines(path: Path, lines: Iterable[str]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
            n += 1
    return n


def write_tagged(path: Path, sentences: list[Sentence]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for sentence in sentences:
            f.write("".join(f"{c}\t{label}\n" for c, label in sentence) + "\n")


def entity_counts(sentences: list[Sentence]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for sentence in sentences:
        for _, label in sentence:
            if label[:2] in ("B-", "S-"):
                counts[label[2:]] += 1
    return dict(sorted(counts.items()))


def cut_dev(items: list, what: str) -> tuple[list, list, str]:
    """(train, dev, note): the last 1/DEV_FRACTION of `items` (in file order) as dev."""
    n_dev = max(1, len(items) // DEV_FRACTION) if len(items) > 1 else 0
    keep = len(items) - n_dev
    note = (f"no official dev split: dev is the last {n_dev} of the {len(items)} training {what} "
            f"(1/{DEV_FRACTION}, in file order); train is the first {keep}")
    return items[:keep], items[keep:], note


def shuffle_split(items: list, what: str) -> tuple[list, list, list, str]:
    """(train, dev, test, note) for a set without splits: shuffled with Random(SEED), cut 80/10/10."""
    order = list(items)
    random.Random(SEED).shuffle(order)
    n_train, n_dev = len(order) * 8 // 10, len(order) // 10
    note = (f"no official splits: the {len(order)} {what} were shuffled with random.Random({SEED}) and cut "
            f"80/10/10 into train ({n_train}), dev ({n_dev}) and test ({len(order) - n_train - n_dev})")
    return order[:n_train], order[n_train:n_train + n_dev], order[n_train + n_dev:], note


# --- NER --------------------------------------------------------------------------------------------------


def _tagged_stats(split: dict[str, list[Sentence]]) -> dict:
    return {name: {"sentences": len(s), "chars": sum(map(len, s)), "entities": entity_counts(s)}
            for name, s in split.items()}


_WEIBO_TOKEN = re.compile(r"^(.+?)([0-9]+)$")


def _weibo_parser(where: str, dropped: Counter):
    def parse(line: str, lineno: int) -> tuple[str, str]:
        parts = line.split("\t")
        if len(parts) != 2:
            raise ZenError(f"{where}:{lineno}: expected `char+position<TAB>label`, got {len(parts)} TAB-separated "
                           "fields")
        token, label = parts
        # The 2nd-release files append the char's position in its word (`科0`, `b12`) to every char; the
        # char itself may be a digit (`30`), so at least one char stays in front of the position.
        m = _WEIBO_TOKEN.match(token)
        if m is None:
            raise ZenError(f"{where}:{lineno}: token {token!r} is not a char followed by its word-position digits")
        chars = m.group(1)
        if len(chars) > 1:
            # Two U+FFFD for one char (seemingly a char outside the BMP, lost before release): read as one.
            if set(chars) != {"\ufffd"}:
                raise ZenError(f"{where}:{lineno}: token {token!r} holds {len(chars)} chars before its position")
            dropped["replacement_char_pairs_read_as_one_char"] += 1
        char = chars[0]
        if char.isspace():
            dropped["whitespace_chars"] += 1
        return char, check_label(label.strip(), where, lineno)
    return parse


def _drop_whitespace(sentence: Sentence) -> Sentence:
    # A whitespace "char" cannot stand on a `char<TAB>label` line of its own; it carries no entity text.
    return [(c, lab) for c, lab in sentence if not c.isspace()]


def convert_weibo(files: dict[str, Path], out: Path) -> dict:
    dropped: Counter[str] = Counter()
    split: dict[str, list[Sentence]] = {}
    for name in SPLITS:
        path = files[f"weiboNER_2nd_conll.{name}"]
        found = blocks(read_lines(path), str(path), _weibo_parser(str(path), dropped))
        split[name] = [s for s in (_drop_whitespace(s) for _, s in found) if s]
        if len(found) > len(split[name]):  # sentences of whitespace only
            dropped["empty_sentences"] += len(found) - len(split[name])
        write_tagged(out / f"{name}.tsv", split[name])
    changed = {"replacement_char_pairs_read_as_one_char": dropped.pop("replacement_char_pairs_read_as_one_char", 0)}
    return {"splits": _tagged_stats(split), "dropped": dict(dropped), "changed": changed,
            "notes": ["the word-position digits after each char were removed; labels (BIO, .NAM/.NOM) are kept",
                      f"{changed['replacement_char_pairs_read_as_one_char']} tokens of two U+FFFD before the "
                      "position digits were read as one U+FFFD char"]}


def _space_parser(where: str):
    def parse(line: str, lineno: int) -> tuple[str, str]:
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) != 1:
            raise ZenError(f"{where}:{lineno}: expected `char label` (one char, a space, a label)")
        return parts[0], check_label(parts[1], where, lineno)
    return parse


def convert_resume(files: dict[str, Path], out: Path) -> dict:
    split: dict[str, list[Sentence]] = {}
    for name in SPLITS:
        path = files[f"{name}.char.bmes"]
        split[name] = [s for _, s in blocks(read_lines(path), str(path), _space_parser(str(path)))]
        write_tagged(out / f"{name}.tsv", split[name])
    return {"splits": _tagged_stats(split), "dropped": {}, "notes": ["labels are BMES, as in the source"]}


def _tab_parser(where: str):
    def parse(line: str, lineno: int) -> tuple[str, str]:
        parts = line.split("\t")
        if len(parts) != 2 or len(parts[0]) != 1:
            raise ZenError(f"{where}:{lineno}: expected `char<TAB>label` (one char, a TAB, a label)")
        return parts[0], check_label(parts[1].strip(), where, lineno)
    return parse


MSRA_MEMBER = "dh_msra.txt"


def convert_msra(files: dict[str, Path], out: Path) -> dict:
    """dh_msra.zip joins the MSRA training and test files; the test file, read on its own, must be its tail."""
    zip_path, test_path = files["dh_msra.zip"], files["test_data"]
    where = f"{zip_path}:{MSRA_MEMBER}"
    joined = [s for _, s in blocks(decode(zip_member(zip_path, MSRA_MEMBER), where).split("\n"), where,
                                   _tab_parser(where))]
    test = [s for _, s in blocks(read_lines(test_path), str(test_path), _tab_parser(str(test_path)))]
    if len(test) >= len(joined) or joined[len(joined) - len(test):] != test:
        raise ZenError(f"{where}: its last {len(test)} sentences are not those of {test_path}; expected the "
                       "training sentences followed by the test sentences")
    train, dev, note = cut_dev(joined[:len(joined) - len(test)], "sentences")
    split = {"train": train, "dev": dev, "test": test}
    for name, sentences in split.items():
        write_tagged(out / f"{name}.tsv", sentences)
    return {"splits": _tagged_stats(split), "dropped": {},
            "notes": [f"{MSRA_MEMBER} holds training then test sentences; training = all but its last "
                      f"{len(test)} (the test file, checked equal)", note, "labels are BIO, as in the source"]}


def json_objects(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) of a file of JSON objects one after another: JSON lines, or (as in the copy
    zen pins for CLUENER) the same objects pretty-printed over several lines each."""
    where = str(path)
    text = decode(path.read_bytes(), where)
    decoder = json.JSONDecoder()
    found: list[tuple[int, dict]] = []
    i, lineno = 0, 1
    while True:
        j = i
        while j < len(text) and text[j].isspace():
            j += 1
        lineno += text.count("\n", i, j)
        if j >= len(text):
            return found
        try:
            obj, end = decoder.raw_decode(text, j)
        except json.JSONDecodeError as e:
            raise ZenError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise ZenError(f"{where}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        found.append((lineno, obj))
        lineno += text.count("\n", j, end)
        i = end


def _span_labels(length: int, entity_type: str) -> list[str]:
    if length == 1:
        return [f"S-{entity_type}"]
    return [f"B-{entity_type}", *[f"M-{entity_type}"] * (length - 2), f"E-{entity_type}"]


def _cluener_sentence(obj: dict, where: str, lineno: int, dropped: Counter) -> Sentence:
    """`{"text": …, "label": {type: {entity: [[start, end], …]}}}` (end inclusive) → BMES labels per char. A span
    overlapping an earlier one (in file order) is dropped and counted; a span whose text is not its entity is an
    error."""
    text, label = obj.get("text"), obj.get("label", {})
    if not isinstance(text, str) or not isinstance(label, dict):
        raise ZenError(f"{where}:{lineno}: expected an object with a `text` string and a `label` object")
    labels = ["O"] * len(text)
    for entity_type, entities in label.items():
        if not isinstance(entities, dict) or not re.fullmatch(r"\S+", entity_type):
            raise ZenError(f"{where}:{lineno}: label {entity_type!r} is not an entity type with its entities")
        for entity, spans in entities.items():
            for span in spans if isinstance(spans, list) else [None]:
                if not (isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) for x in span)
                        and 0 <= span[0] <= span[1] < len(text)):
                    raise ZenError(f"{where}:{lineno}: entity {entity!r} has a span that is not [start, end] "
                                   f"inside its text ({span!r})")
                start, end = span
                if text[start:end + 1] != entity:
                    raise ZenError(f"{where}:{lineno}: span {span} reads {text[start:end + 1]!r}, not the entity "
                                   f"{entity!r}")
                if any(lab != "O" for lab in labels[start:end + 1]):
                    dropped["overlapping_entities"] += 1
                    continue
                labels[start:end + 1] = _span_labels(end - start + 1, entity_type)
    return [(c, lab) for c, lab in zip(text, labels, strict=True)]


CLUENER_FILES = ("train.json", "dev.json")


def convert_cluener(files: dict[str, Path], out: Path) -> dict:
    dropped: Counter[str] = Counter()
    read: dict[str, list[Sentence]] = {}
    for name in CLUENER_FILES:
        path = files[name]
        sentences = []
        for lineno, obj in json_objects(path):
            sentence = _cluener_sentence(obj, str(path), lineno, dropped)
            kept = _drop_whitespace(sentence)
            if len(kept) < len(sentence):
                dropped["whitespace_chars"] += len(sentence) - len(kept)
            if not kept:
                dropped["empty_sentences"] += 1
                continue
            sentences.append(kept)
        read[name] = sentences
    train, dev, note = cut_dev(read["train.json"], "sentences")
    split = {"train": train, "dev": dev, "test": read["dev.json"]}
    for name, sentences in split.items():
        write_tagged(out / f"{name}.tsv", sentences)
    return {"splits": _tagged_stats(split), "dropped": dict(dropped),
            "notes": [note, "test.tsv is the official dev set (dev.json): the labels of CLUENER's test set are not "
                            "public", "labels are BMES over chars from the (start, end inclusive) spans; entity "
                            "types keep CLUENER's English names; a span overlapping an earlier one is dropped "
                            "(counted in stats.json)"]}


# --- CWS --------------------------------------------------------------------------------------------------


def _segmented(path: Path, dropped: Counter) -> list[str]:
    """SIGHAN lines, words separated by runs of spaces → one space between words; empty lines dropped."""
    kept = []
    for line in read_lines(path):
        words = line.split()
        if not words:
            dropped["empty_lines"] += 1
            continue
        kept.append(" ".join(words))
    return kept


def _cws_stats(lines: list[str]) -> dict:
    words = [w for line in lines for w in line.split(" ")]
    return {"sentences": len(lines), "words": len(words), "chars": sum(map(len, words))}


def _sighan_converter(corpus: str):
    def convert(files: dict[str, Path], out: Path) -> dict:
        dropped: Counter[str] = Counter()
        train, dev, note = cut_dev(_segmented(files[f"{corpus}_training.utf8"], dropped), "lines")
        test = _segmented(files[f"{corpus}_test_gold.utf8"], dropped)
        split = {"train": train, "dev": dev, "test": test}
        for name, lines in split.items():
            write_lines(out / f"{name}.txt", lines)
        return {"splits": {n: _cws_stats(v) for n, v in split.items()}, "dropped": dict(dropped),
                "notes": [note, "test.txt is the gold test file; words are separated by one space "
                                "(the source uses two)"]}
    return convert


NLPCC_TRAIN, NLPCC_DEV = "nlpcc2016-word-seg-train.dat", "nlpcc2016-wordseg-dev.dat"


def convert_nlpcc2016_cws(files: dict[str, Path], out: Path) -> dict:
    """NLPCC 2016 Weibo segmentation: the repository holds the segmented training and dev files; its test file is
    raw text (the gold was never published), so the official dev set is the test and dev is cut from training."""
    dropped: Counter[str] = Counter()
    train, dev, note = cut_dev(_segmented(files[NLPCC_TRAIN], dropped), "lines")
    test = _segmented(files[NLPCC_DEV], dropped)
    split = {"train": train, "dev": dev, "test": test}
    for name, lines in split.items():
        write_lines(out / f"{name}.txt", lines)
    return {"splits": {n: _cws_stats(v) for n, v in split.items()}, "dropped": dict(dropped),
            "notes": [note, f"test.txt is the official dev set ({NLPCC_DEV}): the test file of the repository is "
                            "unsegmented text without its gold, so it is not used",
                      "words are separated by one space, as in the source"]}


# --- POS (CoNLL-U) ----------------------------------------------------------------------------------------


def conllu_sentences(path: Path, dropped: Counter) -> list[list[tuple[str, str]]]:
    """(form, UPOS) of the syntactic words of each sentence; multiword-token lines and empty nodes skipped
    (their words have lines of their own)."""
    where = str(path)
    found: list[list[tuple[str, str]]] = []
    words: list[tuple[str, str]] = []
    for lineno, line in enumerate(read_lines(path), 1):
        if not line.strip():
            if words:
                found.append(words)
                words = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ZenError(f"{where}:{lineno}: expected 10 TAB-separated CoNLL-U columns, got {len(cols)}")
        if not cols[0].isdigit():
            dropped["multiword_or_empty_node_lines"] += 1
            continue
        form, upos = cols[1], cols[3]
        if not form or upos == "_" or any(c.isspace() for c in form):
            raise ZenError(f"{where}:{lineno}: word {cols[0]} has no usable form or no UPOS")
        words.append((form, upos))
    if words:
        found.append(words)
    return found


def convert_gsdsimp(files: dict[str, Path], out: Path) -> dict:
    dropped: Counter[str] = Counter()
    stats = {}
    for name in SPLITS:
        sentences = conllu_sentences(files[f"zh_gsdsimp-ud-{name}.conllu"], dropped)
        tagged = [[(c, lab) for form, upos in s for c, lab in zip(form, segment_labels(len(form), upos))]
                  for s in sentences]
        write_tagged(out / f"{name}.tsv", tagged)
        stats[name] = {"sentences": len(sentences), "words": sum(map(len, sentences)),
                       "chars": sum(map(len, tagged))}
    return {"splits": stats, "dropped": dict(dropped),
            "notes": ["char-level joint segmentation and POS labels (B-/M-/E-/S- + UPOS) from each word's "
                      "FORM and UPOS; the other CoNLL-U columns are not used"]}


# --- sentence classification ------------------------------------------------------------------------------


def _clean_text(text: str, dropped: Counter) -> str:
    """One line of text: inner TABs and line breaks (which would break `label<TAB>text`) become spaces."""
    if re.search(r"[\t\r\n]", text):
        dropped["texts_with_tabs_or_newlines_joined"] += 1
        text = re.sub(r"\s*[\t\r\n]+\s*", " ", text)
    return text.strip()


def _label_text_rows(path: Path, dropped: Counter) -> list[tuple[str, str]]:
    """A `label<TAB>text_a` file with that header line (the ERNIE release of ChnSentiCorp)."""
    lines = read_lines(path)
    if not lines or lines[0].split("\t")[:2] != ["label", "text_a"]:
        raise ZenError(f"{path}:1: expected the header `label<TAB>text_a`")
    rows = []
    for lineno, line in enumerate(lines[1:], 2):
        parts = line.split("\t")
        if len(parts) != 2 or parts[0] not in ("0", "1"):
            raise ZenError(f"{path}:{lineno}: expected `0|1<TAB>text`, got {len(parts)} field(s)")
        text = parts[1].strip()
        if not text:
            dropped["empty_texts"] += 1
            continue
        rows.append((parts[0], text))
    return rows


def _label_stats(rows: list[tuple[str, str]]) -> dict:
    return {"examples": len(rows), "labels": dict(sorted(Counter(lab for lab, _ in rows).items())),
            "chars": sum(len(t) for _, t in rows)}


def _write_rows(out: Path, split: dict[str, list[tuple[str, str]]]) -> dict:
    for name, rows in split.items():
        write_lines(out / f"{name}.tsv", (f"{lab}\t{text}" for lab, text in rows))
    return {name: _label_stats(rows) for name, rows in split.items()}


def convert_chnsenticorp(files: dict[str, Path], out: Path) -> dict:
    dropped: Counter[str] = Counter()
    split = {name: _label_text_rows(files[f"{name}.tsv"], dropped) for name in SPLITS}
    return {"splits": _write_rows(out, split), "dropped": dict(dropped),
            "notes": ["1 = positive, 0 = negative; the header line is not written"]}


def csv_rows(data: bytes, where: str, header: list[str]) -> list[tuple[int, list[str]]]:
    """(line number, fields) of a CSV file with the given header; a row of another width is an error."""
    text = decode(data, where)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        first = next(reader, None)
        if first != header:
            raise ZenError(f"{where}:1: expected the CSV header {','.join(header)}")
        rows = []
        for fields in reader:
            if len(fields) != len(header):
                raise ZenError(f"{where}:{reader.line_num}: expected {len(header)} CSV fields "
                               f"({','.join(header)}), got {len(fields)}")
            rows.append((reader.line_num, fields))
    except csv.Error as e:
        raise ZenError(f"{where}:{reader.line_num}: not valid CSV ({e})") from None
    return rows


def _review_csv_converter(source: str):
    """A `label,review` CSV (1 = positive, 0 = negative) without splits: shuffled and cut 80/10/10."""
    def convert(files: dict[str, Path], out: Path) -> dict:
        path = files[source]
        dropped: Counter[str] = Counter()
        rows = []
        for lineno, (label, review) in csv_rows(path.read_bytes(), str(path), ["label", "review"]):
            if label not in ("0", "1"):
                raise ZenError(f"{path}:{lineno}: label {label!r} is not 0 or 1")
            text = _clean_text(review, dropped)
            if not text:
                dropped["empty_texts"] += 1
                continue
            rows.append((label, text))
        train, dev, test, note = shuffle_split(rows, "reviews")
        return {"splits": _write_rows(out, {"train": train, "dev": dev, "test": test}), "dropped": dict(dropped),
                "notes": [note, "1 = positive, 0 = negative"]}
    return convert


convert_chnsenticorp_htl = _review_csv_converter("ChnSentiCorp_htl_all.csv")
convert_waimai = _review_csv_converter("waimai_10k.csv")


SHOPPING_MEMBER = "online_shopping_10_cats.csv"


def convert_online_shopping(files: dict[str, Path], out: Path) -> dict:
    path = files["online_shopping_10_cats.zip"]
    where = f"{path}:{SHOPPING_MEMBER}"
    dropped: Counter[str] = Counter()
    rows = []
    for lineno, (cat, label, review) in csv_rows(zip_member(path, SHOPPING_MEMBER), where, ["cat", "label", "review"]):
        if not cat.strip() or "\t" in cat or label not in ("0", "1"):
            raise ZenError(f"{where}:{lineno}: expected a category name and a 0/1 label")
        text = _clean_text(review, dropped)
        if not text:
            dropped["empty_texts"] += 1
            continue
        rows.append((cat.strip(), text))
    train, dev, test, note = shuffle_split(rows, "reviews")
    return {"splits": _write_rows(out, {"train": train, "dev": dev, "test": test}), "dropped": dict(dropped),
            "notes": [note, "the label is the product category (`cat`); the source's positive/negative column "
                            "is not used"]}


# --- MRC (SQuAD JSON) -------------------------------------------------------------------------------------


def squad_articles(path: Path) -> tuple[dict, list[dict], dict]:
    """The parsed file, its articles (`data`), and counts; the structure is checked, never trusted."""
    where = str(path)
    try:
        doc = json.loads(decode(path.read_bytes(), where))
    except json.JSONDecodeError as e:
        raise ZenError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise ZenError(f"{where}: expected SQuAD JSON, an object with a `data` list of articles")
    counts: Counter[str] = Counter()
    for i, article in enumerate(doc["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ZenError(f"{where}: article {i} has no `paragraphs` list")
        counts["articles"] += 1
        for paragraph in paragraphs:
            context, qas = paragraph.get("context"), paragraph.get("qas")
            if not isinstance(context, str) or not isinstance(qas, list):
                raise ZenError(f"{where}: article {i}: a paragraph without a `context` string or a `qas` list")
            counts["paragraphs"] += 1
            for qa in qas:
                if not isinstance(qa, dict) or not isinstance(qa.get("question"), str) \
                        or not isinstance(qa.get("answers"), list) or not qa["answers"]:
                    raise ZenError(f"{where}: article {i}: question {qa.get('id') if isinstance(qa, dict) else '?'} "
                                   "has no question text or no answers")
                counts["questions"] += 1
                for answer in qa["answers"]:
                    start, text = answer.get("answer_start"), answer.get("text")
                    if not isinstance(text, str) or not isinstance(start, int):
                        raise ZenError(f"{where}: question {qa.get('id')}: an answer without `text` and an integer "
                                       "`answer_start`")
                    counts["answers"] += 1
                    if context[start:start + len(text)] != text:
                        counts["answers_not_at_answer_start"] += 1
    return doc, doc["data"], dict(counts)


def _write_json(path: Path, doc: dict) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=False)
        f.write("\n")


def convert_cmrc2018(files: dict[str, Path], out: Path) -> dict:
    train_doc, articles, train_counts = squad_articles(files["cmrc2018_train.json"])
    dev_doc, _, dev_counts = squad_articles(files["cmrc2018_dev.json"])
    train, heldout, note = cut_dev(articles, "articles")
    version = train_doc.get("version", "")
    _write_json(out / "train.json", {"version": version, "data": train})
    _write_json(out / "heldout.json", {"version": version, "data": heldout})
    _write_json(out / "cmrc2018_dev.json", dev_doc)
    return {"source_counts": {"train": train_counts, "dev": dev_counts},
            "splits": {"train": {"articles": len(train)}, "heldout": {"articles": len(heldout)},
                       "cmrc2018_dev": {"articles": dev_counts.get("articles", 0)}},
            "dropped": {},
            "notes": [note.replace("dev is", "heldout.json (the recipes' dev) is"),
                      "CMRC 2018 has no public test set: cmrc2018_dev.json, the official dev set, is the test "
                      "the papers report; answers whose answer_start does not point at their text are kept "
                      "and counted in stats.json"]}


# --- the registry entries ---------------------------------------------------------------------------------


def _raw(repo: str, ref: str, path: str) -> str:
    return f"{GITHUB_RAW}/{repo}/{ref}/{path}"


def _per_split(repo: tuple[str, str], path: str, name: str, pins: tuple[tuple[str, int], ...]) -> tuple[Source, ...]:
    """The train, dev and test sources of one repository: `path` and `name` hold `{split}`; pins are
    (sha256, size) in that order."""
    return tuple(Source(name.format(split=split), _raw(*repo, path.format(split=split)), sha, size)
                 for split, (sha, size) in zip(SPLITS, pins, strict=True))


_ICWB2 = ("yuikns/icwb2-data", "873a51fa6234c644126d2f2c5c603a97809d2e49")
_SOPHON = ("SophonPlus/ChineseNlpCorpus", "a0b781d72158bde242c0626c9e354d2b328865ff")
_ICWB2_CITATION = ("Thomas Emerson. 2005. The Second International Chinese Word Segmentation Bakeoff. "
                   "In Proceedings of the Fourth SIGHAN Workshop on Chinese Language Processing, pages 123-133.")
_ICWB2_LICENSE = ("research use, as distributed by the SIGHAN 2005 bakeoff (icwb2-data); see its homepage "
                  "for the terms of each corpus")


def _sighan(corpus: str, title: str, train_blob: str, gold_sha256: str, gold_size: int) -> Dataset:
    repo, commit = _ICWB2
    return Dataset(
        name=corpus, task="cws", title=title, license=_ICWB2_LICENSE, citation=_ICWB2_CITATION,
        homepage="http://sighan.cs.uchicago.edu/bakeoff2005/",
        sources=(Source(f"{corpus}_training.utf8", _raw(repo, commit, f"training/{corpus}_training.utf8"), "", 0,
                        git_blob=train_blob),
                 Source(f"{corpus}_test_gold.utf8", _raw(repo, commit, f"gold/{corpus}_test_gold.utf8"),
                        gold_sha256, gold_size)),
        convert=_sighan_converter(corpus))


_WEIBO = ("hltcoe/golden-horse", "7a73c08e45ed94312af4ef2d97cc35a47d029e99")
_LATTICE = ("jiesutd/LatticeLSTM", "24d17f4270f11d2f75046789d8b67eaa2b907dce")
_GSD = ("UniversalDependencies/UD_Chinese-GSDSimp", "r2.16")
_CMRC = ("ymcui/cmrc2018", "c0eb1b6ba219847457e6af3180da722bbeb656af")
_ERNIE_SPLIT = ("pengming617/bert_classification", "c155e73ee9272aa61589116aebd762204c3e4c83")
_NLPCC_WEIBO = ("FudanNLP/NLPCC-WordSeg-Weibo", "07e148bf2dbb61b61d9f88f1821a75ec498c530a")
_CLUENER_COPY = ("StanleySun233/ChineseNER", "dc3c5cd2479fc3ef63ceb1c93db9b351508e974f")
_TAN_CITATION = ("Songbo Tan and Jin Zhang. 2008. An empirical study of sentiment analysis for Chinese documents. "
                 "Expert Systems with Applications 34(4).")

DATASETS: tuple[Dataset, ...] = (
    Dataset(
        name="weibo", task="ner",
        title="Weibo NER, 2nd release (Peng and Dredze): Sina Weibo posts, PER/ORG/LOC/GPE names and nominals",
        license="annotations CC BY-SA 3.0; the messages follow Weibo's terms of service",
        citation="Nanyun Peng and Mark Dredze. 2015. Named Entity Recognition for Chinese Social Media with "
                 "Jointly Trained Embeddings. In EMNLP.\nNanyun Peng and Mark Dredze. 2016. Improving Named "
                 "Entity Recognition for Chinese Social Media with Word Segmentation Representation Learning. "
                 "In ACL.",
        homepage="https://github.com/hltcoe/golden-horse",
        sources=_per_split(_WEIBO, "data/weiboNER_2nd_conll.{split}", "weiboNER_2nd_conll.{split}", (
            ("4e8954c54ab33b0afc9a8abb85715c47422645cc6d1b49fdb24540f4a427e997", 536039),
            ("e72730d83aac680505280b6301c879b3ba470d29ac308979d48cdc58ee4907cc", 105881),
            ("faaf6c0ebde5348b935cfd5c89f0f22c9e0779d60667d8b5efbc647b6707d50e", 108767))),
        convert=convert_weibo),
    Dataset(
        name="resume", task="ner",
        title="Resume NER (Zhang and Yang): resumes of senior executives, 8 entity types, BMES",
        license="research use, as released with Lattice LSTM (no license file in the repository)",
        citation="Yue Zhang and Jie Yang. 2018. Chinese NER Using Lattice LSTM. In ACL.",
        homepage="https://github.com/jiesutd/LatticeLSTM",
        sources=_per_split(_LATTICE, "ResumeNER/{split}.char.bmes", "{split}.char.bmes", (
            ("93b9bb0be5dd4730121587f9dc1378de3fbbe55cba1c575edec271f822c27be7", 1094528),
            ("1b0d67153e6e8543e9444936ed1b107bd843078c282533898085e1a9aa293952", 120251),
            ("c4a9f42622819a4b59f66e184d446ebfa89b2f1dbba06e11d70675e59fe7e79b", 135064))),
        convert=convert_resume),
    Dataset(
        name="msra", task="ner",
        title="MSRA NER (SIGHAN 2006 bakeoff): news text, PER/LOC/ORG, BIO",
        license="research use (SIGHAN 2006 bakeoff data as redistributed by zh-NER-TF and ChineseNlpCorpus)",
        citation="Gina-Anne Levow. 2006. The Third International Chinese Language Processing Bakeoff: Word "
                 "Segmentation and Named Entity Recognition. In Proceedings of the Fifth SIGHAN Workshop.",
        homepage="https://github.com/SophonPlus/ChineseNlpCorpus/tree/master/datasets/dh_msra",
        sources=(Source("dh_msra.zip", _raw(*_SOPHON, "datasets/dh_msra/dh_msra.zip"),
                        "5a0b2e4c543d8a803b138b5488313425cdec26708e323388d37750c6bd35b4e9", 3441608),
                 Source("test_data", _raw("Determined22/zh-NER-TF", "e4a8732de88071dac5d1fce8da18de98365389fa",
                                          "data_path/test_data"),
                        "ee3a3d7c86352ed8ad9c802f57038db51a870afacf53048d0731af7172f1a7e1", 1114268)),
        convert=convert_msra),
    _sighan("msr", "SIGHAN 2005 bakeoff, Microsoft Research corpus: word segmentation (simplified)",
            "4ce7619c3dbe2380cc70c5c294d4d5add695f8f6",
            "cd1a8473841f1b2fcddd14d12599ad8872e6167feb64807af5bac2f6a32cb75d", 766786),
    _sighan("pku", "SIGHAN 2005 bakeoff, Peking University corpus: word segmentation (simplified)",
            "1f4268102eda1de03165a8807a74200f54e20063",
            "913f78b20b17ea1e154f6246644d7d624b2710641f109a15daee9d63c9fb88d4", 718331),
    Dataset(
        name="chnsenticorp", task="sa",
        title="ChnSentiCorp (Tan Songbo): hotel, laptop and book reviews, positive/negative (ERNIE's split)",
        license="research use (ChnSentiCorp, as redistributed with the ERNIE train/dev/test split)",
        citation=_TAN_CITATION,
        homepage="https://github.com/pengming617/bert_classification",
        sources=_per_split(_ERNIE_SPLIT, "data/{split}.tsv", "{split}.tsv", (
            ("0b2653c23e5c79f539472e90cb10522f0ada4b80d3da95572d8b48fda47d5b33", 3019974),
            ("d129e443eac08ce7643013dad496a8edf282be39cac1a4f2ad080818b296b331", 374230),
            ("34f9d71eba6096cd8689e18913d28cf9a5f3c18a6c2804cd13304a321738c4bc", 369742))),
        convert=convert_chnsenticorp),
    Dataset(
        name="chnsenticorp-htl", task="sa",
        title="ChnSentiCorp hotel reviews, all 7.7k (ChineseNlpCorpus ChnSentiCorp_htl_all), positive/negative",
        license="research use (ChineseNlpCorpus redistribution of ChnSentiCorp)",
        citation=_TAN_CITATION,
        homepage="https://github.com/SophonPlus/ChineseNlpCorpus",
        sources=(Source("ChnSentiCorp_htl_all.csv",
                        _raw(*_SOPHON, "datasets/ChnSentiCorp_htl_all/ChnSentiCorp_htl_all.csv"),
                        "1d414b9c65caf3a836abdb4efded621968502ad3338e1a9d885ae131c86083f0", 2904858),),
        convert=convert_chnsenticorp_htl),
    Dataset(
        name="online-shopping", task="dc",
        title="Online shopping reviews in 10 product categories (ChineseNlpCorpus online_shopping_10_cats)",
        license="research use (ChineseNlpCorpus; collected from e-commerce sites)",
        citation="SophonPlus. ChineseNlpCorpus: online_shopping_10_cats. https://github.com/SophonPlus/ChineseNlpCorpus",
        homepage="https://github.com/SophonPlus/ChineseNlpCorpus",
        sources=(Source("online_shopping_10_cats.zip",
                        _raw(*_SOPHON, "datasets/online_shopping_10_cats/online_shopping_10_cats.zip"),
                        "6816ded66fde9d0927ecbd370b5e12d0174d1abac35192ec014ac2a0a8d25858", 4084428),),
        convert=convert_online_shopping),
    Dataset(
        name="cmrc2018", task="mrc",
        title="CMRC 2018: span-extraction reading comprehension on Chinese Wikipedia (SQuAD format)",
        license="CC BY-SA 4.0",
        citation="Yiming Cui, Ting Liu, Wanxiang Che, Li Xiao, Zhipeng Chen, Wentao Ma, Shijin Wang and Guoping "
                 "Hu. 2019. A Span-Extraction Dataset for Chinese Machine Reading Comprehension. In EMNLP-IJCNLP.",
        homepage="https://github.com/ymcui/cmrc2018",
        sources=(Source("cmrc2018_train.json", _raw(*_CMRC, "squad-style-data/cmrc2018_train.json"), "", 0,
                        git_blob="cd56f7d38f6f4a6f92df2616479bbf134a37bebf"),
                 Source("cmrc2018_dev.json", _raw(*_CMRC, "squad-style-data/cmrc2018_dev.json"),
                        "e9ff74231f05c230c6fa88b84441ee334d97234cbb610991cd94b82db00c7f1f", 3299139)),
        convert=convert_cmrc2018),
    Dataset(
        name="ud-gsdsimp", task="pos",
        title="Universal Dependencies Chinese GSDSimp (release 2.16): joint segmentation and UPOS tagging",
        license="CC BY-SA 4.0",
        citation="Universal Dependencies 2.16, UD_Chinese-GSDSimp (Google; simplified by Peng Qi and Koichi "
                 "Yasuoka). https://universaldependencies.org/",
        homepage="https://github.com/UniversalDependencies/UD_Chinese-GSDSimp",
        sources=(Source("zh_gsdsimp-ud-train.conllu", _raw(*_GSD, "zh_gsdsimp-ud-train.conllu"), "", 0,
                        git_blob="920b17964ee245a508b9de0f69330f3dca6b1749"),
                 Source("zh_gsdsimp-ud-dev.conllu", _raw(*_GSD, "zh_gsdsimp-ud-dev.conllu"),
                        "342a2969df6d6d08bdc25dbc067c93c86ab3099bb054a9921ae7067cbc2c53ad", 1180003),
                 Source("zh_gsdsimp-ud-test.conllu", _raw(*_GSD, "zh_gsdsimp-ud-test.conllu"),
                        "573f59b799b499a920d2d5bdc0e3c1dbd7bcacf86bdece4334ecbd03e21b6150", 1120900)),
        convert=convert_gsdsimp),
    Dataset(
        name="waimai-10k", task="sa",
        title="Waimai 10k: food-delivery reviews, positive/negative (ChineseNlpCorpus waimai_10k)",
        license="research use (ChineseNlpCorpus; reviews collected from a food-delivery platform)",
        citation="SophonPlus. ChineseNlpCorpus: waimai_10k. https://github.com/SophonPlus/ChineseNlpCorpus",
        homepage="https://github.com/SophonPlus/ChineseNlpCorpus/tree/master/datasets/waimai_10k",
        sources=(Source("waimai_10k.csv", _raw(*_SOPHON, "datasets/waimai_10k/waimai_10k.csv"),
                        "b8b5c11c00b51578d35937fca56e03a126b45381f1ea4b22893237cb377a26fe", 919380),),
        convert=convert_waimai),
    Dataset(
        name="nlpcc2016-cws", task="cws",
        title="NLPCC 2016 shared task: word segmentation of Sina Weibo posts (FudanNLP)",
        license="research use; the organisers ask every user to sign the agreement form FDU_agreement_form.pdf of "
                "the repository and send it to them (see its README)",
        citation="Xipeng Qiu, Peng Qian and Zhan Shi. 2016. Overview of the NLPCC-ICCPOL 2016 Shared Task: Chinese "
                 "Word Segmentation for Micro-blog Texts. In NLPCC-ICCPOL 2016.",
        homepage="https://github.com/FudanNLP/NLPCC-WordSeg-Weibo",
        sources=(Source(NLPCC_TRAIN, _raw(*_NLPCC_WEIBO, f"datasets/{NLPCC_TRAIN}"),
                        "28e1e6371a16e274f0277e0224e9052b1c5e021c9e439cda4f4b4e5454995236", 2403674),
                 Source(NLPCC_DEV, _raw(*_NLPCC_WEIBO, f"datasets/{NLPCC_DEV}"),
                        "8902ab2fb3009ef1ae1b8de2f5325e68878a7cdc77514e59be9e52d0cb291999", 251449)),
        convert=convert_nlpcc2016_cws),
    Dataset(
        name="cluener", task="ner",
        title="CLUENER 2020: fine-grained NER in 10 types on news texts (CLUE), BMES from spans",
        license="research use, as released by CLUE (its repository states no license); this copy is the "
                "public release's train.json and dev.json as committed, pretty-printed, to StanleySun233/ChineseNER "
                "(10,748 and 1,343 examples, the release's counts)",
        citation="Liang Xu, Yu Tong, Qianqian Dong, Yixuan Liao, Cong Yu, Yin Tian, Weitang Liu, Lu Li, Caiquan Liu "
                 "and Xuanwei Zhang. 2020. CLUENER2020: Fine-grained Named Entity Recognition Dataset and Benchmark "
                 "for Chinese. arXiv:2001.04351.",
        homepage="https://github.com/CLUEbenchmark/CLUENER2020",
        sources=(Source("train.json", _raw(*_CLUENER_COPY, "data/cluener/train.json"),
                        "8702ded915b881b1a521a7eff9749beef264fc5666dac75ff0adb325caf83bd5", 3783116),
                 Source("dev.json", _raw(*_CLUENER_COPY, "data/cluener/dev.json"),
                        "896f7637b2c934d1d2e52cc510deb06d315074441ecffc7ffcb81991e2fd3571", 479193)),
        convert=convert_cluener),
)
