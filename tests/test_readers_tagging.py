"""Token-level readers (CWS, POS, NER): every format, detection, label schemes, file:line errors."""

from pathlib import Path

import pytest

from tests.conftest import write
from zencli.data.readers import detect_tagging_format, read_task_file
from zencli.errors import ZenError


def _error(path: Path, task: str, fmt: str = "auto") -> str:
    with pytest.raises(ZenError) as e:
        read_task_file(path, task, fmt)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# --- CWS ---------------------------------------------------------------------------------------

def test_cws_sighan_words_to_bmes_and_back(tmp_path):
    # Spaces, a U+3000 ideographic space and a tab all separate words.
    p = write(tmp_path / "seg.txt", "我们 喜欢\u3000读书 。\n\n天\t晴\n")
    sents, info = read_task_file(p, "cws")
    assert info.format == "sighan" and info.scheme == "BMES"
    assert [s.line for s in sents] == [1, 2, 3]
    s = sents[0]
    assert s.chars == list("我们喜欢读书。")
    assert s.labels == ["B", "E", "B", "E", "B", "E", "S"]
    assert s.words == ["我们", "喜欢", "读书", "。"]
    assert sents[1].chars == [] and sents[1].labels == []  # empty line kept: line count preserved
    assert sents[2].words == ["天", "晴"]
    assert (info.examples, info.tokens, info.words, info.empty) == (3, 9, 6, 1)
    assert info.label_counts == {"B": 3, "E": 3, "S": 3}


def test_cws_char_level_bies_is_read_as_bmes(tmp_path):
    p = write(tmp_path / "c.tsv", "中\tB\n华\tI\n人\tE\n好\tS\n\n走\tS\n")
    sents, info = read_task_file(p, "cws")
    assert info.format == "conll"
    assert sents[0].labels == ["B", "M", "E", "S"] and sents[0].words == ["中华人", "好"]
    assert sents[1].line == 6 and sents[1].chars == ["走"]
    assert any("I were read as M" in n for n in info.notes)


def test_cws_char_level_space_separated(tmp_path):
    p = write(tmp_path / "c.txt", "中 B\n国 E\n")
    sents, info = read_task_file(p, "cws")
    assert info.format == "conll" and sents[0].words == ["中国"]


def test_cws_raw_text_keeps_empty_lines_and_every_char(tmp_path):
    p = write(tmp_path / "raw.txt", "今天天气好\n\n明天ok\n")
    sents, info = read_task_file(p, "cws")
    assert info.format == "raw" and not info.labelled and info.scheme is None
    assert [s.text for s in sents] == ["今天天气好", "", "明天ok"]
    assert all(s.labels is None and s.words is None for s in sents)
    assert info.empty == 1


def test_cws_bad_label_names_line(tmp_path):
    p = write(tmp_path / "c.tsv", "中\tB\n国\tE\n\n人\tX\n")
    msg = _error(p, "cws")
    assert f"{p}:4:" in msg and "B, M, E or S" in msg and "'X'" in msg


def test_cws_ill_formed_sequence_is_counted_not_dropped(tmp_path):
    p = write(tmp_path / "c.tsv", "中\tB\n国\tB\n\n人\tS\n")
    sents, info = read_task_file(p, "cws")
    assert len(sents) == 2 and info.ill_formed == 1
    assert sents[0].words == ["中", "国"]  # a B starts a new word even after an unclosed one


# --- POS ---------------------------------------------------------------------------------------

def test_pos_char_level_joint_labels(tmp_path):
    p = write(tmp_path / "pos.tsv", "我\tS-r\n爱\tS-v\n北\tB-ns\n京\tE-ns\n\n好\tS-a\n\n")
    sents, info = read_task_file(p, "pos")
    assert info.format == "conll" and info.scheme == "BMES"
    assert sents[0].tagged_words == [("我", "r"), ("爱", "v"), ("北京", "ns")]
    assert (info.examples, info.tokens, info.words) == (2, 5, 4)
    assert sents[1].line == 6


def test_pos_word_slash_splits_on_last_slash(tmp_path):
    p = write(tmp_path / "pos.txt", "１/2/m  公斤/q  北京大学/nt\n\n好/a\n")
    sents, info = read_task_file(p, "pos")
    assert info.format == "word-slash"
    s = sents[0]
    assert s.tagged_words == [("１/2", "m"), ("公斤", "q"), ("北京大学", "nt")]
    assert s.labels[:3] == ["B-m", "M-m", "E-m"]
    assert s.labels[-4:] == ["B-nt", "M-nt", "M-nt", "E-nt"]
    assert sents[1].chars == [] and sents[2].tagged_words == [("好", "a")]


def test_pos_word_tab_one_word_per_line(tmp_path):
    p = write(tmp_path / "pos.tsv", "我们\tr\n走\tv\n\n\n好的\tz\n")
    sents, info = read_task_file(p, "pos")
    assert info.format == "word-tab"
    assert sents[0].labels == ["B-r", "E-r", "S-v"] and sents[0].line == 1
    assert sents[1].labels == ["B-z", "E-z"] and sents[1].line == 5


def test_pos_token_without_slash_names_line(tmp_path):
    p = write(tmp_path / "pos.txt", "我/r 爱/v\n他/r 跑步\n")
    msg = _error(p, "pos")
    assert f"{p}:2:" in msg and "word/TAG" in msg


def test_pos_char_level_label_without_tag(tmp_path):
    p = write(tmp_path / "pos.tsv", "我\tS-r\n爱\tS\n")
    msg = _error(p, "pos", "conll")
    assert f"{p}:2:" in msg and "B-TAG" in msg


# --- NER ---------------------------------------------------------------------------------------

NER_BMES = "张\tB-PER\n小\tM-PER\n明\tE-PER\n在\tO\n京\tS-LOC\n\n他\tO\n"
NER_BIO = "张\tB-PER\n小\tI-PER\n明\tI-PER\n在\tO\n京\tB-LOC\n\n他\tO\n"
NER_IOBES = "张\tB-PER\n小\tI-PER\n明\tE-PER\n在\tO\n京\tS-LOC\n\n他\tO\n"


@pytest.mark.parametrize("text,scheme", [(NER_BMES, "BMES"), (NER_BIO, "BIO"), (NER_IOBES, "IOBES")])
def test_ner_conll_schemes_detected_and_same_entities(tmp_path, text, scheme):
    p = write(tmp_path / "ner.tsv", text)
    sents, info = read_task_file(p, "ner")
    assert info.format == "conll" and info.scheme == scheme
    assert info.entities == {"LOC": 1, "PER": 1}
    assert [s.line for s in sents] == [1, 7] and sents[0].text == "张小明在京"
    assert info.ill_formed == 0


def test_ner_x02_variant(tmp_path):
    p = write(tmp_path / "ner.txt", "中\x02国\x02人\tB-LOC\x02E-LOC\x02O\n\n他\tO\n")
    sents, info = read_task_file(p, "ner")
    assert info.format == "x02" and info.scheme == "IOBES"
    assert sents[0].chars == ["中", "国", "人"] and sents[0].labels == ["B-LOC", "E-LOC", "O"]
    assert sents[1].chars == [] and sents[2].line == 3
    assert info.entities == {"LOC": 1}


def test_ner_x02_count_mismatch_names_line(tmp_path):
    p = write(tmp_path / "ner.txt", "他\tO\n中\x02国\tB-LOC\x02E-LOC\x02O\n")
    msg = _error(p, "ner")
    assert f"{p}:2:" in msg and "2 chars but 3 labels" in msg


def test_ner_bad_prefix_names_line(tmp_path):
    p = write(tmp_path / "ner.tsv", "张\tB-PER\n三\tE-PER\n说\tO\n\n李\tX-PER\n")
    msg = _error(p, "ner")
    assert f"{p}:5:" in msg and "'X-PER'" in msg and "B-PER" in msg


def test_ner_three_columns_names_line(tmp_path):
    p = write(tmp_path / "ner.tsv", "张\tB-PER\n三\tE-PER\n说\tO\tO\n")
    msg = _error(p, "ner")
    assert f"{p}:3:" in msg and "expected 2 columns" in msg and "got 3" in msg


def test_ner_multi_char_first_column_names_line(tmp_path):
    p = write(tmp_path / "ner.tsv", "张\tB-PER\n三\tE-PER\n北京\tO\n")
    msg = _error(p, "ner", "conll")
    assert f"{p}:3:" in msg and "one character" in msg


def test_ner_mixed_i_and_m_names_first_conflicting_line(tmp_path):
    p = write(tmp_path / "ner.tsv", "张\tB-PER\n小\tM-PER\n明\tE-PER\n\n王\tB-PER\n五\tI-PER\n")
    msg = _error(p, "ner")
    assert f"{p}:6:" in msg and "I- and M-" in msg


def test_ner_ill_formed_sequences_counted_and_not_repaired(tmp_path):
    # `I-PER` after `O` is no entity in strict BIO; `B-LOC` never closed is none in IOBES.
    p = write(tmp_path / "bio.tsv", "他\tO\n明\tI-PER\n\n京\tB-LOC\n")
    _, info = read_task_file(p, "ner")
    assert info.scheme == "BIO" and info.ill_formed == 1 and info.entities == {"LOC": 1}
    q = write(tmp_path / "iobes.tsv", "京\tB-LOC\n在\tO\n\n上\tB-LOC\n海\tE-LOC\n")
    _, info = read_task_file(q, "ner")
    assert info.scheme == "IOBES" and info.ill_formed == 1 and info.entities == {"LOC": 1}


def test_ner_docstart_crlf_bom_and_trailing_space(tmp_path):
    p = tmp_path / "ner.tsv"
    p.write_bytes(b"\xef\xbb\xbf" + "-DOCSTART- O\r\n\r\n京\tS-LOC \r\n在\tO\r\n".encode())
    sents, info = read_task_file(p, "ner")
    assert info.format == "conll" and len(sents) == 1
    assert sents[0].labels == ["S-LOC", "O"] and sents[0].line == 3


def test_ner_raw_for_prediction(tmp_path):
    p = write(tmp_path / "raw.txt", "张三在北京\n\n")
    sents, info = read_task_file(p, "ner")
    assert info.format == "raw" and [s.text for s in sents] == ["张三在北京", ""]


def test_ideographic_space_can_be_a_char_with_tab_separator(tmp_path):
    p = write(tmp_path / "ner.tsv", "张\tS-PER\n\u3000\tO\n")
    sents, info = read_task_file(p, "ner")
    assert sents[0].chars == ["张", "\u3000"]
    assert info.notes == [("1 white-space characters (U+3000 ×1) read as characters with labels (`zen predict` never "
                           "reads white space as a character); the first at line 2")]


def test_control_characters_are_read_as_they_are_and_noted_with_their_line(tmp_path):
    """A NUL in a NER file became a character without a note."""
    conll = write(tmp_path / "ner.tsv", "张\tS-PER\n\n北\tB-LOC\n\x00\tO\n京\tO\n\x00\tO\n\x07\tO\n")
    sents, info = read_task_file(conll, "ner")
    assert sents[1].chars == ["北", "\x00", "京", "\x00", "\x07"]  # read as written, like the other readers
    assert info.notes == [("3 control characters (U+0000 ×2, U+0007 ×1) read as characters with labels, each [UNK] to "
                           "the model (check the file's encoding); the first at line 4")]
    x02 = write(tmp_path / "ner.x02", "张\x02三\tB-PER\x02E-PER\n他\x02\ufffd\tO\x02O\n")
    assert "1 control characters (U+FFFD ×1)" in read_task_file(x02, "ner")[1].notes[0]
    assert "the first at line 2" in read_task_file(x02, "ner")[1].notes[0]
    words = write(tmp_path / "words.txt", "قال\tO\nسم\x00ران\tB-PER\n\n")
    assert read_task_file(words, "ner", "conll-word")[1].notes == [
        "1 control characters (U+0000 ×1) dropped by the tokenizer from their words; the first at line 2"]
    clean = write(tmp_path / "clean.tsv", "张\tS-PER\n三\tO\n")
    assert read_task_file(clean, "ner")[1].notes == []


# --- detection and errors shared by the formats ------------------------------------------------

def test_explicit_format_overrides_detection(tmp_path):
    p = write(tmp_path / "seg.txt", "我们 喜欢\n")
    assert detect_tagging_format(p, "cws") == "sighan"
    sents, info = read_task_file(p, "cws", fmt="raw")
    assert info.format == "raw" and sents[0].text == "我们 喜欢"


def test_a_bad_line_among_good_ones_is_reported_not_misdetected(tmp_path):
    # One malformed line must not flip detection to "raw" and silently read labels as text.
    p = write(tmp_path / "pos.tsv", "我\tS-r\n爱\tS-v\t\n他\tS-r\n")
    msg = _error(p, "pos")
    assert f"{p}:2:" in msg and "got 3" in msg


def test_unknown_format_and_task(tmp_path):
    p = write(tmp_path / "a.txt", "我\n")
    with pytest.raises(ZenError, match="format 'sighan' for task ner"):
        read_task_file(p, "ner", fmt="sighan")
    with pytest.raises(ZenError, match="task 'parse'"):
        read_task_file(p, "parse")


def test_blank_only_and_missing_files(tmp_path):
    p = write(tmp_path / "blank.txt", "\n\n")
    assert "only blank lines" in _error(p, "ner")
    assert "no such file" in _error(tmp_path / "nope.tsv", "cws")


def test_invalid_utf8_names_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_bytes("京\tS-LOC\n".encode() + b"\xff\tO\n")
    msg = _error(p, "ner", "conll")
    assert f"{p}:2:" in msg and "UTF-8" in msg
