"""zencli.datasets.arabic: each converter on small files in its source's exact format, written here with
invented words (no sentence of any real dataset), and the pinned source table. Nothing is downloaded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from zencli.config import load_job_recipe
from zencli.datasets import arabic
from zencli.datasets.arabic import (
    DATASETS,
    contiguous_split,
    convert_anercorp,
    convert_aqmar,
    convert_arabic_squad,
    convert_arcd,
    convert_astd,
    convert_quran,
)
from zencli.errors import ZenError

W = ["بيت", "قلم", "باب", "نهر", "جبل", "سوق", "درب", "حقل"]  # generic words for filler tokens


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------- the table

def test_every_dataset_is_arabic_and_every_source_is_pinned_at_a_commit():
    names = [d.name for d in DATASETS]
    assert names == ["anercorp", "aqmar", "arcd", "arabic-squad", "astd", "ar"] and len(set(names)) == len(names)
    for d in DATASETS:
        assert d.language == "ar" and d.license and d.citation and d.homepage and callable(d.convert)
        assert len({s.name for s in d.sources}) == len(d.sources)
        for s in d.sources:
            assert re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/\S+", s.url), s
            assert s.url.endswith("/" + s.name) or d.name in ("anercorp", "aqmar", "ar"), s
            if d.name == "arabic-squad":  # 4 MiB and more: pinned by its git blob id at the commit
                assert not s.sha256 and s.size == 0 and re.fullmatch(r"[0-9a-f]{40}", s.git_blob)
            else:
                assert re.fullmatch(r"[0-9a-f]{64}", s.sha256) and s.size > 0


def test_contiguous_split_cuts_test_then_dev_from_the_end():
    assert contiguous_split(5110, 10, 6) == (3834, 425, 851)   # ANERcorp's counts
    assert contiguous_split(2687, 9, 10) == (2151, 268, 268)   # AQMAR's
    assert contiguous_split(3, 10, 6) == (3, 0, 0)


# ---------------------------------------------------------------------------------------------- ANERcorp

ANER = (
    "زيد B-PERS\n"
    "عمرو I-PERS\n"
    "في O\n"
    "مدينة B-LOC\n"
    ". O\n"
    " O\n"                          # a wordless line (an invisible mark removed): dropped, counted
    "شركة B-ORG\n"
    "نور  I-ORG\n"                  # two spaces as separator
    "بيت قلم O\n"                   # two words before O: one O token each
    ". Oباب O\n"                    # two lines run together
    "كأس B-MISC\n"
    ". O\n"
)


def aner_file(tmp_path: Path, extra_sentences: int = 0) -> Path:
    filler = "".join(f"{W[i % len(W)]} O\n. O\n" for i in range(extra_sentences))
    return write(tmp_path / "src" / "ANERCorp", ANER + filler)


def test_anercorp_sentences_repairs_and_files(tmp_path: Path):
    out = tmp_path / "anercorp"
    stats = convert_anercorp({"ANERCorp": aner_file(tmp_path, extra_sentences=9)}, out)
    # 3 + 9 = 12 sentences: test = 12 // 6 = 2, dev = 10 // 10 = 1, train = 9
    train = read(out / "ner" / "train.tsv")
    assert train.startswith("زيد\tB-PERS\nعمرو\tI-PERS\nفي\tO\nمدينة\tB-LOC\n.\tO\n\n"
                            "شركة\tB-ORG\nنور\tI-ORG\nبيت\tO\nقلم\tO\n.\tO\n\n"
                            "باب\tO\nكأس\tB-MISC\n.\tO\n\n")
    assert read(out / "ner" / "dev.tsv") == f"{W[6]}\tO\n.\tO\n\n"
    assert read(out / "ner" / "test.tsv") == f"{W[7]}\tO\n.\tO\n\n{W[0]}\tO\n.\tO\n\n"
    assert stats["dropped"] == {"lines `O` without a word": 1}
    assert stats["merged_lines_split"] == 1 and stats["lines_of_several_O_words_split"] == 1
    assert stats["last_sentence_without_period"] is False
    assert {k: v["sentences"] for k, v in stats["splits"].items()} == {"train": 9, "dev": 1, "test": 2}
    assert stats["splits"]["train"]["entity_types"] == {"LOC": 1, "MISC": 1, "ORG": 1, "PERS": 1}
    assert stats["source_tokens"] == 13 + 2 * 9
    assert "ANERcorp" in read(out / "NOTICE")


def test_anercorp_keeps_a_last_sentence_without_a_period(tmp_path: Path):
    path = write(tmp_path / "ANERCorp", "بيت O\n. O\nقلم O\n")
    stats = convert_anercorp({"ANERCorp": path}, tmp_path / "out")
    assert stats["last_sentence_without_period"] is True
    assert read(tmp_path / "out" / "ner" / "train.tsv") == "بيت\tO\n.\tO\n\nقلم\tO\n\n"


@pytest.mark.parametrize("line, message", [
    ("بيت B-PER", "unknown tag 'B-PER'"),
    ("بيت قلم B-LOC", "expected `word TAG`, got 3 fields"),
    ("بيت", "expected `word TAG`, got 1 fields"),
])
def test_anercorp_malformed_line_names_file_and_line(tmp_path: Path, line: str, message: str):
    path = write(tmp_path / "ANERCorp", f"باب O\n{line}\n")
    with pytest.raises(ZenError, match=re.escape(f"{path}:2: {message}")):
        convert_anercorp({"ANERCorp": path}, tmp_path / "out")


def test_a_missing_source_file_is_named(tmp_path: Path):
    with pytest.raises(ZenError, match="source file 'ANERCorp' missing"):
        convert_anercorp({}, tmp_path / "out")


# ---------------------------------------------------------------------------------------------- AQMAR

def aqmar_text(n: int) -> str:
    first = "سعد B-PER\nفي O\nجبل B-MIS1`\nنور OO\n. O\n\n"
    rest = "".join(f"{W[i % len(W)]} B-MIS2\n{W[(i + 1) % len(W)]} I--ORG\n. O\n\n" for i in range(n - 1))
    return first + rest


def test_aqmar_repairs_slips_and_cuts_contiguous_blocks(tmp_path: Path):
    out = tmp_path / "aqmar"
    src = write(tmp_path / "AQMAR_Arabic_NER_corpus-1.0.txt", aqmar_text(10))
    stats = convert_aqmar({"AQMAR_Arabic_NER_corpus-1.0.txt": src}, out)
    assert read(out / "ner" / "train.tsv").startswith("سعد\tB-PER\nفي\tO\nجبل\tB-MIS1\nنور\tO\n.\tO\n\n"
                                                     f"{W[0]}\tB-MIS2\n{W[1]}\tI-ORG\n.\tO\n\n")
    # 10 sentences: test = 1 (the last), dev = 9 // 9 = 1, train = 8
    assert read(out / "ner" / "dev.tsv") == f"{W[7]}\tB-MIS2\n{W[0]}\tI-ORG\n.\tO\n\n"
    assert read(out / "ner" / "test.tsv") == f"{W[0]}\tB-MIS2\n{W[1]}\tI-ORG\n.\tO\n\n"
    assert stats["tags_repaired"] == {"B-MIS1` -> B-MIS1": 1, "I--ORG -> I-ORG": 9, "OO -> O": 1}
    assert {k: v["sentences"] for k, v in stats["splits"].items()} == {"train": 8, "dev": 1, "test": 1}
    # an I- tag after another type opens an entity of its own, as the NER reader reads it
    assert stats["splits"]["train"]["entity_types"] == {"MIS1": 1, "MIS2": 7, "ORG": 7, "PER": 1}
    assert stats["splits"]["train"]["entities"] == 16 and stats["splits"]["train"]["entities_opening_with_I"] == 7
    assert stats["dropped"] == {} and "CC BY-SA 3.0" in read(out / "NOTICE")


def test_aqmar_reads_crlf_and_a_file_without_a_last_blank_line(tmp_path: Path):
    src = write(tmp_path / "a.txt", "بيت B-LOC\r\nقلم O\r\n\r\nباب O")
    convert_aqmar({"AQMAR_Arabic_NER_corpus-1.0.txt": src}, tmp_path / "out")
    assert read(tmp_path / "out" / "ner" / "train.tsv") == "بيت\tB-LOC\nقلم\tO\n\nباب\tO\n\n"


@pytest.mark.parametrize("line, message", [
    ("بيت X-PER", "malformed tag 'X-PER'"),
    ("بيت B-", "malformed tag 'B-'"),
    ("بيت قلم O", "expected `word TAG`, got 3 fields"),
])
def test_aqmar_malformed_line_names_file_and_line(tmp_path: Path, line: str, message: str):
    src = write(tmp_path / "a.txt", f"باب O\n\n{line}\n")
    with pytest.raises(ZenError, match=re.escape(f"{src}:3: {message}")):
        convert_aqmar({"AQMAR_Arabic_NER_corpus-1.0.txt": src}, tmp_path / "out")


# ---------------------------------------------------------------------------------------------- ARCD

def squad(questions: list[tuple[str, str, str, int]]) -> bytes:
    """A SQuAD v1.1 document: one article, one paragraph per (id, context, answer, start)."""
    paragraphs = [{"context": c,
                   "qas": [{"id": qid, "question": "ما هو؟", "answers": [{"text": a, "answer_start": s}]}]}
                  for qid, c, a, s in questions]
    return json.dumps({"data": [{"title": "عنوان", "paragraphs": paragraphs}], "version": "1.1"},
                      ensure_ascii=False).encode()


def arcd_files(tmp_path: Path) -> dict[str, Path]:
    train = squad([("q1", "بيت قلم باب", "قلم", 4), ("q2", "نهر جبل", "جبل", 0)])   # q2: start off its text
    test = squad([("q3", "سوق درب", "حقل", 0)])                                     # q3: text not in context
    both = json.loads(train)
    both["data"] += json.loads(test)["data"]
    return {"arcd.json": write(tmp_path / "src" / "arcd.json", json.dumps(both, ensure_ascii=False, indent=1)),
            "arcd-train.json": write(tmp_path / "src" / "arcd-train.json", train),
            "arcd-test.json": write(tmp_path / "src" / "arcd-test.json", test)}


def test_arcd_is_copied_byte_for_byte_and_counted(tmp_path: Path):
    files = arcd_files(tmp_path)
    out = tmp_path / "arcd"
    stats = convert_arcd(files, out)
    for source, target in (("arcd.json", "arcd.json"), ("arcd-train.json", "train.json"),
                           ("arcd-test.json", "test.json")):
        assert (out / target).read_bytes() == files[source].read_bytes()
    assert stats["splits"]["arcd"] == {"articles": 2, "paragraphs": 3, "questions": 3, "answers": 3,
                                       "answers_off_their_start": 1, "answers_not_in_their_context": 1}
    assert stats["splits"]["train"]["questions"] == 2 and stats["splits"]["test"]["questions"] == 1
    assert "MIT" in read(out / "NOTICE")


def test_arabic_squad_holds_out_the_last_tenth_of_its_articles(tmp_path: Path):
    doc = {"version": "1.1", "data": []}
    for i in range(20):
        doc["data"] += json.loads(squad([(f"q{i}", f"بيت {i} قلم", "قلم", len(f"بيت {i} "))]))["data"]
    src = write(tmp_path / "src" / "Arabic-SQuAD.json", json.dumps(doc, ensure_ascii=False, indent=1))
    out = tmp_path / "arabic-squad"
    stats = convert_arabic_squad({"Arabic-SQuAD.json": src}, out)
    train, held = (json.loads(read(out / f"{n}.json")) for n in ("train", "heldout"))
    assert train["data"] == doc["data"][:18] and held["data"] == doc["data"][18:]  # whole articles, file order
    assert train["version"] == held["version"] == "1.1"
    assert stats["source"]["questions"] == 20 and stats["splits"]["heldout"]["questions"] == 2
    assert stats["splits"]["train"]["answers_off_their_start"] == 0 and "MIT" in read(out / "NOTICE")
    write(src, '{"data": [\n{"paragraphs": [}\n]}')
    with pytest.raises(ZenError, match=re.escape(f"{src}:2: not valid JSON")):
        convert_arabic_squad({"Arabic-SQuAD.json": src}, tmp_path / "out")


def test_arcd_malformed_json_names_file_and_line(tmp_path: Path):
    files = arcd_files(tmp_path)
    write(files["arcd-test.json"], '{"data": [\n{"paragraphs": [}\n]}')
    with pytest.raises(ZenError, match=re.escape(f"{files['arcd-test.json']}:2: not valid JSON")):
        convert_arcd(files, tmp_path / "out")


@pytest.mark.parametrize("doc, message", [
    ({"data": [{"paragraphs": [{"qas": []}]}]}, "data[0].paragraphs[0]: expected a paragraph with a `context`"),
    ({"data": [{"paragraphs": [{"context": "بيت", "qas": [{"id": "a", "question": "س"},
                                                          {"id": "a", "question": "س"}]}]}]},
     "data[0].paragraphs[0].qas[1]: duplicate question id 'a'"),
    ({"version": "1.1"}, 'expected a SQuAD document {"data": [...]}'),
])
def test_arcd_bad_structure_names_the_key_path(tmp_path: Path, doc: dict, message: str):
    files = arcd_files(tmp_path)
    write(files["arcd.json"], json.dumps(doc, ensure_ascii=False))
    with pytest.raises(ZenError, match=re.escape(f"{files['arcd.json']}: {message}")):
        convert_arcd(files, tmp_path / "out")


# ---------------------------------------------------------------------------------------------- ASTD

TWEETS = [("بيت جميل", "POS"), ("قلم سيء", "NEG"), ("باب", "NEUTRAL"), ("نهر كبير", "OBJ"),
          ("جبل عال", "POS"), ("سوق مزدحم", "NEG"), ("باب", "OBJ"), (" درب طويل ", "OBJ")]


def astd_files(tmp_path: Path) -> dict[str, Path]:
    src = tmp_path / "src"
    files = {"Tweets.txt": write(src / "Tweets.txt", "".join(f"{t}\t{lab}\n" for t, lab in TWEETS))}
    # the published index files: one 0-based index per line, no newline after the last
    splits = {"unbalanced": {"train": [3, 0, 1, 7], "validation": [4, 2], "test": [5, 6]},
              "balanced": {"train": [0, 1], "validation": [4], "test": [5]}}
    for setting, parts in splits.items():
        for stem, indices in parts.items():
            name = f"4class-{setting}-{stem}.txt"
            files[name] = write(src / name, "\n".join(map(str, indices)))
    return files


def test_astd_writes_both_published_splits_as_label_tab_text(tmp_path: Path):
    out = tmp_path / "astd"
    stats = convert_astd(astd_files(tmp_path), out)
    # the line is stripped, as the authors' reader does: the space before the TAB stays with the text
    assert read(out / "train.tsv") == "OBJ\tنهر كبير\nPOS\tبيت جميل\nNEG\tقلم سيء\nOBJ\tدرب طويل \n"
    assert read(out / "dev.tsv") == "POS\tجبل عال\nNEUTRAL\tباب\n"
    assert read(out / "test.tsv") == "NEG\tسوق مزدحم\nOBJ\tباب\n"
    assert read(out / "balanced" / "train.tsv") == "POS\tبيت جميل\nNEG\tقلم سيء\n"
    assert read(out / "balanced" / "dev.tsv") == "POS\tجبل عال\n"
    assert read(out / "balanced" / "test.tsv") == "NEG\tسوق مزدحم\n"
    assert stats["tweets"] == 8 and stats["labels"] == {"OBJ": 3, "POS": 2, "NEG": 2, "NEUTRAL": 1}
    assert stats["tweets_sharing_their_text_with_another_kept"] == 2
    assert stats["unbalanced"]["tweets_in_no_split"] == 0 and stats["balanced"]["tweets_in_no_split"] == 4
    assert stats["unbalanced"]["splits"]["train"] == {"texts": 4, "labels": {"OBJ": 2, "POS": 1, "NEG": 1}}
    assert "GPL" in read(out / "NOTICE")


@pytest.mark.parametrize("line, message", [
    ("بيت\tGOOD", "expected `tweet<TAB>label`"),
    ("بيت بلا علامة", "expected `tweet<TAB>label`"),
    ("بيت\tPOS\tNEG", "expected `tweet<TAB>label`"),
])
def test_astd_malformed_tweet_line_names_file_and_line(tmp_path: Path, line: str, message: str):
    files = astd_files(tmp_path)
    write(files["Tweets.txt"], f"باب\tOBJ\n{line}\n" + "".join(f"{t}\t{lab}\n" for t, lab in TWEETS))
    with pytest.raises(ZenError, match=re.escape(f"{files['Tweets.txt']}:2: {message}")):
        convert_astd(files, tmp_path / "out")


def test_astd_bad_index_files_are_errors(tmp_path: Path):
    files = astd_files(tmp_path)
    name = "4class-unbalanced-test.txt"
    write(files[name], "5\n8")
    with pytest.raises(ZenError, match=re.escape(f"{files[name]}:2: tweet index 8 is past the last tweet (7)")):
        convert_astd(files, tmp_path / "out")
    write(files[name], "5\nsix")
    with pytest.raises(ZenError, match=re.escape(f"{files[name]}:2: expected a tweet index")):
        convert_astd(files, tmp_path / "out")
    write(files[name], "5\n0")
    with pytest.raises(ZenError, match="tweet index 0 is also in 4class-unbalanced-train.txt"):
        convert_astd(files, tmp_path / "out")


# ---------------------------------------------------------------------------------------------- Tanzil text

BASMALA = "سمى الاول الثانى الثالث"      # four invented words standing for aya 1:1
SHADDA_FORM = "س\u0651مى الاول الثانى الثالث"  # the same with a shadda on its first letter
NOTICE_BLOCK = ["# PLEASE DO NOT REMOVE OR CHANGE THIS COPYRIGHT BLOCK", "#", "#  Tanzil Quran Text (test copy)",
                "#  License: Creative Commons Attribution 3.0", "#"]


def quran_lines() -> tuple[list[str], list[str]]:
    """(source lines in Tanzil's `sura|aya|text` export with the basmala prefixed, expected output lines):
    114 suras, 6,236 ayas of invented words."""
    counts = [7] + [55] * 112 + [6236 - 7 - 55 * 112]
    src, expected = [], []
    for sura, n in enumerate(counts, 1):
        for aya in range(1, n + 1):
            text = BASMALA if (sura, aya) == (1, 1) else f"{W[(sura + aya) % len(W)]} {W[aya % len(W)]} {aya}"
            expected.append(text)
            if aya == 1 and sura not in (1, 9):
                text = f"{SHADDA_FORM if sura == 95 else BASMALA} {text}"
            src.append(f"{sura}|{aya}|{text}")
    return src, expected


def test_quran_text_one_aya_per_line_basmala_apart_notice_kept(tmp_path: Path):
    src_lines, expected = quran_lines()
    src = write(tmp_path / "quran-uthmani.txt", "\r\n".join(src_lines + ["", ""] + NOTICE_BLOCK) + "\r\n")
    out = tmp_path / "ar"
    stats = convert_quran({"quran-uthmani.txt": src}, out)
    assert read(out / "quran-uthmani.txt") == "".join(t + "\n" for t in expected)
    assert stats["suras"] == 114 and stats["ayas"] == 6236 and stats["basmalas_taken_off"] == 112
    assert stats["basmalas_with_a_shadda_on_the_first_letter"] == 1
    assert stats["words"] == sum(len(t.split()) for t in expected) and stats["dropped"] == {}
    notice = read(out / "NOTICE")
    assert notice.startswith("\n".join(NOTICE_BLOCK) + "\n\nSource file: https://raw.githubusercontent.com/")


@pytest.mark.parametrize("index, line, message", [
    (8, "2|3|بيت", "sura 2 aya 3 out of order; expected 2|2 or 3|1"),
    (7, "2|1|بيت قلم", "sura 2 aya 1 does not begin with the basmala of 1|1"),
    (3, "1-4-بيت", "expected `sura|aya|text` before the `#` notice"),
    (3, "1|4|", "empty aya 1|4"),
])
def test_quran_malformed_line_names_file_and_line(tmp_path: Path, index: int, line: str, message: str):
    src_lines, _ = quran_lines()
    src_lines[index] = line
    src = write(tmp_path / "quran-uthmani.txt", "\n".join(src_lines + NOTICE_BLOCK) + "\n")
    with pytest.raises(ZenError, match=re.escape(f"{src}:{index + 1}: {message}")):
        convert_quran({"quran-uthmani.txt": src}, tmp_path / "out")


def test_quran_needs_every_aya_and_the_notice(tmp_path: Path):
    src_lines, _ = quran_lines()
    short = write(tmp_path / "short.txt", "\n".join(src_lines[:-1] + NOTICE_BLOCK) + "\n")
    with pytest.raises(ZenError, match="114 suras, 6235 ayas; expected 114 suras, 6236 ayas"):
        convert_quran({"quran-uthmani.txt": short}, tmp_path / "out")
    bare = write(tmp_path / "bare.txt", "\n".join(src_lines) + "\n")
    with pytest.raises(ZenError, match="no Tanzil copyright block"):
        convert_quran({"quran-uthmani.txt": bare}, tmp_path / "out")


def test_not_utf8_names_file_and_line(tmp_path: Path):
    src = write(tmp_path / "a.txt", "بيت O\n".encode() + b"\xff O\n")
    with pytest.raises(ZenError, match=re.escape(f"{src}:2: not UTF-8")):
        convert_aqmar({"AQMAR_Arabic_NER_corpus-1.0.txt": src}, tmp_path / "out")


# ---------------------------------------------------------------------------------------------- recipes

@pytest.mark.parametrize("recipe, split, expected", [
    ("finetune-anercorp-ner", "train", "anercorp/ner/train.tsv"),
    ("finetune-aqmar-ner", "dev", "aqmar/ner/dev.tsv"),
    ("finetune-arcd-mrc", "test", "arcd/arcd.json"),
    ("finetune-arcd-mrc", "train", "arabic-squad/train.json"),
    ("finetune-astd-sa", "test", "astd/test.tsv"),
    ("finetune-xnli-ar-nli", "dev", "xnli-ar/dev.tsv"),
    ("finetune-ar-tiny-ner", "test", "anercorp/ner/test.tsv"),
])
def test_the_arabic_recipes_read_the_data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recipe: str,
                                               split: str, expected: str):
    monkeypatch.setenv("ZEN_DATA", str(tmp_path / "zen-data"))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))  # a fetched copy in the real cache must not win
    cfg = load_job_recipe(recipe, expected_job="finetune")
    assert getattr(cfg.data, split) == tmp_path / "zen-data" / expected


def test_the_converters_are_the_ones_the_table_names():
    by_name = {d.name: d.convert for d in DATASETS}
    assert by_name == {"anercorp": convert_anercorp, "aqmar": convert_aqmar, "arcd": convert_arcd,
                       "arabic-squad": convert_arabic_squad, "astd": convert_astd, "ar": convert_quran}
    assert {s.name for s in next(d for d in DATASETS if d.name == "astd").sources} == \
        {"Tweets.txt", *(f"4class-{b}-{s}.txt" for b in ("balanced", "unbalanced")
                         for s in ("train", "validation", "test"))}
    assert arabic.ARCD_OUTPUTS.keys() == {s.name for s in next(d for d in DATASETS if d.name == "arcd").sources}
