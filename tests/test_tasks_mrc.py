"""Extractive MRC as a library: doc_stride windows and their start/end targets, questions without a
located answer (skipped in training, kept in evaluation), decoding across windows (a one-hot stub model
whose answer lies beyond the first window), character offsets, input lines and output formats, a
saved model, and a toy MRC task learned with answers beyond the first window."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import write
from tests.test_tasks_classification import filler, tiny_task, train_model
from zencli.data.readers import MrcExample
from zencli.data.windows import plan_windows, tokens_to_char_span, window_to_context
from zencli.errors import ZenError
from zencli.model.heads import SpanExtractionHead
from zencli.tasks.base import Encoded
from zencli.tasks.model_dir import load_task_model, save_task_model
from zencli.tasks.mrc import Answer
from zencli.tasks.predict import evaluate_model
from zencli.tasks.scoring import read_gold

QUESTION = "在哪"
ANSWER = "北京"


def mrc_record(qid: str, context: str, start: int | None, answer: str = ANSWER) -> str:
    obj = {"id": qid, "question": QUESTION, "context": context}
    if start is not None:
        obj["answers"] = [{"text": answer, "answer_start": start}]
    return json.dumps(obj, ensure_ascii=False)


def mrc_lines(n: int, seed: int, lengths: tuple[int, int] = (5, 60), after: int = 0) -> list[str]:
    """JSON lines: a filler context with the answer word at a random position >= `after`."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        context = filler(rng, rng.randint(max(lengths[0], after), lengths[1]))
        k = rng.randint(after, len(context))
        out.append(mrc_record(f"s{seed}-{i}", context[:k] + ANSWER + context[k:], k))
    return out


def train_file(tmp_path, n: int = 4):
    return write(tmp_path / "train.jsonl", mrc_lines(n, 0))


# --- state, windows, training targets ------------------------------------------------------------------

def test_the_answer_length_bound_is_learned_from_training_answers(tmp_path):
    lines = [mrc_record("a", "北京大学的学生", 0, "北京大学"), mrc_record("b", "在图书馆", 1, "图书馆")]
    task, *_ = tiny_task(tmp_path, "mrc", write(tmp_path / "t.jsonl", lines))
    assert task.state() == {"max_answer_length": 4} and task.main_metric == "average"
    with pytest.raises(ZenError, match="no answer could be located"):
        tiny_task(tmp_path, "mrc", write(tmp_path / "bad.jsonl", [mrc_record("a", "北京大学", 0, "中国")]))
    with pytest.raises(ZenError, match="state 'max_answer_length'"):
        type(task)(task.settings, {"max_answer_length": 0})


def test_windows_advance_by_doc_stride_and_only_the_window_holding_the_answer_points_at_it(tmp_path):
    task, _, inputs, _, _ = tiny_task(tmp_path, "mrc", train_file(tmp_path), "task.max_seq_len=24", "task.stride=6")
    context = filler(random.Random(5), 40)
    context = context[:31] + ANSWER + context[31:]  # tokens 31..32 of 42
    example = MrcExample("x", QUESTION, context, [(ANSWER, 31)], True, 1)
    doc = task.document(example, inputs)
    assert doc.windows == plan_windows(42, 19, 6)  # 24 − [CLS] 在哪 [SEP] … [SEP] = 19 context tokens
    records, notes = task.training_records([example], inputs)
    assert len(records) == len(doc.windows) \
        and "1 training questions with contexts longer than one window were read as 5 windows" in notes[0]
    hits = 0
    for w, rec in zip(doc.windows, records):
        s, e = int(rec["start_positions"]), int(rec["end_positions"])
        assert rec["input_ids"][1:3].tolist() == inputs.tokenizer.encode(QUESTION)
        if w[0] <= 31 and 32 < w[1]:
            hits += 1
            span = window_to_context(w, 2, s, e)
            assert context[slice(*tokens_to_char_span(doc.offsets, *span))] == ANSWER
        else:
            assert (s, e) == (0, 0)  # [CLS]: no answer in this window
    assert hits == 2 and not (doc.windows[0][0] <= 31 < doc.windows[0][1])  # beyond the first window


def test_questions_without_a_located_answer_are_skipped_in_training_and_kept_in_evaluation(tmp_path):
    lines = [*mrc_lines(3, 0), json.dumps({"id": "lost", "question": QUESTION, "context": "北京大学",
                                           "answers": [{"text": "中国", "answer_start": 0}]}, ensure_ascii=False)]
    data = write(tmp_path / "train.jsonl", lines)
    task, model, inputs, _, gold = tiny_task(tmp_path, "mrc", data)
    assert gold.info.unusable_examples == 1
    records, notes = task.training_records(gold.examples, inputs)
    assert any("1 training questions have no answer located in their context: not trained on" in n for n in notes)
    assert len(records) == sum(len(task.document(e, inputs).windows) for e in gold.examples[:3])
    evaluation = task.evaluate(gold, task.predict(model, inputs, gold.examples))
    assert evaluation.result.total == 4  # the unlocated question is still scored
    assert any("1 questions have no answer located" in n for n in evaluation.notes)


def test_a_question_too_long_for_the_window_is_an_error_naming_it(tmp_path):
    task, _, inputs, _, _ = tiny_task(tmp_path, "mrc", train_file(tmp_path))  # max_seq_len 16
    with pytest.raises(ZenError, match="question 'q9' \\(line 3\\): a question of 14 tokens leaves no room"):
        task.document(MrcExample("q9", "北" * 14, "京", [], False, 3), inputs)


# --- decoding across windows: a stub model that knows where the answer is -------------------------------------

class OneHotReader(nn.Module):
    """Hidden state = one-hot token id; the span head scores `start_id` as a start and `end_id` as an end."""

    def __init__(self, task, vocab_size: int, start_id: int, end_id: int):
        super().__init__()
        self.task = task
        self.vocab_size = vocab_size
        self.head = SpanExtractionHead(vocab_size)
        with torch.no_grad():
            self.head.qa_outputs.weight.zero_()
            self.head.qa_outputs.bias.zero_()
            self.head.qa_outputs.weight[0, start_id] = 5.0
            self.head.qa_outputs.weight[1, end_id] = 4.0  # unequal: no ties

    @property
    def device(self) -> torch.device:
        return self.head.qa_outputs.weight.device

    def encode(self, batch) -> Encoded:
        return Encoded(F.one_hot(batch["input_ids"], self.vocab_size).float(), None, batch["attention_mask"].bool())

    def outputs(self, batch):  # what a prediction engine answers (zencli.tasks.engine)
        return self.task.head_outputs(self.head, self.encode(batch), batch)


def test_the_best_span_over_all_windows_is_cut_from_the_context_by_offsets(tmp_path):
    task, _, inputs, _, _ = tiny_task(tmp_path, "mrc", train_file(tmp_path), "task.max_seq_len=24")
    vocab = inputs.vocab
    stub = OneHotReader(task, len(vocab), vocab.token_ids["北"], vocab.token_ids["京"])
    rng = random.Random(7)
    # Spaces and ASCII (no token for the spaces, [UNK] for the letters) before the answer, far beyond window 1.
    context = filler(rng, 30) + " ab  " + filler(rng, 10) + ANSWER + filler(rng, 5)
    start = context.index(ANSWER)
    examples = [MrcExample("far", QUESTION, context, [], False, 1), MrcExample("", "", "", [], False, 2),
                MrcExample("near", QUESTION, ANSWER + filler(rng, 3), [], False, 3)]
    assert len(task.document(examples[0], inputs).windows) > 3
    far, blank, near = task.predict(stub, inputs, examples, batch_size=2)
    assert (far.text, far.start, far.end) == (ANSWER, start, start + 2)
    assert blank == Answer(None, None, None)
    assert (near.text, near.start, near.end) == (ANSWER, 0, 2)
    # An end too far from its start (the bound is the longest training answer: 2) is never chosen.
    spread = MrcExample("spread", QUESTION, "北" + filler(rng, 6) + "京", [], False, 4)
    (answer,) = task.predict(stub, inputs, [spread])
    assert answer.start == 0 and len(answer.text) <= 2


# --- input lines and output ---------------------------------------------------------------------------------

def test_input_lines_and_output_formats(tmp_path):
    task, *_ = tiny_task(tmp_path, "mrc", train_file(tmp_path))
    x = task.parse_input('{"question": "在哪", "context": "他在北京"}', "in.jsonl", 3)
    assert (x.qid, x.question, x.context) == ("3", "在哪", "他在北京")  # id: the line number by default
    assert task.parse_input('{"id": 7, "question": "q", "context": "c"}', "in.jsonl", 1).qid == "7"
    answer = Answer("北\t京", 2, 5)
    assert json.loads(task.format_prediction(x, answer, "json")) == {"id": "3", "answer": "北\t京", "start": 2,
                                                                     "end": 5}
    assert task.format_prediction(x, answer, "text") == "北 京\t2\t5"  # one line per input line
    blank = task.parse_input("   ", "in.jsonl", 4)
    assert task.format_prediction(blank, Answer(None, None, None), "text") == ""
    assert json.loads(task.format_prediction(blank, Answer(None, None, None), "json"))["answer"] is None
    for line, message in (('{"context": "c"}', "in.jsonl:5: no question"), ("not json", "in.jsonl:5: invalid JSON"),
                          ('{"question": "q", "context": " "}', "in.jsonl:5: empty 'context'")):
        with pytest.raises(ZenError, match=re.escape(message)):
            task.parse_input(line, "in.jsonl", 5)


# --- learning -------------------------------------------------------------------------------------------------

def test_a_tiny_reader_learns_answers_that_lie_beyond_the_first_window(tmp_path):
    train = write(tmp_path / "train.jsonl", mrc_lines(300, 0))
    dev = write(tmp_path / "dev.jsonl", mrc_lines(40, 1, lengths=(40, 60), after=25))  # all beyond window 1
    result, model_dir = train_model(tmp_path, "mrc", train, dev, 300, "task.max_seq_len=24", "train.batch_size=16",
                                    "train.eval_every=150")
    gold = read_gold(dev, "mrc")
    loaded = load_task_model(model_dir)
    for e in gold.examples:
        assert len(loaded.task.document(e, loaded.inputs).windows) >= 3
    assert result.dev.main_score >= 0.9 and result.dev.to_dict()["em"] >= 0.9
    predictions = loaded.task.predict(loaded.model, loaded.inputs, gold.examples)
    for e, p in zip(gold.examples, predictions):
        assert e.context[p.start:p.end] == p.text
    assert evaluate_model(loaded, dev).main_score == pytest.approx(result.dev.main_score)
    copy = load_task_model(save_task_model(loaded.model, loaded.inputs, loaded.spec, tmp_path / "copy"))
    again = copy.task.predict(copy.model, copy.inputs, gold.examples[:5])
    assert [(a.text, a.start) for a in again] == [(p.text, p.start) for p in predictions[:5]]
    assert np.allclose([a.score for a in again], [p.score for p in predictions[:5]], atol=1e-5)
