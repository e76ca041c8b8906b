"""`zen evaluate --task T --gold GOLD --pred PRED`: each task family end to end on small made-up files
with hand-computed scores, JSON output, alignment errors and unseen predicted labels; plus PD98 e2e."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import PD98, ROOT, needs_data, write
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.tasks.scoring import read_train_words, score_files

runner = CliRunner()


def _conll(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    return write(path, [line for s in sentences for line in [f"{c}\t{lab}" for c, lab in s] + [""]])


def _scores(*args: str) -> dict:
    """Run `zen evaluate ARGS --json -` in process; the JSON is all that reaches stdout."""
    r = runner.invoke(app, ["evaluate", *args, "--json", "-"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _error(*args: str) -> str:
    r = runner.invoke(app, ["evaluate", *args])
    assert isinstance(r.exception, ZenError), r.output
    message = str(r.exception)
    assert "\n" not in message
    return message


def _zen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zencli", *args], cwd=ROOT, capture_output=True, text=True)


# --- CWS ------------------------------------------------------------------------------------------

CWS_GOLD = ["我们 喜欢 北京", "今天 天气 很 好"]
# Line 1: 我们 and 北京 right, 喜|欢 wrong; line 2: 今天天气 and 很好 both wrong.
CWS_PRED = ["我们 喜 欢 北京", "今天天气 很好"]
TRAIN_WORDS = ["我们", "喜欢", "今天", "很", "好"]  # 北京 and 天气 are OOV


def test_cws_prf_and_oov_from_a_word_list(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", CWS_GOLD)
    pred = write(tmp_path / "pred.txt", CWS_PRED)
    words = write(tmp_path / "words.txt", TRAIN_WORDS)
    d = _scores("--task", "cws", "--gold", str(gold), "--pred", str(pred), "--train-words", str(words))
    # 2 correct of 6 predicted and 7 gold words: P = 1/3, R = 2/7, F = 2PR/(P+R) = 4/13.
    assert (d["correct"], d["predicted"], d["gold"]) == (2, 6, 7)
    assert d["precision"] == pytest.approx(1 / 3) and d["recall"] == pytest.approx(2 / 7)
    assert d["f1"] == pytest.approx(4 / 13) and d["main_score"] == d["f1"]
    # Gold OOV: 北京 (found), 天气 (missed); IV: 我们 found, 喜欢 今天 很 好 missed.
    assert d["oov_rate"] == pytest.approx(2 / 7)
    assert d["oov_recall"] == pytest.approx(1 / 2) and d["iv_recall"] == pytest.approx(1 / 5)
    assert (d["task"], d["gold_file"], d["prediction_file"]) == ("cws", str(gold), str(pred))
    assert (d["gold_format"], d["prediction_format"], d["train_words_file"]) == ("sighan", "sighan", str(words))


def test_cws_char_level_gold_against_sighan_prediction_and_sighan_train_words(tmp_path: Path):
    def bmes(line: str) -> list[tuple[str, str]]:
        out = []
        for w in line.split():
            tags = ["S"] if len(w) == 1 else ["B", *["M"] * (len(w) - 2), "E"]
            out.extend(zip(w, tags))
        return out

    gold = _conll(tmp_path / "gold.tsv", [bmes(x) for x in CWS_GOLD])
    pred = write(tmp_path / "pred.txt", CWS_PRED)
    train = write(tmp_path / "train.txt", ["我们 喜欢", "今天 很 好"])  # SIGHAN training lines
    d = _scores("--task", "cws", "--gold", str(gold), "--pred", str(pred), "--train-words", str(train))
    assert (d["gold_format"], d["prediction_format"]) == ("conll", "sighan")
    assert d["f1"] == pytest.approx(4 / 13) and d["oov_rate"] == pytest.approx(2 / 7)


def test_train_words_file_kinds(tmp_path: Path):
    assert read_train_words(write(tmp_path / "a.txt", TRAIN_WORDS)) == (set(TRAIN_WORDS), "word-list")
    assert read_train_words(write(tmp_path / "b.txt", ["我们 喜欢", "很"])) == ({"我们", "喜欢", "很"}, "sighan")
    counted = write(tmp_path / "c.txt", ["我们 12", "喜欢 3"])  # counts are not words
    assert read_train_words(counted) == ({"我们", "喜欢"}, "word-counts")
    tabbed = write(tmp_path / "d.txt", ["我们\t12\tr", "喜欢\t3\tv"])
    assert read_train_words(tabbed) == ({"我们", "喜欢"}, "word-list-tab")
    conll = _conll(tmp_path / "e.tsv", [[("我", "B"), ("们", "E"), ("好", "S")]])
    assert read_train_words(conll) == ({"我们", "好"}, "conll")


def test_cws_prediction_whose_text_differs_names_the_line(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", CWS_GOLD)
    pred = write(tmp_path / "pred.txt", ["我们 喜欢 北京", "今天 天汽 很 好"])
    msg = _error("--task", "cws", "--gold", str(gold), "--pred", str(pred))
    assert f"{pred}:2" in msg and f"{gold}:2" in msg and "character 4" in msg


def test_cws_prediction_without_spaces_is_one_word_per_line(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", CWS_GOLD)
    pred = write(tmp_path / "pred.txt", ["我们喜欢北京", "今天天气很好"])
    d = _scores("--task", "cws", "--gold", str(gold), "--pred", str(pred))
    assert (d["correct"], d["predicted"], d["gold"]) == (0, 2, 7)
    assert d["prediction_format"] == "sighan" and any("no spaces" in n for n in d["notes"])


# --- NER ------------------------------------------------------------------------------------------

NER_GOLD = [
    [("张", "B-PER"), ("三", "E-PER"), ("在", "O"), ("北", "B-LOC"), ("京", "E-LOC")],
    [("华", "B-ORG"), ("为", "E-ORG"), ("好", "O"), ("上", "S-LOC")],
]
# PER 张三 right; LOC 北京 split into two wrong S-LOCs; ORG right; 好 a spurious PER; LOC 上 missed.
NER_PRED = [
    [("张", "B-PER"), ("三", "E-PER"), ("在", "O"), ("北", "S-LOC"), ("京", "S-LOC")],
    [("华", "B-ORG"), ("为", "E-ORG"), ("好", "S-PER"), ("上", "O")],
]


def _check_ner(d: dict) -> None:
    # Overall: 2 correct (张三, 华为) of 5 predicted and 4 gold: P 0.4, R 0.5, F 4/9.
    assert (d["correct"], d["predicted"], d["gold"]) == (2, 5, 4)
    assert d["f1"] == pytest.approx(4 / 9) and d["main_score"] == d["f1"]
    per = d["per_type"]
    assert (per["PER"]["correct"], per["PER"]["predicted"], per["PER"]["gold"]) == (1, 2, 1)
    assert per["PER"]["f1"] == pytest.approx(2 / 3)
    assert (per["LOC"]["correct"], per["LOC"]["predicted"], per["LOC"]["gold"]) == (0, 2, 2)
    assert per["ORG"]["f1"] == 1.0


def test_ner_conll_per_type(tmp_path: Path):
    gold = _conll(tmp_path / "gold.tsv", NER_GOLD)
    pred = _conll(tmp_path / "pred.tsv", NER_PRED)
    d = _scores("--task", "ner", "--gold", str(gold), "--pred", str(pred))
    _check_ner(d)
    # No M- in the gold file: IOBES (the same entities); S-PER is a label of that scheme, not unseen.
    assert d["scheme"] == "IOBES" and d["unseen_labels"] == {}


def test_ner_x02_prediction(tmp_path: Path):
    gold = _conll(tmp_path / "gold.tsv", NER_GOLD)
    pred = write(tmp_path / "pred.txt", ["\x02".join(c for c, _ in s) + "\t" + "\x02".join(lab for _, lab in s)
                                         for s in NER_PRED])
    d = _scores("--task", "ner", "--gold", str(gold), "--pred", str(pred))
    assert d["prediction_format"] == "x02"
    _check_ner(d)


def test_ner_bio_prediction_against_bmes_gold_is_converted_strictly(tmp_path: Path):
    gold = _conll(tmp_path / "gold.tsv", NER_GOLD)
    # BIO: 张三 right; an I-LOC after O starts no entity (never repaired); ORG right; 上 right.
    pred = _conll(tmp_path / "pred.tsv", [
        [("张", "B-PER"), ("三", "I-PER"), ("在", "O"), ("北", "O"), ("京", "I-LOC")],
        [("华", "B-ORG"), ("为", "I-ORG"), ("好", "O"), ("上", "B-LOC")],
    ])
    d = _scores("--task", "ner", "--gold", str(gold), "--pred", str(pred))
    assert d["scheme"] == "IOBES"
    assert (d["correct"], d["predicted"], d["gold"]) == (3, 3, 4)
    assert any("BIO scheme" in n for n in d["notes"])


def test_ner_unseen_predicted_labels_are_counted_not_fatal(tmp_path: Path):
    gold = _conll(tmp_path / "gold.tsv", NER_GOLD)
    pred = NER_PRED[:1] + [[("华", "B-ORG"), ("为", "E-ORG"), ("好", "S-MISC"), ("上", "S-MISC")]]
    d = _scores("--task", "ner", "--gold", str(gold), "--pred", str(_conll(tmp_path / "pred.tsv", pred)))
    assert d["unseen_labels"] == {"S-MISC": 2} and d["unseen_label_count"] == 2
    assert d["per_type"]["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "correct": 0, "predicted": 2,
                                     "gold": 0}
    r = runner.invoke(app, ["evaluate", "--task", "ner", "--gold", str(gold), "--pred", str(tmp_path / "pred.tsv")])
    assert r.exit_code == 0 and "S-MISC" in r.stdout and "not in the gold label set" in r.stdout


# --- POS ------------------------------------------------------------------------------------------


def test_pos_word_slash_gold_against_char_level_prediction(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", ["我/r 爱/v 北京/ns", "天气/n 好/a"])
    pred = _conll(tmp_path / "pred.tsv", [
        [("我", "S-r"), ("爱", "S-p"), ("北", "B-ns"), ("京", "E-ns")],  # 爱 mistagged
        [("天", "S-n"), ("气", "S-n"), ("好", "S-a")],  # 天气 split
    ])
    d = _scores("--task", "pos", "--gold", str(gold), "--pred", str(pred))
    assert (d["gold_format"], d["prediction_format"]) == ("word-slash", "conll")
    # Joint: 我/r 北京/ns 好/a right, 6 predicted, 5 gold: P 1/2, R 3/5, F 6/11.
    assert (d["correct"], d["predicted"], d["gold"]) == (3, 6, 5)
    assert d["f1"] == pytest.approx(6 / 11) and d["main_score"] == d["f1"]
    # Segmentation: 我 爱 北京 好 right: P 4/6, R 4/5, F 8/11.
    assert d["segmentation"]["correct"] == 4 and d["segmentation"]["f1"] == pytest.approx(8 / 11)
    assert d["tag_accuracy"] == pytest.approx(6 / 7)  # only 爱's tag is wrong
    assert d["unseen_labels"] == {"S-p": 1}  # gold has no p tag at all


# --- classification -------------------------------------------------------------------------------

DC_GOLD = ["体育\t比赛很精彩", "财经\t股市上涨", "体育\t球队赢了", "娱乐\t电影上映"]


def test_dc_label_list_accuracy_and_macro_f1(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", DC_GOLD)
    pred = write(tmp_path / "pred.txt", ["体育", "体育", "体育", "娱乐"])
    d = _scores("--task", "dc", "--gold", str(gold), "--pred", str(pred))
    assert d["prediction_format"] == "labels" and d["metric"] == "classification"
    assert (d["correct"], d["total"]) == (3, 4) and d["accuracy"] == 0.75 and d["main_score"] == 0.75
    # Per class F1: 体育 2/(3 pred, 2 gold) → 0.8, 财经 0, 娱乐 1 → macro 0.6.
    assert d["macro_f1"] == pytest.approx(0.6)


def test_sa_unseen_predicted_label_is_counted(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", ["1\t很好用", "0\t太差了", "1\t推荐购买"])
    pred = write(tmp_path / "pred.txt", ["1", "2", "1", ""])  # a trailing blank line is fine
    d = _scores("--task", "sa", "--gold", str(gold), "--pred", str(pred))
    assert d["accuracy"] == pytest.approx(2 / 3)
    assert d["unseen_labels"] == {"2": 1} and d["unknown_predictions"] == 1


def test_nli_prediction_in_the_gold_format_must_hold_the_gold_texts(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", ["他在跑步\t他在运动\tentailment", "天很冷\t天很热\tcontradiction",
                                         "她笑了\t她很高兴\tneutral"])
    pred = write(tmp_path / "pred.tsv", ["他在跑步\t他在运动\tentailment", "天很冷\t天很热\tcontradictory",
                                         "她笑了\t她很高兴\tentailment"])
    d = _scores("--task", "nli", "--gold", str(gold), "--pred", str(pred))
    assert d["prediction_format"] == "tsv" and (d["correct"], d["total"]) == (2, 3)
    shuffled = write(tmp_path / "shuffled.tsv", ["天很冷\t天很热\tcontradiction", "他在跑步\t他在运动\tentailment",
                                                 "她笑了\t她很高兴\tneutral"])
    msg = _error("--task", "nli", "--gold", str(gold), "--pred", str(shuffled))
    assert f"{shuffled}:1" in msg and f"{gold}:1" in msg and "differs" in msg


def test_label_list_with_an_inner_blank_line_is_refused(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", DC_GOLD)
    pred = write(tmp_path / "pred.txt", ["体育", "", "体育", "娱乐"])
    assert f"{pred}:2: empty line" in _error("--task", "dc", "--gold", str(gold), "--pred", str(pred))


# --- QA (DBQA) ------------------------------------------------------------------------------------


def test_qa_mrr_and_f1_from_one_score_per_line(tmp_path: Path):
    # q0: the positive ranks 2nd (RR 1/2); q1 (not contiguous): 1st (RR 1); q2 has no positive (RR 0).
    gold = write(tmp_path / "gold.tsv", ["q0\t问一\t甲\t0", "q1\t问二\t乙\t1", "q0\t问一\t丙\t1",
                                         "q2\t问三\t丁\t0", "q0\t问一\t戊\t0", "q1\t问二\t己\t0"])
    pred = write(tmp_path / "pred.txt", ["0.9", "0.8", "0.4", "0.2", "0.1", "3e-1"])
    d = _scores("--task", "qa", "--gold", str(gold), "--pred", str(pred))
    assert d["metric"] == "ranking" and d["prediction_format"] == "scores"
    assert d["mrr"] == pytest.approx(0.5) and d["main_score"] == d["mrr"]
    assert (d["questions"], d["questions_without_positive"]) == (3, 1)
    # Score >= 0.5 is positive: 0.9 (wrong), 0.8 (right); 2 gold positives: P = R = F = 1/2.
    assert (d["correct"], d["predicted"], d["gold"]) == (1, 2, 2) and d["f1"] == 0.5


def test_qa_score_that_is_not_a_number_names_the_line(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", ["q0\t问\t甲\t0", "q0\t问\t乙\t1"])
    pred = write(tmp_path / "pred.txt", ["0.3", "nan"])
    assert f"{pred}:2" in _error("--task", "qa", "--gold", str(gold), "--pred", str(pred))


# --- MRC (CMRC 2018) ------------------------------------------------------------------------------


def _cmrc(path: Path) -> Path:
    context = "我们在北京天安门广场，时间是1998年。"
    qas = [
        {"id": "Q1", "question": "在哪个城市？", "answers": [{"text": "北京", "answer_start": 3}]},
        {"id": "Q2", "question": "在哪里？", "answers": [{"text": "天安门广场", "answer_start": 5}]},
        {"id": "Q3", "question": "哪一年？", "answers": [{"text": "1998年", "answer_start": 14}]},
    ]
    doc = {"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def test_mrc_em_f1_with_cmrc_semantics(tmp_path: Path):
    gold = _cmrc(tmp_path / "dev.json")
    pred = tmp_path / "pred.json"
    # Q1 right up to punctuation (EM 1); Q2 a 3-char part of a 5-char answer (EM 0, F1 2*1*0.6/1.6 = 0.75);
    # Q3 unanswered (0, 0); ZZ is not a gold question.
    pred.write_text(json.dumps({"Q1": "北京。", "Q2": "天安门", "ZZ": "x"}, ensure_ascii=False), encoding="utf-8")
    d = _scores("--task", "mrc", "--gold", str(gold), "--pred", str(pred))
    assert d["em"] == pytest.approx(1 / 3) and d["f1"] == pytest.approx(1.75 / 3)
    assert d["average"] == pytest.approx((1 / 3 + 1.75 / 3) / 2) and d["main_score"] == d["average"]
    assert (d["total"], d["skipped"], d["extra_predictions"]) == (3, 1, 1)
    assert d["official"]["EM"] == "33.333" and d["official"]["F1"] == "58.333"


def test_mrc_prediction_ids_that_match_no_gold_question(tmp_path: Path):
    gold = _cmrc(tmp_path / "dev.json")
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"DEV_1": "北京"}), encoding="utf-8")
    assert "none of its 1 question ids" in _error("--task", "mrc", "--gold", str(gold), "--pred", str(pred))
    pred.write_text(json.dumps([["Q1", "北京"]]), encoding="utf-8")
    assert "expected a JSON object" in _error("--task", "mrc", "--gold", str(gold), "--pred", str(pred))


# --- output and errors ----------------------------------------------------------------------------


def test_tables_on_the_terminal_and_json_file(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", CWS_GOLD)
    pred = write(tmp_path / "pred.txt", CWS_PRED)
    out = tmp_path / "out" / "scores.json"
    r = runner.invoke(app, ["evaluate", "--task", "cws", "--gold", str(gold), "--pred", str(pred), "--json", str(out)],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "Segmentation (words)" in r.stdout and "30.77" in r.stdout and "wrote" in r.stdout  # F = 4/13
    d = json.loads(out.read_text(encoding="utf-8"))
    assert d["task"] == "cws" and d["main"] == "f1" and d["main_score"] == pytest.approx(4 / 13)
    assert d == score_files("cws", gold, pred).to_dict()


def test_labels_that_look_like_markup_are_printed_as_they_are(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", ["[pos]\t这个东西很好用", "[/neg]\t这个东西太差了", "[pos]\t推荐大家购买"])
    pred = write(tmp_path / "pred.txt", ["[pos]", "[UNK]", "[pos]"])
    r = runner.invoke(app, ["evaluate", "--task", "sa", "--gold", str(gold), "--pred", str(pred)],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "[/neg]" in r.stdout and "[UNK]" in r.stdout and "\\[" not in r.stdout


def test_mismatched_line_counts_one_line_error_exit_2(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", CWS_GOLD)
    pred = write(tmp_path / "pred.txt", [*CWS_PRED, "多 一 行"])
    r = _zen("evaluate", "--task", "cws", "--gold", str(gold), "--pred", str(pred))
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert str(pred) in lines[0] and str(gold) in lines[0] and "3 sentences" in lines[0] and "has 2" in lines[0]


def test_mismatched_label_count_names_both_files(tmp_path: Path):
    gold = write(tmp_path / "gold.tsv", DC_GOLD)
    pred = write(tmp_path / "pred.txt", ["体育", "体育"])
    msg = _error("--task", "dc", "--gold", str(gold), "--pred", str(pred))
    assert f"{pred} has 2 examples but {gold} has 4" in msg


def test_argument_errors(tmp_path: Path):
    gold = write(tmp_path / "gold.txt", CWS_GOLD)
    assert "missing --task" in _error("--gold", str(gold), "--pred", str(gold))
    assert "task 'xyz'" in _error("--task", "xyz", "--gold", str(gold), "--pred", str(gold))
    assert "unknown task 'nerr' (did you mean 'ner'?)" in _error("--task", "nerr", "--gold", str(gold), "--pred",
                                                                 str(gold))
    assert "cws only" in _error("--task", "ner", "--gold", str(gold), "--pred", str(gold), "--train-words", str(gold))
    assert "zen finetune" in _error("some-model", "--data", str(gold))
    assert "--data goes with MODEL" in _error("--task", "cws", "--data", str(gold))
    raw = write(tmp_path / "raw.txt", ["我们喜欢北京", "今天天气很好"])
    assert "no word boundaries" in _error("--task", "cws", "--gold", str(raw), "--pred", str(gold))


# --- PD98 end to end --------------------------------------------------------------------------------


needs_pd98 = needs_data(PD98 / "cws" / "dev.txt")


def _fmm(text: str, words: set[str], max_len: int) -> list[str]:
    """Forward maximum matching: at each position the longest training word (single chars always)."""
    out, i = [], 0
    while i < len(text):
        n = next(k for k in range(min(max_len, len(text) - i), 0, -1) if k == 1 or text[i:i + k] in words)
        out.append(text[i:i + n])
        i += n
    return out


@needs_pd98
def test_pd98_dev_against_itself_and_a_maximum_matching_baseline(tmp_path: Path):
    dev, train = PD98 / "cws" / "dev.txt", PD98 / "cws" / "train.txt"
    stats = json.loads((PD98 / "stats.json").read_text(encoding="utf-8"))["splits"]["dev"]
    d = _scores("--task", "cws", "--gold", str(dev), "--pred", str(dev), "--train-words", str(train))
    assert d["f1"] == 1.0 and d["gold"] == stats["words"] and d["sentences"] == stats["sentences"]
    assert round(d["oov_rate"], 4) == stats["oov_rate_vs_train"]
    words = {w for line in train.read_text(encoding="utf-8").splitlines() for w in line.split()}
    fmm = [" ".join(_fmm("".join(line.split()), words, 6)) for line in dev.read_text(encoding="utf-8").splitlines()]
    pred = write(tmp_path / "fmm.txt", fmm)
    d = _scores("--task", "cws", "--gold", str(dev), "--pred", str(pred))
    assert round(d["f1"], 4) == 0.9296  # what the metrics helper measured for this baseline
    assert (d["correct"], d["predicted"], d["gold"]) == (98761, 107878, 104595)


@needs_pd98
def test_pd98_ner_bio_prediction_against_bmes_gold(tmp_path: Path):
    d = _scores("--task", "ner", "--gold", str(PD98 / "ner" / "dev.tsv"), "--pred", str(PD98 / "ner-bio" / "dev.tsv"))
    stats = json.loads((PD98 / "stats.json").read_text(encoding="utf-8"))["splits"]["dev"]
    assert d["f1"] == 1.0 and {t: v["gold"] for t, v in d["per_type"].items()} == stats["entities"]
