"""The CHTE paper's datasets read out of the box (made-up lines in their layouts, no data of theirs): Weibo NER
(`weiboNER_2nd_conll.*`: char + word-position digit, TAB, BIO with `.NAM`/`.NOM` types; a BMES `.char.bmes`
copy) and Resume NER (`*.char.bmes`: `char label` with a space, BMES)."""

import pytest

from tests.conftest import write
from zencli.config import load_job_recipe
from zencli.data.readers import read_task_file
from zencli.errors import ZenError

WEIBO_SEG = ("我0\tO\n们1\tO\n看0\tO\n王0\tB-PER.NAM\n小1\tI-PER.NAM\n二2\tI-PER.NAM\n～0\tO\n\n"
             "去0\tO\n城0\tB-GPE.NOM\n里1\tO\n")
WEIBO_BMES = "看0 O\n王0 B-PER.NAM\n小1 M-PER.NAM\n二2 E-PER.NAM\n\n城0 S-GPE.NOM\n"
RESUME = "张 B-NAME\n三 E-NAME\n， O\n男 O\n\n任 O\n工 B-TITLE\n程 M-TITLE\n师 E-TITLE\n"


def test_weibo_word_position_digits_are_dropped(tmp_path):
    p = write(tmp_path / "weiboNER_2nd_conll.train", WEIBO_SEG)
    sents, info = read_task_file(p, "ner")
    assert (info.format, info.level, info.scheme) == ("conll-seg", "char", "BIO")
    assert sents[0].chars == list("我们看王小二～") and sents[0].labels[3:6] == ["B-PER.NAM", "I-PER.NAM", "I-PER.NAM"]
    assert [s.line for s in sents] == [1, 9]
    assert info.entities == {"GPE.NOM": 1, "PER.NAM": 1}
    assert any("word-position digit" in n for n in info.notes)


def test_weibo_positions_past_ten_and_lost_chars(tmp_path):
    """The original files number a word's 11th char on as 10, 11… (two digits after the char, itself maybe a
    digit), and write a char beyond the BMP that they lost as two U+FFFD: one char, one label each."""
    text = ("看0\tO\n" + "".join(f"{c}{i}\tO\n" for i, c in enumerate("abcdefghij12")) + "\ufffd\ufffd0\tO\n"
            "王0\tB-PER.NAM\n\ufffd0\tO\n")
    sents, info = read_task_file(write(tmp_path / "weiboNER_2nd_conll.dev", text), "ner")
    assert info.format == "conll-seg"
    assert sents[0].chars == ["看", *"abcdefghij12", "\ufffd", "王", "\ufffd"]
    assert sents[0].labels[-2:] == ["B-PER.NAM", "O"] and len(sents[0].labels) == len(sents[0].chars)


def test_weibo_bmes_copy_with_digits_and_spaces(tmp_path):
    sents, info = read_task_file(write(tmp_path / "train.char.bmes", WEIBO_BMES), "ner")
    assert (info.format, info.scheme) == ("conll-seg", "BMES")
    assert sents[0].text == "看王小二" and info.entities == {"GPE.NOM": 1, "PER.NAM": 1}


def test_weibo_without_digits_is_plain_conll(tmp_path):
    plain = "".join(line[0] + line[2:] + "\n" if line else "\n" for line in WEIBO_SEG.split("\n")[:-1])
    sents, info = read_task_file(write(tmp_path / "w.train", plain), "ner")
    assert info.format == "conll" and sents[0].text == "我们看王小二～"


def test_resume_char_bmes(tmp_path):
    sents, info = read_task_file(write(tmp_path / "train.char.bmes", RESUME), "ner")
    assert (info.format, info.level, info.scheme) == ("conll", "char", "BMES")
    assert info.entities == {"NAME": 1, "TITLE": 1} and sents[1].text == "任工程师"


def test_a_conll_seg_line_without_its_digit_names_the_line(tmp_path):
    p = write(tmp_path / "w.train", "我0\tO\n们\tO\n")
    with pytest.raises(ZenError) as e:
        read_task_file(p, "ner", "conll-seg")
    assert f"{p}:2:" in str(e.value) and "word-position digit" in str(e.value)


@pytest.mark.parametrize("recipe,train,text", [("finetune-weibo-ner", "train.tsv", WEIBO_SEG),
                                               ("finetune-resume-ner", "train.tsv", RESUME)])
def test_the_chte_recipes_read_their_files(tmp_path, recipe, train, text):
    """The recipe's format setting (auto) reads the file named by its data.train."""
    cfg = load_job_recipe(recipe, expected_job="finetune")
    assert cfg.data.train.name == train
    sents, info = read_task_file(write(tmp_path / train, text), "ner", cfg.data.format)
    assert info.level == "char" and all(len(c) == 1 for s in sents for c in s.chars)
