"""Sentence-level classification tasks (dc, sa, spm, nli) as a library: windows that never truncate
(single texts and pairs), window-labelled training records, mean-of-windows prediction, unseen labels,
input lines and output formats, saved models, a learnable toy task, CHTE refused. Also the made-up data
and helpers the ranking / MRC / evaluate-model tests share. A real-data run on the sentiment reviews is
behind ZEN_SLOW=1."""

from __future__ import annotations

import io
import itertools
import json
import random
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from tests.conftest import DATA, REF, needs_data, write
from tests.test_tasks_tagging import NGRAM, TINY, VOCAB, settings_dict
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import from_dict
from zencli.data.collate import collate
from zencli.data.readers import PairExample, TextExample
from zencli.data.windows import plan_windows
from zencli.errors import ZenError
from zencli.tasks.base import task_class, task_names
from zencli.tasks.classification import (
    Classified,
    even_windows,
    pair_budget,
    side_windows,
)
from zencli.tasks.finetune import run_finetune
from zencli.tasks.model_dir import load_task_model, save_task_model
from zencli.tasks.network_build import build_task_model
from zencli.tasks.scoring import read_gold
from zencli.train.checkpoint import seed_everything

_VOCAB_CHARS = [t for t in VOCAB.read_text(encoding="utf-8").split("\n")[5:] if t] if REF.is_dir() else []
KEYWORD = "很"
FILLER = [c for c in _VOCAB_CHARS if c not in "很北京"]  # one vocabulary token each


def filler(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(FILLER) for _ in range(n))


def keyword_lines(n: int, seed: int, lengths: tuple[int, int] = (4, 20)) -> list[str]:
    """label<TAB>text: 1 iff the text holds the keyword (a task a tiny model can learn)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = filler(rng, rng.randint(*lengths))
        positive = rng.random() < 0.5
        if positive:
            k = rng.randint(0, len(text))
            text = text[:k] + KEYWORD + text[k:]
        out.append(f"{int(positive)}\t{text}")
    return out


def pair_lines(n: int, seed: int) -> list[str]:
    """a<TAB>b<TAB>label: 1 iff both texts hold the keyword or neither does."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = keyword_lines(2, rng.randrange(1 << 30))
        out.append(f"{a.split(chr(9))[1]}\t{b.split(chr(9))[1]}\t{int(a[0] == b[0])}")
    return out


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def config(tmp: Path, task: str, train: Path, *extra: str, dev: Path | None = None, encoder: str = "zen2",
           out: str = "run") -> FinetuneConfig:
    sets = [*TINY, f"task.name={task}", f"data.train={train}", f"train.output_dir={tmp / out}",
            f"model.encoder={encoder}"]
    if encoder != "chte":
        sets.append(f"model.vocab={VOCAB}")
    if encoder in ("zen2", "zen1"):
        sets.append(f"model.ngram={NGRAM}")
    if dev is not None:
        sets.append(f"data.dev={dev}")
    return from_dict(FinetuneConfig, settings_dict([*sets, *extra]), source="test")


def tiny_task(tmp: Path, task: str, train: Path, *extra: str, encoder: str = "zen2", seed: int = 0):
    """An untrained tiny model for `task` on the file `train`: (task, model in eval mode, inputs, spec, gold)."""
    cfg = config(tmp, task, train, *extra, encoder=encoder)
    cls = task_class(task)
    gold = cls.read(train)
    t = cls.from_training_data(cfg.task, gold)
    seed_everything(seed)
    model, inputs, spec = build_task_model(cfg, t)
    return t, model.eval(), inputs, spec, gold


def train_model(tmp: Path, task: str, train: Path, dev: Path | None, steps: int, *extra: str,
                encoder: str = "zen2", out: str = "run"):
    """`run_finetune` on the tiny settings: (result, model directory)."""
    cfg = config(tmp, task, train, f"train.max_steps={steps}", *extra, dev=dev, encoder=encoder, out=out)
    result = run_finetune(cfg, console=quiet(), show_progress=False)
    return result, result.model_dir


def window_probabilities(model, inputs, records) -> np.ndarray:
    """Softmax of each record on its own: [n, C]."""
    with torch.no_grad():
        return np.stack([model.head(model.encode(collate([r], pad_id=inputs.pad_id)).pooled).logits[0]
                         .float().softmax(-1).numpy() for r in records])


# --- registry ---------------------------------------------------------------------------------------------

def test_registry_knows_every_sentence_level_task():
    assert {"cws", "pos", "ner", "dc", "sa", "spm", "nli", "qa", "mrc"} <= set(task_names())
    assert task_class("sa").output_formats == ("text", "json", "label")
    assert task_class("spm").pair and not task_class("dc").pair
    assert not any(task_class(t).supports_chte for t in ("dc", "sa", "spm", "nli", "qa", "mrc"))


# --- windows ----------------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 400), size=st.integers(1, 50))
def test_training_windows_cover_every_token_once_in_near_equal_parts(n, size):
    windows = even_windows(n, size)
    assert windows[0][0] == 0 and windows[-1][1] == n
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(windows))  # contiguous, no overlap
    lengths = [b - a for a, b in windows]
    assert max(lengths) <= size and max(lengths) - min(lengths) <= 1
    assert len(windows) == max(1, -(-n // size))


@settings(max_examples=300, deadline=None)
@given(la=st.integers(0, 200), lb=st.integers(0, 200), room=st.integers(2, 60), stride=st.one_of(st.none(),
                                                                                             st.integers(1, 60)))
def test_pair_windows_never_truncate_and_keep_a_short_side_whole(la, lb, room, stride):
    size_a, size_b = pair_budget(la, lb, room)
    assert size_a + size_b <= room
    wa, wb = side_windows(la, size_a, stride), side_windows(lb, size_b, stride)
    for windows, n in ((wa, la), (wb, lb)):
        covered = np.zeros(n, bool)
        for a, b in windows:
            covered[a:b] = True
        assert covered.all()  # every token of both texts is in some input
    if la + lb <= room:
        assert (size_a, size_b) == (la, lb)
    elif min(la, lb) <= room // 2:
        assert (size_a == la) if la <= lb else (size_b == lb)  # the shorter side is never cut


def test_long_texts_train_as_labelled_windows_and_predict_as_the_mean_of_them(tmp_path):
    train = write(tmp_path / "train.tsv", keyword_lines(20, 0))
    task, model, inputs, _, _ = tiny_task(tmp_path, "sa", train)  # max_seq_len 16: 14 tokens a window
    text = filler(random.Random(1), 40)
    records, notes = task.training_records([TextExample(text, "1", 1)], inputs)
    assert [len(r["input_ids"]) - 2 for r in records] == [13, 13, 14]  # ceil(40 / 14) near-equal windows
    ids = inputs.tokenizer.encode(text)
    assert np.concatenate([r["input_ids"][1:-1] for r in records]).tolist() == ids  # nothing lost, no overlap
    assert all(int(r["labels"]) == task.labels.index["1"] for r in records)
    assert "1 training texts longer than 14 tokens were read as 3 windows" in notes[0]

    # Prediction: windows of 14 every 7 tokens; the probabilities are their mean.
    windows = plan_windows(40, 14, 7)
    assert len(windows) == 5
    single = window_probabilities(model, inputs, inputs.encode([np.asarray(ids[a:b]) for a, b in windows]))
    (pred,) = task.predict(model, inputs, [TextExample(text, None, 1)], batch_size=2)
    np.testing.assert_allclose(pred.probabilities, single.mean(0), atol=1e-5)
    assert pred.label == task.labels.labels[int(single.mean(0).argmax())]
    assert pred.probability == pytest.approx(float(single.mean(0).max()), abs=1e-5)


def test_long_pairs_keep_the_short_side_whole_and_window_the_long_one(tmp_path):
    train = write(tmp_path / "train.tsv", pair_lines(10, 0))
    task, model, inputs, _, _ = tiny_task(tmp_path, "spm", train)  # 13 tokens for A + B
    rng = random.Random(2)
    a, b = filler(rng, 4), filler(rng, 30)
    records, _ = task.training_records([PairExample(a, b, "1", 1)], inputs)
    a_ids, b_ids = inputs.tokenizer.encode(a), inputs.tokenizer.encode(b)
    assert len(records) == 4  # B: 30 tokens in windows of 9 → 4 near-equal windows
    pieces = []
    for r in records:
        types = r["token_type_ids"]
        assert r["input_ids"][1:5].tolist() == a_ids and types[:6].tolist() == [0] * 6  # [CLS] A [SEP]
        pieces += r["input_ids"][6:-1].tolist()
        assert (types[6:] == 1).all() and len(r["input_ids"]) <= 16
    assert pieces == b_ids
    # Prediction: overlapping windows of B (every 4 tokens), the pair's probabilities their mean.
    windows = plan_windows(30, 9, 4)
    single = window_probabilities(model, inputs, inputs.encode([np.asarray(a_ids)] * len(windows),
                                                               [np.asarray(b_ids[s:e]) for s, e in windows]))
    (pred,) = task.predict(model, inputs, [PairExample(a, b, None, 1)])
    np.testing.assert_allclose(pred.probabilities, single.mean(0), atol=1e-5)


def test_a_too_small_window_for_a_pair_is_a_clear_error(tmp_path):
    train = write(tmp_path / "train.tsv", pair_lines(4, 0))
    task, _, inputs, _, _ = tiny_task(tmp_path, "nli", train, "task.max_seq_len=4")
    with pytest.raises(ZenError, match="task.max_seq_len: task nli needs at least 5 tokens"):
        task.training_records([PairExample("北", "京", "1", 1)], inputs)


# --- labels and evaluation ------------------------------------------------------------------------------------

def test_labels_come_from_training_and_an_unseen_gold_label_is_an_error_not_a_crash(tmp_path):
    train = write(tmp_path / "train.tsv", ["体育\t北京大学", "财经\t人民银行", "体育\t中国"])
    task, *_ = tiny_task(tmp_path, "dc", train)
    assert task.labels.labels == ["体育", "财经"] and task.state() == {"labels": ["体育", "财经"]}
    dev = write(tmp_path / "dev.tsv", ["体育\t北京", "娱乐\t新政策", "娱乐\t发布", "财经\t银行"])
    gold = read_gold(dev, "dc")
    assert task.unseen_labels(gold) == {"娱乐": 2}
    predictions = [Classified(lab, 0.9, None) for lab in ("体育", "体育", "财经", "财经")]
    evaluation = task.evaluate(gold, predictions)
    assert evaluation.result.correct == 2 and evaluation.result.total == 4
    assert evaluation.result.per_class["娱乐"].gold == 2 and evaluation.result.per_class["娱乐"].correct == 0
    assert any("2 gold labels (1 distinct: 娱乐) are not in the model's label set" in n for n in evaluation.notes)
    with pytest.raises(ZenError, match="at least two labels"):
        tiny_task(tmp_path, "dc", write(tmp_path / "one.tsv", ["体育\t北京", "体育\t中国"]))
    with pytest.raises(ZenError, match="state 'labels'"):
        type(task)(task.settings, {"labels": ["only"]})


def test_nli_labels_are_read_through_their_aliases(tmp_path):
    train = write(tmp_path / "train.tsv", ["北京\t中国\tentailment", "他\t她\tcontradictory", "我\t你\tneutral"])
    task, *_ = tiny_task(tmp_path, "nli", train)
    assert task.labels.labels == ["contradiction", "entailment", "neutral"]


# --- prediction input and output ------------------------------------------------------------------------------

def test_prediction_lines_empty_lines_and_output_formats(tmp_path):
    train = write(tmp_path / "train.tsv", pair_lines(10, 0))
    task, model, inputs, _, _ = tiny_task(tmp_path, "spm", train)
    texts = ["北京\t中国", "", "  ", "中国\t" + "北" * 50]
    examples = [task.parse_input(t, "in.txt", i) for i, t in enumerate(texts, 1)]
    predictions = task.predict(model, inputs, examples, batch_size=3)
    assert [p.label is None for p in predictions] == [False, True, True, False]
    p = predictions[0]
    assert p.label in task.labels and np.isclose(p.probabilities.sum(), 1.0, atol=1e-5)
    assert task.format_prediction(examples[0], p, "text") == f"{p.label}\t{p.probability:.4f}"
    assert task.format_prediction(examples[0], p, "label") == p.label
    d = json.loads(task.format_prediction(examples[0], p, "json"))
    assert d["a"] == "北京" and d["b"] == "中国" and d["label"] == p.label and set(d["probabilities"]) == {"0", "1"}
    assert [task.format_prediction(examples[1], predictions[1], f) for f in ("text", "label")] == ["", ""]
    assert json.loads(task.format_prediction(examples[1], predictions[1], "json"))["label"] is None
    for line, message in (("只有一个字段", "in.txt:7: expected text_a<TAB>text_b (2 TAB-separated fields), got 1"),
                          ("a\tb\tc", "got 3"), ("北京\t ", "in.txt:7: empty text_b")):
        with pytest.raises(ZenError, match=re.escape(message)):
            task.parse_input(line, "in.txt", 7)
    assert task.check_format(None) == "text"
    with pytest.raises(ZenError, match="spm writes text, json, label"):
        task.check_format("conll")


# --- model directories, learning, CHTE -----------------------------------------------------------------------

@pytest.mark.parametrize("encoder", ["zen2", "zen1", "bert"])
def test_a_saved_model_predicts_the_same_after_loading(tmp_path, encoder):
    train = write(tmp_path / "train.tsv", pair_lines(10, 0))
    task, model, inputs, spec, _ = tiny_task(tmp_path, "spm", train, encoder=encoder)
    examples = [PairExample("北京大学", "中国" * 20, None, 1), PairExample("他", "她", None, 2)]
    before = task.predict(model, inputs, examples)
    out = save_task_model(model, inputs, spec, tmp_path / "model")
    loaded = load_task_model(out)
    assert loaded.task.name == "spm" and loaded.task.labels.labels == ["0", "1"]
    after = loaded.task.predict(loaded.model, loaded.inputs, examples)
    for x, y in zip(before, after):
        assert x.label == y.label
        np.testing.assert_allclose(x.probabilities, y.probabilities, atol=1e-6)


@pytest.mark.parametrize("encoder", ["zen2", "bert"])
def test_a_keyword_classifier_is_learned_in_a_few_hundred_steps(tmp_path, encoder):
    train = write(tmp_path / "train.tsv", keyword_lines(300, 0))
    dev = write(tmp_path / "dev.tsv", keyword_lines(100, 1))
    result, model_dir = train_model(tmp_path, "sa", train, dev, 300, "task.max_seq_len=32", "train.batch_size=16",
                                    "train.eval_every=100", encoder=encoder)
    assert result.dev.main_score >= 0.95  # chance is about 0.5
    saved = json.loads((model_dir / "dev_scores.json").read_text(encoding="utf-8"))
    assert saved["main_score"] == pytest.approx(result.dev.main_score) and saved["unseen_gold_label_count"] == 0


def test_chte_is_refused_for_sentence_tasks_with_a_one_line_error(tmp_path):
    train = write(tmp_path / "train.tsv", keyword_lines(10, 0))
    cfg = config(tmp_path, "sa", train, encoder="chte")
    with pytest.raises(ZenError, match="model.encoder: chte encodes characters for tagging tasks .* task sa needs "
                                       "zen2, zen1 or bert"):
        run_finetune(cfg, console=quiet(), show_progress=False)


# --- recipes ----------------------------------------------------------------------------------------------

def test_sentence_level_recipes_load_and_name_registered_tasks():
    from zencli.config import load_job_recipe

    expected = {"finetune-sentiment-sa": "sa", "finetune-thucnews-dc": "dc", "finetune-chnsenticorp-sa": "sa",
                "finetune-lcqmc-spm": "spm", "finetune-bq-spm": "spm", "finetune-xnli-nli": "nli",
                "finetune-cmrc2018-mrc": "mrc", "finetune-nlpcc-dbqa-qa": "qa"}
    for name, task in expected.items():
        cfg = load_job_recipe(name, expected_job="finetune")
        assert cfg.task.name == task and task in task_names()
        assert cfg.model.encoder != "chte"
        if name != "finetune-sentiment-sa":  # the paper benchmarks fine-tune a pretrained model
            assert cfg.model.pretrained is not None and cfg.data.dev is not None
    cmrc = load_job_recipe("finetune-cmrc2018-mrc", expected_job="finetune")
    assert cmrc.task.stride == 128 and cmrc.task.max_seq_len == 512


# --- real data (slow; ZEN_SLOW=1) -----------------------------------------------------------------------------

@pytest.mark.slow
@needs_data(DATA / "sentiment")
def test_sentiment_recipe_from_scratch_learns(tmp_path):
    """The tiny sentiment recipe (zen2 from scratch) for one epoch on CPU: well above chance on dev and test."""
    from zencli.config import load_job_recipe
    from zencli.config.schema import LexiconConfig
    from zencli.lexicon import extract
    from zencli.text.vocab import write_sidecar
    from zencli.text.vocab_build import build_vocab

    data = DATA / "sentiment"
    text = write(tmp_path / "train.txt", [line.split("\t", 1)[1] for line in
                                          (data / "train.tsv").read_text(encoding="utf-8").splitlines()])
    built = build_vocab([text], language="zh")
    built.vocab.save(tmp_path / "vocab.txt")
    write_sidecar(tmp_path / "vocab.txt", built.info)
    extract.build(LexiconConfig(corpus=[text], output=tmp_path / "ngram.txt", language="zh"))
    cfg = load_job_recipe("finetune-sentiment-sa", expected_job="finetune")
    cfg.data.train, cfg.data.dev, cfg.data.test = data / "train.tsv", data / "dev.tsv", data / "test.tsv"
    cfg.model.vocab, cfg.model.ngram = tmp_path / "vocab.txt", tmp_path / "ngram.txt"
    cfg.train.output_dir, cfg.train.num_threads, cfg.epochs = tmp_path / "run", 1, 1.0
    t0 = time.perf_counter()
    result = run_finetune(cfg, console=quiet(), show_progress=False)
    print(f"sentiment dev accuracy {result.dev.main_score:.4f}, test {result.test.main_score:.4f}, "
          f"{result.step} steps in {time.perf_counter() - t0:.0f} s")
    assert result.dev.main_score > 0.8 and result.test.main_score > 0.8
