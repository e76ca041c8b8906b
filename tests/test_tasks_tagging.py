"""Tagging tasks (cws, pos, ner) as a library: registry, training windows, window merging, well-formed
decoding, unseen labels, output formats, model directories. Also the small made-up data and tiny model
settings the finetune/predict CLI tests share."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REF, write
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import from_dict
from zencli.data.readers import TaggedSentence
from zencli.data.windows import best_windows, plan_windows
from zencli.errors import ZenError
from zencli.tasks.base import task_class, task_names
from zencli.tasks.inputs import BigramTable
from zencli.tasks.model_dir import load_task_model, save_task_model
from zencli.tasks.network_build import build_task_model
from zencli.tasks.scoring import read_gold
from zencli.text.labels import is_well_formed, segment_labels
from zencli.train.checkpoint import seed_everything

VOCAB, NGRAM = REF / "vocab.txt", REF / "ngram.txt"
# Tests that build a model read its vocabulary and lexicon from the fixture: skipped in a checkout without it.

# Made-up sentences over the fixture vocabulary: (word, POS tag, entity type or None).
SENTENCES = [
    [("北京大学", "nt", "ORG"), ("的", "u", None), ("学生", "n", None), ("在", "p", None), ("图书馆", "n", "LOC"),
     ("学习", "v", None)],
    [("中国人民银行", "nt", "ORG"), ("发布", "v", None), ("新", "a", None), ("政策", "n", None)],
    [("我们", "r", None), ("在", "p", None), ("北京", "ns", "LOC"), ("学习", "v", None)],
    [("他", "r", "PER"), ("是", "v", None), ("中国", "ns", "LOC"), ("人", "n", None)],
    [("她", "r", "PER"), ("和", "c", None), ("我", "r", "PER"), ("都", "d", None), ("在", "p", None),
     ("北京大学", "nt", "ORG")],
    [("你", "r", "PER"), ("在", "p", None), ("图书馆", "n", "LOC"), ("学习", "v", None), ("新", "a", None),
     ("政策", "n", None)],
]
LONG = "北京大学的学生在图书馆学习新政策" * 5  # 80 chars: several windows at max_seq_len 16

# A tiny from-scratch ZEN 2.0 (--set arguments) that trains in well under a second per step.
TINY = ["model.hidden_size=16", "model.num_hidden_layers=1", "model.num_attention_heads=2",
        "model.intermediate_size=32", "model.num_hidden_word_layers=1", "task.max_seq_len=16",
        "task.eval_batch_size=8", "train.dtype=fp32", "train.device=cpu", "train.tensorboard=false",
        "train.log_every=100", "train.num_threads=1", "train.batch_size=4", "train.lr=3e-3",
        "train.save_every=0"]
TINY_CHTE = ["model.chte.n_heads=4", "model.chte.n_linear_heads=2", "model.chte.cnn_windows=[2,3]",
             "model.chte.head_dim=4", "model.chte.ffn_size=16", "model.chte.char_dim=8", "model.chte.bigram_dim=8",
             "model.chte.min_count=1"]


def cws_lines(sentences=SENTENCES) -> list[str]:
    return [" ".join(w for w, _, _ in s) for s in sentences]


def pos_lines(sentences=SENTENCES) -> list[str]:
    return [" ".join(f"{w}/{t}" for w, t, _ in s) for s in sentences]


def ner_conll(sentences=SENTENCES) -> list[str]:
    out = []
    for s in sentences:
        for w, _, ent in s:
            labels = ["O"] * len(w) if ent is None else segment_labels(len(w), ent)
            out += [f"{c}\t{lab}" for c, lab in zip(w, labels)]
        out.append("")
    return out


def write_task_data(tmp: Path, task: str, sentences=SENTENCES) -> Path:
    if task == "cws":
        return write(tmp / "cws.txt", cws_lines(sentences))
    if task == "pos":
        return write(tmp / "pos.txt", pos_lines(sentences))
    return write(tmp / "ner.tsv", ner_conll(sentences))


def settings_dict(sets: list[str]) -> dict:
    from zencli.config.loading import apply_overrides

    return apply_overrides({}, sets)


def tiny_config(tmp: Path, task: str, *extra: str, encoder: str = "zen2") -> FinetuneConfig:
    sets = [*TINY, f"task.name={task}", f"data.train={write_task_data(tmp, task)}", f"train.output_dir={tmp / 'run'}"]
    if encoder == "chte":
        sets += ["model.encoder=chte", *TINY_CHTE]
    else:
        sets += [f"model.encoder={encoder}", f"model.vocab={VOCAB}"]
        if encoder != "bert":
            sets.append(f"model.ngram={NGRAM}")
    return from_dict(FinetuneConfig, settings_dict([*sets, *extra]), source="test")


def tiny_model(tmp: Path, task: str, *extra: str, encoder: str = "zen2", decoder: str = "softmax", seed: int = 0):
    cfg = tiny_config(tmp, task, f"task.decoder={decoder}", *extra, encoder=encoder)
    cls = task_class(task)
    gold = cls.read(cfg.data.train)
    t = cls.from_training_data(cfg.task, gold)
    seed_everything(seed)
    model, inputs, spec = build_task_model(cfg, t, gold.examples)
    return t, model.eval(), inputs, spec, gold


def test_a_lexicon_with_tokens_the_vocabulary_lacks_is_noted_at_model_build(tmp_path):
    """Such n-grams never match: the model trained without those words, and nothing said so."""
    from zencli.lexicon.ngram_file import Lexicon

    vocab = VOCAB.read_text(encoding="utf-8").splitlines()
    assert "北" in vocab and "京" in vocab and "龘" not in vocab and "䶮" not in vocab
    ngram = tmp_path / "ngram.txt"
    Lexicon([("北", "京"), ("北", "龘"), ("龘", "䶮", "京"), ("䶮", "京")], [9, 5, 3, 2]).save(ngram)
    *_, spec, _ = tiny_model(tmp_path, "cws", f"model.ngram={ngram}")
    assert [n for n in spec.notes if "can never match" in n] == [
        (f"{ngram}: 3 of 4 n-grams use tokens missing from {VOCAB} (2 distinct, most often '龘', '䶮') and can never "
         f"match, e.g. '北 龘', '龘 䶮 京', '䶮 京': build the vocabulary and the lexicon from the same text (or the "
         f"lexicon with zen lexicon build --vocab)")]
    *_, spec, _ = tiny_model(tmp_path, "cws")  # the fixture's lexicon fits its vocabulary: no note
    assert not any("can never match" in n for n in spec.notes)


# --- registry -------------------------------------------------------------------------------------------

def test_registry_has_the_tagging_tasks_and_names_the_known_ones():
    assert {"cws", "pos", "ner"} <= set(task_names())
    assert task_class("ner").output_formats == ("text", "json", "conll")
    with pytest.raises(ZenError, match="unknown task 'nerr' \\(did you mean 'ner'\\?\\); expected one of .*cws.*ner"):
        task_class("nerr")


# --- training windows --------------------------------------------------------------------------------------

def test_training_windows_cut_at_word_boundaries_without_overlap_or_loss(tmp_path):
    task, _, inputs, _, _ = tiny_model(tmp_path, "cws")  # max_seq_len 16: 14 chars per window
    words = ["北京大学", "的", "学生", "在", "图书馆", "学习", "中国人民银行"] * 4
    chars = list("".join(words))
    labels = [lab for w in words for lab in segment_labels(len(w))]
    ids = np.asarray(task.labels.encode_all(labels))
    windows = task.training_windows(ids)
    assert windows[0][0] == 0 and windows[-1][1] == len(chars)
    for (_, b), (c, _) in itertools.pairwise(windows):
        assert b == c  # contiguous, no overlap
    for a, b in windows:
        assert 0 < b - a <= 14
        assert labels[a] in ("B", "S")  # every window starts a word ...
        assert labels[b - 1] in ("E", "S")  # ... and ends one

    records, notes = task.training_records([TaggedSentence(chars, labels, "x", 1)], inputs)
    assert len(records) == len(windows) and "cut at word/entity boundaries" in notes[0]
    ids_of = inputs.char_ids
    for (a, b), rec in zip(windows, records):
        assert len(rec["input_ids"]) == b - a + 2  # [CLS] chars [SEP]
        np.testing.assert_array_equal(rec["input_ids"][1:-1], ids_of(chars[a:b]))
        np.testing.assert_array_equal(rec["labels"][1:-1], ids[a:b])
        assert rec["labels"][0] == rec["labels"][-1] == -100


def test_a_chunk_longer_than_a_window_is_cut_and_the_crf_chain_skips_its_pieces(tmp_path):
    task, _, inputs, _, _ = tiny_model(tmp_path, "cws", decoder="crf")
    words = ["在", "北京大学的学生在图书馆学习新政策", "在"]  # a 16-char "word": longer than a 14-char window
    chars = list("".join(words))
    labels = [lab for w in words for lab in segment_labels(len(w))]
    records, notes = task.training_records([TaggedSentence(chars, labels, "x", 1)], inputs)
    assert [len(r["input_ids"]) - 2 for r in records] == [1, 14, 3]  # 在 | 14 chars of the long word | the rest
    assert "left unlabelled" in notes[0]
    names = task.labels.labels
    for rec in records:
        chain = [names[i] for i in rec["labels"] if i != -100]
        assert is_well_formed(chain, "BMES")  # a constrained CRF can score every chain it trains on
    # The encoder still sees every char: nothing is truncated.
    assert sum(len(r["input_ids"]) - 2 for r in records) == len(chars)


# --- prediction: window merging and well-formed decoding ---------------------------------------------------

def test_long_inputs_take_each_chars_scores_from_its_best_window(tmp_path):
    task, model, inputs, _, _ = tiny_model(tmp_path, "ner")
    chars = list(LONG)
    merged = task.emissions(model, inputs, [chars], batch_size=3)[0]  # [80, C]
    windows = plan_windows(len(chars), 14, task.settings.window_stride)
    assert len(windows) > 3
    best = best_windows(windows, len(chars))
    with torch.no_grad():
        for w, (a, b) in enumerate(windows):
            rec = inputs.char_windows([chars], [[(a, b)]])[0][0]
            from zencli.data.collate import collate

            logits = model.head(model.encode(collate([rec])).hidden).logits[0, 1:-1].numpy()
            mine = best[a:b] == w
            np.testing.assert_allclose(merged[a:b][mine], logits[mine], atol=1e-5)
    assert (np.bincount(best, minlength=len(windows)) > 0).all()


@pytest.mark.parametrize("task_name,decoder", [("cws", "softmax"), ("pos", "crf"), ("ner", "crf"),
                                               ("ner", "softmax")])
def test_decoded_labels_are_well_formed_over_whole_long_sentences(tmp_path, task_name, decoder):
    task, model, inputs, _, _ = tiny_model(tmp_path, task_name, decoder=decoder, seed=3)
    with torch.no_grad():  # an untrained model: its raw scores would give ill-formed sequences
        for p in model.head.parameters():
            p.normal_(0, 2.0)
    examples = [TaggedSentence(list(t), None, "in", i) for i, t in enumerate([LONG, "", "北", LONG[:31]])]
    predictions = task.predict(model, inputs, examples, batch_size=2)
    assert [len(p) for p in predictions] == [80, 0, 1, 31]
    for p in predictions:
        assert is_well_formed(p, task.scheme)


def test_unconstrained_softmax_can_emit_ill_formed_labels(tmp_path):
    task, model, inputs, _, _ = tiny_model(tmp_path, "cws", "task.constrained=false", seed=3)
    with torch.no_grad():
        for p in model.head.parameters():
            p.normal_(0, 2.0)
    predictions = task.predict(model, inputs, [TaggedSentence(list(LONG), None, "in", 1)])
    assert not is_well_formed(predictions[0], "BMES")  # what the constraints are there for


# --- evaluation ---------------------------------------------------------------------------------------------

def test_unseen_gold_label_is_counted_and_scored_as_an_error(tmp_path):
    task, *_ = tiny_model(tmp_path, "pos")
    dev = write(tmp_path / "dev.txt", ["我们/r 在/p 北京/ns 学习/v", "他/XX 是/v 学生/n"])
    gold = read_gold(dev, "pos")
    assert "S-XX" not in task.labels
    predictions = [list(s.labels) for s in gold.examples]
    predictions[1][0] = "S-r"  # the model can only say a tag it knows
    evaluation = task.evaluate(gold, predictions)
    assert task.unseen_labels(gold) == {"S-XX": 1}
    assert any("1 gold labels (1 distinct: S-XX)" in n for n in evaluation.notes)
    assert evaluation.result.joint.correct == 6 and evaluation.result.joint.gold == 7


def test_ner_predictions_are_scored_in_the_gold_files_scheme(tmp_path):
    task, *_ = tiny_model(tmp_path, "ner")  # trained labels: BMES
    assert task.scheme == "BMES"
    bio = write(tmp_path / "dev.tsv", ["北\tB-ORG", "京\tI-ORG", "大\tI-ORG", "学\tI-ORG", "的\tO", "他\tB-PER", ""])
    gold = read_gold(bio, "ner")
    evaluation = task.evaluate(gold, [["B-ORG", "M-ORG", "M-ORG", "E-ORG", "O", "S-PER"]])
    assert evaluation.main_score == 1.0 and task.unseen_labels(gold) == {}
    # converted predictions hold the gold scheme's labels of the model's types: none is an unknown label
    assert evaluation.unseen_labels == {} and not any("label set" in n for n in evaluation.notes)
    unknown = task.evaluate(gold, [["B-ORG", "M-ORG", "M-ORG", "E-ORG", "O", "S-XYZ"]])  # a type it cannot predict
    assert unknown.unseen_labels == {"B-XYZ": 1} and any("1 predicted labels" in n for n in unknown.notes)


def test_cws_scores_include_oov_recall_against_the_training_words(tmp_path):
    task, _, _, _, train = tiny_model(tmp_path, "cws")
    dev = write(tmp_path / "dev.txt", ["北京 大学 很 新"])
    gold = read_gold(dev, "cws")
    evaluation = task.evaluate(gold, [["B", "E", "B", "E", "S", "S"]], train=train)
    d = evaluation.to_dict()
    assert d["f1"] == 1.0 and d["gold_oov"] == 2 and d["correct_oov"] == 2  # 大学, 很: not training words


# --- output formats -----------------------------------------------------------------------------------------

def _fmt(tmp_path, task_name, text, labels, fmt):
    task, *_ = tiny_model(tmp_path, task_name)
    return task.format_prediction(TaggedSentence(list(text), None, "in", 1), labels, fmt)


def test_cws_output_splits_words_at_spaces_and_keeps_offsets(tmp_path):
    text, labels = "北京 大学生", ["B", "M", "E", "B", "M", "E"]  # one predicted word spans the space
    assert _fmt(tmp_path, "cws", text, labels, "text") == "北京 大学生"
    words = json.loads(_fmt(tmp_path, "cws", text, labels, "json"))["words"]
    assert words == [{"text": "北京", "start": 0, "end": 2}, {"text": "大学生", "start": 3, "end": 6}]
    conll = _fmt(tmp_path, "cws", text, labels, "conll")
    assert conll.splitlines() == ["北\tB", "京\tM", " \tE", "大\tB", "学\tM", "生\tE"]


def test_pos_and_ner_text_and_json(tmp_path):
    labels = ["B-ns", "E-ns", "S-v", "B-n", "E-n"]
    assert _fmt(tmp_path, "pos", "北京在学习", labels, "text") == "北京/ns 在/v 学习/n"
    pos = json.loads(_fmt(tmp_path, "pos", "北京在学习", labels, "json"))
    assert pos["words"][1] == {"text": "在", "start": 2, "end": 3, "tag": "v"}
    labels = ["S-PER", "O", "B-LOC", "E-LOC", "O", "B-ORG", "M-ORG", "E-ORG"]
    text = "他在北京的图书馆"
    assert _fmt(tmp_path, "ner", text, labels, "text") == "[他]/PER在[北京]/LOC的[图书馆]/ORG"
    ner = json.loads(_fmt(tmp_path, "ner", text, labels, "json"))
    assert ner == {"text": text, "entities": [
        {"text": "他", "start": 0, "end": 1, "type": "PER"}, {"text": "北京", "start": 2, "end": 4, "type": "LOC"},
        {"text": "图书馆", "start": 5, "end": 8, "type": "ORG"}]}
    assert _fmt(tmp_path, "ner", "", [], "text") == "" and _fmt(tmp_path, "ner", "", [], "conll") == ""


# --- inputs, state, model directories -----------------------------------------------------------------------

def test_bigram_ids_mark_sentence_ends_and_unknown_pairs(tmp_path):
    table = BigramTable.build([list("北京北京"), list("大北京")], min_count=2)
    assert table.bigrams == [("北", "京"), ("京", "</s>")]  # seen 3 and 2 times; the others once
    nxt, prv = table.ids(list("北京大"))
    assert nxt.tolist() == [2, 1, 1] and prv.tolist() == [1, 2, 1]  # (北京) known; (<s>北), (京大), (大</s>) not
    table.save(tmp_path / "b.json")
    assert BigramTable.load(tmp_path / "b.json").bigrams == table.bigrams
    (tmp_path / "bad.json").write_text('[["a"]]', encoding="utf-8")
    with pytest.raises(ZenError, match="bad.json: expected a JSON list of"):
        BigramTable.load(tmp_path / "bad.json")


def test_task_state_is_checked_when_a_model_is_loaded(tmp_path):
    task, *_ = tiny_model(tmp_path, "ner")
    cls = type(task)
    with pytest.raises(ZenError, match="state 'labels'"):
        cls(task.settings, {"labels": [], "scheme": "BMES"})
    with pytest.raises(ZenError, match="state 'scheme'"):
        cls(task.settings, {"labels": ["O"], "scheme": "XYZ"})


@pytest.mark.parametrize("encoder,decoder", [("zen2", "softmax"), ("zen1", "crf"), ("bert", "softmax"),
                                             ("chte", "crf")])
def test_a_saved_model_predicts_the_same_after_loading(tmp_path, encoder, decoder):
    task, model, inputs, spec, _ = tiny_model(tmp_path, "ner", encoder=encoder, decoder=decoder)
    examples = [TaggedSentence(list(t), None, "in", 1) for t in (LONG, "他在北京", "")]
    before = task.predict(model, inputs, examples)
    out = save_task_model(model, inputs, spec, tmp_path / "model")
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "vocab.txt", "task.json"} <= names
    assert ("ngram.txt" in names) == (encoder in ("zen2", "zen1"))
    assert ("bigrams.json" in names) == (encoder == "chte")
    loaded = load_task_model(out)
    assert loaded.task.labels.labels == task.labels.labels and loaded.task.scheme == task.scheme
    assert loaded.task.predict(loaded.model, loaded.inputs, examples) == before
    for a, b in zip(model.state_dict().values(), loaded.model.state_dict().values()):
        assert torch.equal(a, b)


def test_loading_a_damaged_model_directory_is_a_one_line_error(tmp_path):
    _, model, inputs, spec, _ = tiny_model(tmp_path, "cws")
    out = save_task_model(model, inputs, spec, tmp_path / "model")
    meta = json.loads((out / "task.json").read_text(encoding="utf-8"))
    meta["state"]["scheme"] = "nope"
    (out / "task.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ZenError, match=r"task\.json: task cws: state 'scheme'"):
        load_task_model(out)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ZenError, match="empty: not a fine-tuned zen model"):
        load_task_model(tmp_path / "empty")
    with pytest.raises(ZenError, match=r"model/task\.json"):  # an output directory resolves to its model/
        load_task_model(tmp_path)
    save_task_model(model, inputs, spec, tmp_path / "m2")
    (tmp_path / "m2" / "model.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(ZenError, match="cannot read weights"):
        load_task_model(tmp_path / "m2")
