"""The Chinese converters of zencli.datasets.chinese, each on small made-up files in its source's exact format
(invented sentences, written here by hand), and zen's readers on what they write; bad input is one line naming
the file and line, and what a converter drops is counted."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from zencli.data.readers.dispatch import read_task_file
from zencli.datasets import catalog, chinese
from zencli.errors import ZenError


def files_of(tmp_path: Path, contents: dict[str, str | bytes]) -> dict[str, Path]:
    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    found = {}
    for name, content in contents.items():
        p = src / name
        p.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        found[name] = p
    return found


def convert(tmp_path: Path, name: str, contents: dict[str, str | bytes]) -> tuple[Path, dict]:
    out = tmp_path / "out"
    out.mkdir(parents=True)
    stats = catalog.get(name).convert(files_of(tmp_path, contents), out)
    json.dumps(stats)  # stats.json must be able to hold it
    return out, stats


def zipped(member: str, text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(member, text.encode("utf-8"))
    return buf.getvalue()


# --- NER --------------------------------------------------------------------------------------------------

WEIBO_TRAIN = ("我0\tO\n们1\tO\n去0\tO\n北0\tB-GPE.NAM\n京1\tI-GPE.NAM\n\n"
               "老0\tB-PER.NOM\n师1\tI-PER.NOM\n说0\tO\n３0\tO\n30\tO\nb12\tO\n\ufffd\ufffd0\tO\n\n")


def test_weibo_drops_the_position_digits(tmp_path: Path):
    out, stats = convert(tmp_path, "weibo", {"weiboNER_2nd_conll.train": WEIBO_TRAIN,
                                             "weiboNER_2nd_conll.dev": "好0\tO\n\n",
                                             "weiboNER_2nd_conll.test": "张0\tB-PER.NAM\n三1\tI-PER.NAM\n"})
    assert (out / "train.tsv").read_text(encoding="utf-8") == (
        "我\tO\n们\tO\n去\tO\n北\tB-GPE.NAM\n京\tI-GPE.NAM\n\n"
        "老\tB-PER.NOM\n师\tI-PER.NOM\n说\tO\n３\tO\n3\tO\nb\tO\n\ufffd\tO\n\n")
    assert stats["splits"]["train"] == {"sentences": 2, "chars": 12, "entities": {"GPE.NAM": 1, "PER.NOM": 1}}
    assert stats["splits"]["test"]["sentences"] == 1  # no blank line at the end of the file
    assert stats["changed"] == {"replacement_char_pairs_read_as_one_char": 1} and stats["dropped"] == {}
    sents, info = read_task_file(out / "train.tsv", "ner")
    assert info.format == "conll" and [len(s.chars) for s in sents] == [5, 7]


@pytest.mark.parametrize("bad,message", [("我\tO\n", r"train:2: token '我' is not a char followed by"),
                                         ("我0 O\n", r"train:2: expected `char\+position<TAB>label`"),
                                         ("我0\tX-PER\n", r"train:2: label 'X-PER' is not O or")])
def test_weibo_bad_lines_name_the_file_and_line(tmp_path: Path, bad: str, message: str):
    with pytest.raises(ZenError, match=message):
        convert(tmp_path, "weibo", {"weiboNER_2nd_conll.train": "好0\tO\n" + bad,
                                    "weiboNER_2nd_conll.dev": "", "weiboNER_2nd_conll.test": ""})


def test_resume_bmes(tmp_path: Path):
    out, stats = convert(tmp_path, "resume", {
        "train.char.bmes": "李 B-NAME\n四 E-NAME\n任 O\n经 B-TITLE\n理 E-TITLE\n\n",
        "dev.char.bmes": "汉 S-RACE\n\n", "test.char.bmes": "某 B-ORG\n厂 E-ORG\n\n"})
    assert (out / "train.tsv").read_text(encoding="utf-8").startswith("李\tB-NAME\n四\tE-NAME\n任\tO\n")
    assert stats["splits"]["train"]["entities"] == {"NAME": 1, "TITLE": 1}
    sents, _ = read_task_file(out / "dev.tsv", "ner")
    assert sents[0].labels == ["S-RACE"]
    with pytest.raises(ZenError, match=r"test\.char\.bmes:2: expected `char label`"):
        convert(tmp_path / "b", "resume", {"train.char.bmes": "", "dev.char.bmes": "",
                                           "test.char.bmes": "某 B-ORG\n厂厂 E-ORG\n"})


def _msra(sentences: list[list[tuple[str, str]]]) -> str:
    return "".join("".join(f"{c}\t{lab}\n" for c, lab in s) + "\n" for s in sentences)


def test_msra_takes_training_from_the_joined_file_and_cuts_dev(tmp_path: Path):
    train = [[("甲", "B-PER"), (c, "O")] for c in "一二三四五六七八九十乙"]  # 11 sentences
    test = [[("南", "B-LOC"), ("京", "I-LOC")], [("好", "O")]]
    out, stats = convert(tmp_path, "msra", {"dh_msra.zip": zipped("dh_msra.txt", _msra(train + test)),
                                            "test_data": _msra(test)})
    assert stats["splits"]["train"]["sentences"] == 10 and stats["splits"]["dev"]["sentences"] == 1
    assert stats["splits"]["test"] == {"sentences": 2, "chars": 3, "entities": {"LOC": 1}}
    assert (out / "dev.tsv").read_text(encoding="utf-8") == "甲\tB-PER\n乙\tO\n\n"  # the last tenth of training
    assert any("last 1 of the 11 training sentences" in n for n in stats["notes"])
    sents, _ = read_task_file(out / "test.tsv", "ner")
    assert sents[0].chars == ["南", "京"]

    with pytest.raises(ZenError, match="its last 2 sentences are not those of"):
        convert(tmp_path / "b", "msra", {"dh_msra.zip": zipped("dh_msra.txt", _msra(test + train)),
                                         "test_data": _msra(test)})
    with pytest.raises(ZenError, match="member dh_msra.txt is missing"):
        convert(tmp_path / "c", "msra", {"dh_msra.zip": zipped("other.txt", ""), "test_data": _msra(test)})
    with pytest.raises(ZenError, match="not a readable zip archive"):
        convert(tmp_path / "d", "msra", {"dh_msra.zip": b"not a zip", "test_data": _msra(test)})


# --- CWS --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("corpus", ["msr", "pku"])
def test_sighan_files(tmp_path: Path, corpus: str):
    lines = [f"第{i}  句  测试  。" for i in range(20)]
    training = "\r\n".join(lines[:10] + ["  ", *lines[10:]]) + "\r\n"  # CRLF, two spaces, one empty line
    out, stats = convert(tmp_path, corpus, {f"{corpus}_training.utf8": training,
                                            f"{corpus}_test_gold.utf8": "今天  天气  好\r\n明天  下雨\r\n"})
    assert (out / "train.txt").read_text(encoding="utf-8").splitlines()[:2] == ["第0 句 测试 。", "第1 句 测试 。"]
    assert (out / "dev.txt").read_text(encoding="utf-8") == "第18 句 测试 。\n第19 句 测试 。\n"
    assert (out / "test.txt").read_text(encoding="utf-8") == "今天 天气 好\n明天 下雨\n"
    assert stats["splits"]["train"]["sentences"] == 18 and stats["dropped"] == {"empty_lines": 1}
    assert stats["splits"]["test"] == {"sentences": 2, "words": 5, "chars": 9}
    sents, info = read_task_file(out / "test.txt", "cws")
    assert info.format == "sighan" and sents[1].labels == ["B", "E", "B", "E"]


def test_nlpcc2016_weibo_segmentation_tests_on_the_official_dev(tmp_path: Path):
    lines = [f"第{i} 条 微博 。" for i in range(10)]
    out, stats = convert(tmp_path, "nlpcc2016-cws", {
        "nlpcc2016-word-seg-train.dat": "\n".join(lines[:4] + ["", *lines[4:]]) + "\n",  # one empty line
        "nlpcc2016-wordseg-dev.dat": "今天 天气  好\n【 转发 】\n"})
    assert (out / "train.txt").read_text(encoding="utf-8").splitlines() == lines[:9]
    assert (out / "dev.txt").read_text(encoding="utf-8") == "第9 条 微博 。\n"
    assert (out / "test.txt").read_text(encoding="utf-8") == "今天 天气 好\n【 转发 】\n"
    assert stats["dropped"] == {"empty_lines": 1} and stats["splits"]["test"] == {"sentences": 2, "words": 6,
                                                                                  "chars": 9}
    assert any("official dev set" in n for n in stats["notes"])
    sents, info = read_task_file(out / "test.txt", "cws")
    assert info.format == "sighan" and sents[1].labels == ["S", "B", "E", "S"]


def test_invalid_utf8_names_the_line(tmp_path: Path):
    with pytest.raises(ZenError, match=r"msr_test_gold\.utf8:2: invalid UTF-8"):
        convert(tmp_path, "msr", {"msr_training.utf8": "一  二\n", "msr_test_gold.utf8": b"ok\n\xff\xfe\n"})


# --- POS (CoNLL-U) ----------------------------------------------------------------------------------------

CONLLU = """# sent_id = made-up-1
# text = 我们去公园。
1\t我们\t我们\tPRON\tPRP\t_\t2\tnsubj\t_\t_
2\t去\t去\tVERB\tVV\t_\t0\troot\t_\t_
3-4\t公园。\t_\t_\t_\t_\t_\t_\t_\t_
3\t公园\t公园\tNOUN\tNN\t_\t2\tobj\t_\t_
4\t。\t。\tPUNCT\t.\t_\t2\tpunct\t_\t_
4.1\t了\t了\tAUX\tAS\t_\t_\t_\t2:aux\t_

# sent_id = made-up-2
1\t好\t好\tADJ\tJJ\t_\t0\troot\t_\t_
"""


def test_gsdsimp_conllu_to_char_labels(tmp_path: Path):
    out, stats = convert(tmp_path, "ud-gsdsimp", {"zh_gsdsimp-ud-train.conllu": CONLLU,
                                                  "zh_gsdsimp-ud-dev.conllu": CONLLU,
                                                  "zh_gsdsimp-ud-test.conllu": CONLLU})
    assert (out / "train.tsv").read_text(encoding="utf-8") == (
        "我\tB-PRON\n们\tE-PRON\n去\tS-VERB\n公\tB-NOUN\n园\tE-NOUN\n。\tS-PUNCT\n\n好\tS-ADJ\n\n")
    assert stats["splits"]["dev"] == {"sentences": 2, "words": 5, "chars": 7}
    assert stats["dropped"] == {"multiword_or_empty_node_lines": 6}  # 2 a file, in 3 files
    sents, _ = read_task_file(out / "test.tsv", "pos")
    assert sents[0].labels[:2] == ["B-PRON", "E-PRON"]
    with pytest.raises(ZenError, match=r"train\.conllu:3: expected 10 TAB-separated CoNLL-U columns, got 3"):
        convert(tmp_path / "b", "ud-gsdsimp", {"zh_gsdsimp-ud-train.conllu": "# c\n\n1\t好\tADJ\n",
                                               "zh_gsdsimp-ud-dev.conllu": "", "zh_gsdsimp-ud-test.conllu": ""})


# --- sentence classification ------------------------------------------------------------------------------

def test_chnsenticorp_tsv_with_header(tmp_path: Path):
    out, stats = convert(tmp_path, "chnsenticorp", {
        "train.tsv": "label\ttext_a\n1\t房间很干净\n0\t服务太慢了 \n1\t \n",
        "dev.tsv": "label\ttext_a\n0\t不推荐\n", "test.tsv": "label\ttext_a\n1\t值得一住\n"})
    assert (out / "train.tsv").read_text(encoding="utf-8") == "1\t房间很干净\n0\t服务太慢了\n"
    assert stats["dropped"] == {"empty_texts": 1} and stats["splits"]["train"]["labels"] == {"0": 1, "1": 1}
    examples, _ = read_task_file(out / "train.tsv", "sa")
    assert [(e.label, e.text) for e in examples] == [("1", "房间很干净"), ("0", "服务太慢了")]
    with pytest.raises(ZenError, match=r"dev\.tsv:1: expected the header `label<TAB>text_a`"):
        convert(tmp_path / "b", "chnsenticorp", {"train.tsv": "label\ttext_a\n", "dev.tsv": "1\t好\n",
                                                 "test.tsv": ""})
    with pytest.raises(ZenError, match=r"test\.tsv:3: expected `0\|1<TAB>text`"):
        convert(tmp_path / "c", "chnsenticorp", {"train.tsv": "label\ttext_a\n", "dev.tsv": "label\ttext_a\n",
                                                 "test.tsv": "label\ttext_a\n1\t好\n2\t坏\n"})


def test_hotel_reviews_csv_are_shuffled_and_cut(tmp_path: Path):
    rows = "".join(f'{i % 2},"评论{i}，含逗号"\n' for i in range(18))
    csv_text = 'label,review\n1,"两行\n的评论"\n0,\n' + rows
    out, stats = convert(tmp_path, "chnsenticorp-htl", {"ChnSentiCorp_htl_all.csv": csv_text})
    written = {name: (out / f"{name}.tsv").read_text(encoding="utf-8").splitlines() for name in chinese.SPLITS}
    assert [len(v) for v in written.values()] == [15, 1, 3]  # 19 reviews, 80/10/10
    every = [ln for v in written.values() for ln in v]
    assert "1\t两行 的评论" in every and "0\t评论2，含逗号" in every
    assert stats["dropped"] == {"texts_with_tabs_or_newlines_joined": 1, "empty_texts": 1}
    again, _ = convert(tmp_path / "again", "chnsenticorp-htl", {"ChnSentiCorp_htl_all.csv": csv_text})
    assert (again / "train.tsv").read_bytes() == (out / "train.tsv").read_bytes()  # the same cut every time
    with pytest.raises(ZenError, match=r"htl_all\.csv:3: label '5' is not 0 or 1"):
        convert(tmp_path / "b", "chnsenticorp-htl", {"ChnSentiCorp_htl_all.csv": "label,review\n1,好\n5,坏\n"})
    with pytest.raises(ZenError, match=r"htl_all\.csv:1: expected the CSV header label,review"):
        convert(tmp_path / "c", "chnsenticorp-htl", {"ChnSentiCorp_htl_all.csv": "x,y\n"})


def test_waimai_reviews_csv(tmp_path: Path):
    csv_text = "label,review\n" + "".join(f"{i % 2},外卖{i}很快\n" for i in range(10))
    out, stats = convert(tmp_path, "waimai-10k", {"waimai_10k.csv": csv_text})
    written = {name: (out / f"{name}.tsv").read_text(encoding="utf-8").splitlines() for name in chinese.SPLITS}
    assert [len(v) for v in written.values()] == [8, 1, 1]
    assert sorted(ln for v in written.values() for ln in v) == sorted(f"{i % 2}\t外卖{i}很快" for i in range(10))
    assert stats["splits"]["train"]["examples"] == 8
    with pytest.raises(ZenError, match=r"waimai_10k\.csv:2: label '2' is not 0 or 1"):
        convert(tmp_path / "b", "waimai-10k", {"waimai_10k.csv": "label,review\n2,好\n"})


def test_online_shopping_category_is_the_label(tmp_path: Path):
    cats = ["书籍", "水果", "酒店"]
    csv_text = "cat,label,review\n" + "".join(f"{cats[i % 3]},{i % 2},商品{i}不错\n" for i in range(30))
    out, stats = convert(tmp_path, "online-shopping",
                         {"online_shopping_10_cats.zip": zipped("online_shopping_10_cats.csv", csv_text)})
    assert stats["splits"]["train"]["examples"] == 24 and sum(stats["splits"]["train"]["labels"].values()) == 24
    examples, _ = read_task_file(out / "test.tsv", "dc")
    assert len(examples) == 3 and all(e.label in cats for e in examples)
    bad = "cat,label,review\n书籍,1,好\n书籍,1\n"
    with pytest.raises(ZenError, match=r"online_shopping_10_cats\.csv:3: expected 3 CSV fields"):
        convert(tmp_path / "b", "online-shopping", {"online_shopping_10_cats.zip": zipped("online_shopping_10_cats.csv",
                                                                                          bad)})


# --- MRC --------------------------------------------------------------------------------------------------

def _squad(n_articles: int, prefix: str) -> str:
    def article(i: int) -> dict:
        answer = {"text": "北京", "answer_start": 4 if i else 0}  # article 0's start is off
        qa = {"id": f"{prefix}{i}-q", "question": "小明住在哪里？", "answers": [answer]}
        paragraph = {"context": "小明住在北京。", "id": f"{prefix}{i}", "qas": [qa]}
        return {"title": f"{prefix}{i}", "paragraphs": [paragraph]}

    data = [article(i) for i in range(n_articles)]
    return json.dumps({"version": "v1.0", "data": data}, ensure_ascii=False)


def test_cmrc2018_holds_out_whole_articles(tmp_path: Path):
    out, stats = convert(tmp_path, "cmrc2018", {"cmrc2018_train.json": _squad(20, "T"),
                                                "cmrc2018_dev.json": _squad(3, "D")})
    train = json.loads((out / "train.json").read_text(encoding="utf-8"))
    heldout = json.loads((out / "heldout.json").read_text(encoding="utf-8"))
    assert [a["title"] for a in heldout["data"]] == ["T18", "T19"] and len(train["data"]) == 18
    assert json.loads((out / "cmrc2018_dev.json").read_text(encoding="utf-8")) == json.loads(_squad(3, "D"))
    assert stats["source_counts"]["train"]["answers_not_at_answer_start"] == 1  # kept, and counted
    examples, _ = read_task_file(out / "heldout.json", "mrc")
    assert len(examples) == 2
    with pytest.raises(ZenError, match=r"cmrc2018_dev\.json:1: not valid JSON"):
        convert(tmp_path / "b", "cmrc2018", {"cmrc2018_train.json": _squad(2, "T"), "cmrc2018_dev.json": "{oops"})
    with pytest.raises(ZenError, match="question T0-q has no question text or no answers"):
        convert(tmp_path / "c", "cmrc2018", {"cmrc2018_train.json": _squad(1, "T").replace('"answers": [{', '"x": [{'),
                                             "cmrc2018_dev.json": _squad(1, "D")})


# --- CLUENER (JSON objects with character spans) ----------------------------------------------------------

def _cluener_obj(text: str, label: dict) -> dict:
    return {"text": text, "label": label}


def test_cluener_spans_become_bmes_from_json_lines_or_pretty_printed(tmp_path: Path):
    train = [_cluener_obj(f"张三在北京{i}", {"name": {"张三": [[0, 1]]}, "address": {"北京": [[3, 4]]}})
             for i in range(9)]
    train.append(_cluener_obj("某 公司", {"company": {"某 公司": [[0, 3]]}, "name": {"某": [[0, 0]]}}))
    dev = [_cluener_obj("读书", {"book": {"书": [[1, 1]]}}), {"text": "无", "label": {}}]
    pretty = "\n".join(json.dumps(o, ensure_ascii=False, indent=2) for o in train) + "\n"
    lines = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in dev)
    out, stats = convert(tmp_path, "cluener", {"train.json": pretty, "dev.json": lines})
    assert (out / "train.tsv").read_text(encoding="utf-8").startswith(
        "张\tB-name\n三\tE-name\n在\tO\n北\tB-address\n京\tE-address\n0\tO\n\n")
    # the space is dropped, its label with it
    assert (out / "dev.tsv").read_text(encoding="utf-8") == "某\tB-company\n公\tM-company\n司\tE-company\n\n"
    assert (out / "test.tsv").read_text(encoding="utf-8") == "读\tO\n书\tS-book\n\n无\tO\n\n"
    assert stats["dropped"] == {"overlapping_entities": 1, "whitespace_chars": 1}
    assert stats["splits"]["train"]["entities"] == {"address": 9, "name": 9}
    sents, info = read_task_file(out / "test.tsv", "ner")
    assert info.format == "conll" and [len(s.chars) for s in sents] == [2, 1]


@pytest.mark.parametrize("bad,message", [
    ('{"text": "北京", "label": {"address": {"南京": [[0, 1]]}}}', r"train\.json:2: span \[0, 1\] reads '北京'"),
    ('{"text": "北京", "label": {"address": {"北京": [[0, 2]]}}}', r"train\.json:2: entity '北京' has a span"),
    ('{"text": "北京", "label": ', r"train\.json:3: not valid JSON"),
    ('[1, 2]', r"train\.json:2: expected a JSON object")])
def test_cluener_bad_objects_name_the_file_and_line(tmp_path: Path, bad: str, message: str):
    with pytest.raises(ZenError, match=message):
        convert(tmp_path, "cluener", {"train.json": '{"text": "好", "label": {}}\n' + bad + "\n", "dev.json": ""})
