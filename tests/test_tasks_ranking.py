"""Answer selection (qa) as a library: the score is P(positive) averaged over a pair's windows, the
fixed 0/1 state, input lines and exact score output, a saved model, and a toy ranking task learned."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from tests.conftest import write
from tests.test_tasks_classification import (
    filler,
    tiny_task,
    train_model,
    window_probabilities,
)
from zencli.data.readers import QaExample
from zencli.data.windows import plan_windows
from zencli.errors import ZenError
from zencli.tasks.model_dir import load_task_model, save_task_model
from zencli.tasks.scoring import read_gold, score_predictions

ANSWER = "北京"


def qa_lines(questions: int, seed: int, candidates: int = 4, lengths: tuple[int, int] = (3, 12)) -> list[str]:
    """qid<TAB>question<TAB>candidate<TAB>label: one candidate per question holds the answer word."""
    rng = random.Random(seed)
    out = []
    for q in range(questions):
        right = rng.randrange(candidates)
        for c in range(candidates):
            text = filler(rng, rng.randint(*lengths))
            if c == right:
                k = rng.randint(0, len(text))
                text = text[:k] + ANSWER + text[k:]
            out.append(f"q{seed}-{q}\t在哪\t{text}\t{int(c == right)}")
    return out


def test_the_score_is_the_positive_probability_averaged_over_windows(tmp_path):
    train = write(tmp_path / "train.tsv", qa_lines(5, 0))
    task, model, inputs, _, _ = tiny_task(tmp_path, "qa", train)  # 13 tokens for question + candidate
    assert task.state() == {"labels": ["0", "1"]} and task.main_metric == "mrr"
    candidate = filler(random.Random(3), 40)
    q_ids, c_ids = inputs.tokenizer.encode("在哪"), inputs.tokenizer.encode(candidate)
    windows = plan_windows(40, 11, 5)  # the question stays whole, the candidate gets the other 11 tokens
    single = window_probabilities(model, inputs, inputs.encode([np.asarray(q_ids)] * len(windows),
                                                               [np.asarray(c_ids[a:b]) for a, b in windows]))
    short = QaExample("", "在哪", "北京", None, 2)
    scores = task.predict(model, inputs, [QaExample("", "在哪", candidate, None, 1), short])
    assert scores[0] == pytest.approx(float(single[:, 1].mean()), abs=1e-6)
    assert 0.0 < scores[1] < 1.0
    records, notes = task.training_records([QaExample("q", "在哪", candidate, "1", 1)], inputs)
    assert len(records) == 4 and all(int(r["labels"]) == 1 for r in records)  # 40 tokens in windows of 11
    assert "1 training pairs longer than 13 tokens were read as 4 windows" in notes[0]


def test_training_needs_a_positive_candidate_and_the_state_is_checked(tmp_path):
    train = write(tmp_path / "train.tsv", ["q1\t在哪\t北京\t0", "q1\t在哪\t中国\t0"])
    with pytest.raises(ZenError, match="train.tsv: no candidate is labelled 1"):
        tiny_task(tmp_path, "qa", train)
    task, *_ = tiny_task(tmp_path, "qa", write(tmp_path / "ok.tsv", qa_lines(2, 0)))
    with pytest.raises(ZenError, match="state 'labels'"):
        type(task)(task.settings, {"labels": ["no", "yes"]})


def test_input_lines_and_exact_score_output(tmp_path):
    task, model, inputs, _, _ = tiny_task(tmp_path, "qa", write(tmp_path / "train.tsv", qa_lines(3, 0)))
    examples = [task.parse_input(t, "in.txt", i) for i, t in enumerate(["在哪\t北京大学", "", "在哪\t中国"], 1)]
    scores = task.predict(model, inputs, examples)
    assert scores[1] is None
    text = [task.format_prediction(x, s, "text") for x, s in zip(examples, scores)]
    assert text[1] == "" and float(text[0]) == scores[0] and float(text[2]) == scores[2]  # exact round trip
    d = json.loads(task.format_prediction(examples[0], scores[0], "json"))
    assert d == {"question": "在哪", "answer": "北京大学", "score": scores[0]}
    assert json.loads(task.format_prediction(examples[1], None, "json"))["score"] is None
    for line, message in (("在哪", "in.txt:4: expected question<TAB>candidate (2 TAB-separated fields), got 1"),
                          ("q1\t在哪\t北京", "got 3"), ("\t北京", "in.txt:4: empty question")):
        with pytest.raises(ZenError, match=re.escape(message)):
            task.parse_input(line, "in.txt", 4)


def test_scores_rank_candidates_per_question(tmp_path):
    dev = write(tmp_path / "dev.tsv", ["a\t问\t甲\t0", "a\t问\t乙\t1", "b\t问\t丙\t1", "b\t问\t丁\t0"])
    gold = read_gold(dev, "qa")
    task, *_ = tiny_task(tmp_path, "qa", write(tmp_path / "train.tsv", qa_lines(2, 0)))
    evaluation = task.evaluate(gold, [0.7, 0.6, 0.9, 0.2])  # question a: the positive ranks 2nd
    assert evaluation.result.mrr == pytest.approx(0.75) and evaluation.result.positive.f1 == pytest.approx(0.8)
    same = score_predictions(gold, [0.7, 0.6, 0.9, 0.2])
    assert same.to_dict()["mrr"] == evaluation.to_dict()["mrr"]


def test_a_ranking_model_learns_and_predicts_the_same_after_loading(tmp_path):
    train = write(tmp_path / "train.tsv", qa_lines(100, 0))
    dev = write(tmp_path / "dev.tsv", qa_lines(30, 1))
    result, model_dir = train_model(tmp_path, "qa", train, dev, 250, "task.max_seq_len=24", "train.batch_size=16",
                                    "train.eval_every=125", encoder="bert")
    assert result.dev.main_score >= 0.95  # MRR; chance is about 0.52 with 4 candidates
    loaded = load_task_model(model_dir)
    gold = read_gold(dev, "qa")
    scores = loaded.task.predict(loaded.model, loaded.inputs, gold.examples)
    assert loaded.task.evaluate(gold, scores).main_score == pytest.approx(result.dev.main_score)
    again = save_task_model(loaded.model, loaded.inputs, loaded.spec, tmp_path / "copy")
    reloaded = load_task_model(again)
    assert reloaded.task.predict(reloaded.model, reloaded.inputs, gold.examples[:8]) == pytest.approx(scores[:8])
