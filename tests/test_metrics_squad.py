"""SQuAD v1.1 EM / F1 (`zencli.metrics.squad`, `score_mrc(metric="squad")`, `zen evaluate --metric squad`):
cases worked by hand from the official script's definitions (in the module docstring), Arabic included."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from zencli.cli.app import app
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import apply_overrides, from_dict
from zencli.errors import ZenError
from zencli.metrics.mrc import score_mrc
from zencli.metrics.squad import normalize_answer, squad_em, squad_f1
from zencli.tasks.base import task_class
from zencli.tasks.finetune import run_finetune


def test_normalisation_is_squads_exactly():
    assert normalize_answer("The Cat, the  hat!") == "cat hat"
    assert normalize_answer("theory of an apple") == "theory of apple"  # whole words only
    assert normalize_answer("A-B") == "ab"  # punctuation goes before the articles are looked for
    assert normalize_answer("  (1952)  ") == "1952"
    # Arabic: ASCII '.' goes, the Arabic comma stays; diacritics and tatweel are not touched.
    assert normalize_answer("القاهرةُ، مصـر.") == "القاهرةُ، مصـر"
    assert normalize_answer("THE") == "" and normalize_answer("") == ""


def test_f1_is_a_bag_of_tokens_overlap_and_em_an_exact_match():
    # Same tokens in another order: F1 1, EM 0 (CMRC 2018's longest common run would give 1/2).
    assert squad_f1(["القاهرة مصر"], "مصر القاهرة") == 1.0
    assert squad_em(["القاهرة مصر"], "مصر القاهرة") == 0
    # 2 of 3 predicted tokens, 2 of 3 gold ones: P = R = 2/3.
    assert squad_f1(["مدينة القاهرة الكبرى"], "في مدينة القاهرة") == pytest.approx(2 / 3)
    # Repeated tokens count as often as both sides hold them: x x y vs x y → overlap 2, P 2/3, R 1 → 0.8.
    assert squad_f1(["x y"], "x x y") == pytest.approx(0.8)
    # A diacritic makes another token: nothing in common.
    assert squad_f1(["محمد"], "مُحمد") == 0.0 and squad_em(["محمد"], "مُحمد") == 0
    # Normalised to the same string: EM 1 (articles, case, ASCII punctuation).
    assert squad_em(["the Nile"], "Nile.") == 1 and squad_f1(["the Nile"], "Nile.") == 1.0
    # An answer that normalises to nothing: EM 1 for an empty prediction, but F1 0 (no common token).
    assert squad_em(["The"], "") == 1 and squad_f1(["The"], "") == 0.0


def test_the_best_gold_answer_counts():
    answers = ["عام 1952", "1952"]
    # vs 'عام 1952': 1 common of 2 and 2 → 1/2; vs '1952': P 1/2, R 1 → 2/3.
    assert squad_f1(answers, "في 1952") == pytest.approx(2 / 3)
    assert squad_em(answers, "في 1952") == 0 and squad_em(answers, "1952.") == 1


def test_score_mrc_with_the_squad_metric_sums_like_the_official_script():
    gold = [("q1", ["القاهرة مصر"]), ("q2", ["عام 1952", "1952"]), ("q3", ["نهر النيل"]), (" q4", ["x"])]
    preds = {"q1": "مصر القاهرة", "q2": "1952.", "q3": "النيل", "q4": "x", "q9": "y"}
    r = score_mrc(gold, preds, metric="squad")
    # EM: q2; F1: 1 + 1 + 2/3 (P 1, R 1/2) + 0 (' q4' is not 'q4': the script does not strip ids).
    assert (r.em_sum, r.total, r.skipped, r.extra_predictions) == (1, 4, 1, 2)
    assert r.f1_sum == pytest.approx(2 + 2 / 3)
    d = r.to_dict()
    assert d["metric"] == "squad"
    assert d["official"] == {"exact_match": 25.0, "f1": pytest.approx(100 * (2 + 2 / 3) / 4)}
    assert r.tables()[0].title == "SQuAD v1.1"
    json.dumps(d)
    cmrc = score_mrc(gold, preds)  # CMRC 2018 strips ids and scores by longest common run
    assert cmrc.metric == "cmrc2018" and cmrc.skipped == 0 and cmrc.f1_sum != r.f1_sum
    with pytest.raises(ZenError, match="mrc metric 'bleu': expected one of cmrc2018, squad"):
        score_mrc(gold, preds, metric="bleu")


def _settings(*sets: str):
    return from_dict(FinetuneConfig, apply_overrides({}, list(sets)), source="t").task


def test_task_metric_is_a_choice_of_mrc_only():
    mrc = task_class("mrc")(_settings("task.name=mrc", "task.metric=squad"), {"max_answer_length": 8})
    assert mrc.settings.metric == "squad"
    with pytest.raises(ZenError, match="task.metric: 'bleu': task mrc scores with cmrc2018 or squad"):
        task_class("mrc")(_settings("task.name=mrc", "task.metric=bleu"), {"max_answer_length": 8})
    with pytest.raises(ZenError, match="task.metric: 'squad': task ner has one metric; remove task.metric"):
        task_class("ner")(_settings("task.name=ner", "task.metric=squad"), {"labels": ["O", "B-X"], "scheme": "BIO"})
    # zen finetune says so before it reads any data (the training file here does not exist).
    cfg = from_dict(FinetuneConfig, apply_overrides({}, ["task.name=mrc", "task.metric=f1", "data.train=nowhere.json"]),
                    source="t")
    with pytest.raises(ZenError, match="task.metric: 'f1': task mrc scores with cmrc2018 or squad"):
        run_finetune(cfg, show_progress=False)


def test_zen_evaluate_files_with_metric_squad(tmp_path):
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "ولد في القاهرة عام 1952.", "qas": [
        {"id": "a", "question": "أين؟", "answers": [{"text": "القاهرة", "answer_start": 7}]},
        {"id": "b", "question": "متى؟", "answers": [{"text": "عام 1952", "answer_start": 15},
                                                   {"text": "1952", "answer_start": 19}]}]}]}]}
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"a": "في القاهرة", "b": "1952"}, ensure_ascii=False), encoding="utf-8")
    runner = CliRunner()
    files = ["--gold", str(gold), "--pred", str(pred)]
    r = runner.invoke(app, ["evaluate", "--task", "mrc", *files, "--metric", "squad", "--json", "-"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    # a: P 1/2, R 1 → 2/3, EM 0; b: EM 1, F1 1.
    assert out["metric"] == "squad" and out["official"]["exact_match"] == 50.0
    assert out["official"]["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    bad = runner.invoke(app, ["evaluate", "--task", "mrc", *files, "--metric", "em"])
    assert isinstance(bad.exception, ZenError) and str(bad.exception) == "--metric em: expected cmrc2018 or squad"
    ner = runner.invoke(app, ["evaluate", "--task", "ner", *files, "--metric", "squad"])
    assert isinstance(ner.exception, ZenError)
    assert str(ner.exception) == "--metric squad: applies to task mrc only, not ner"
