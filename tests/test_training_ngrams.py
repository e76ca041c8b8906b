"""`model.training_ngrams`: the training data's words (cws, pos), entities (ner) or PMI n-grams (sentence
tasks) join a ZEN model's n-gram lexicon at fine-tuning time — spelled as the model's input tokens,
counted as frequencies, with new embedding rows — and the saved model carries the grown lexicon."""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from tests.test_finetune_cli import error, finetune
from tests.test_tasks_tagging import NGRAM, VOCAB, tiny_model
from zencli.data.features import CharIds
from zencli.lexicon.ngram_file import Lexicon
from zencli.tasks.model_dir import load_task_model
from zencli.tasks.training_ngrams import add_training_ngrams
from zencli.text.vocab import Vocab


def _char_ids() -> CharIds:
    return CharIds(Vocab.load(VOCAB))


def test_units_are_appended_most_frequent_first_and_known_ones_keep_their_id():
    lexicon = Lexicon([("北", "京"), ("大", "学")], [9000, 7000])
    units = Counter({"北京": 5, "学习": 3, "图书馆": 3, "政策": 1, "我": 9, "北京大学的学生在图书馆": 4})
    grown, added = add_training_ngrams(lexicon, units, _char_ids(), min_count=2)
    # 北京 is known (id 1, corpus frequency kept); 我 is one char, the 11-char unit longer than 8;
    # 政策 was seen once. Ties in count go by spelling.
    assert added == 2
    assert grown.ngrams == [("北", "京"), ("大", "学"), ("图", "书", "馆"), ("学", "习")]
    assert grown.freqs == [9000, 7000, 3, 3]
    assert lexicon.ngrams == [("北", "京"), ("大", "学")]  # the input lexicon is not changed
    assert add_training_ngrams(lexicon, units, _char_ids(), min_count=1)[1] == 3  # now 政策 too


def test_a_raw_style_lexicon_takes_no_continuation_pieces():
    from zencli.tasks.training_ngrams import add_ngrams

    raw = Lexicon([("北", "京")], [10], style="raw")
    grown, added = add_ngrams(raw, Counter({("c", "##p", "##u"): 9, ("学", "习"): 3}), min_count=1)
    assert added == 1 and grown.ngrams[-1] == ("学", "习") and grown.style == "raw"


def test_a_unit_with_an_unknown_char_or_white_space_is_left_out():
    lexicon = Lexicon([("北", "京")], [10])
    grown, added = add_training_ngrams(lexicon, Counter({"北龘": 5, "学 习": 5, "学习": 5}), _char_ids(), 1)
    assert added == 1 and grown.ngrams[-1] == ("学", "习")


# Made-up sentences whose multi-char words are not in the fixture lexicon (天地, 山水 ...) beside ones that
# are (北京, 学习): (word, entity type or None).
NEW = [
    [("天地", None), ("山水", "LOC"), ("很", None), ("好", None)],
    [("我们", "PER"), ("在", None), ("北京", "LOC"), ("学习", None), ("天地", None)],
    [("山水", "LOC"), ("和", None), ("日月", None)],
]


def _data(tmp_path, task):
    from tests.test_tasks_tagging import write_task_data

    d = tmp_path / "new"
    d.mkdir()
    return write_task_data(d, task, [[(w, "n", e) for w, e in s] for s in NEW])


def test_the_model_gets_new_rows_and_matches_the_new_words(tmp_path):
    data = _data(tmp_path, "cws")
    _, base, _, _, _ = tiny_model(tmp_path, "cws", f"data.train={data}")
    _, model, inputs, spec, gold = tiny_model(tmp_path, "cws", f"data.train={data}", "model.training_ngrams=1")
    released = Lexicon.load(NGRAM)
    n = len(released)
    # 天地 山水 我们 日月 are new (most frequent first, ties by spelling); 北京 学习 were known.
    assert inputs.lexicon.ngrams[n:] == [("天", "地"), ("山", "水"), ("我", "们"), ("日", "月")]
    assert inputs.lexicon.freqs[n:] == [2, 2, 1, 1]
    assert inputs.lexicon.freq(("学", "习")) == released.freq(("学", "习"))  # the corpus frequency stays
    table = model.encoder.ngram_embeddings.table.weight
    assert table.shape[0] == n + 5 == model.encoder.config.word_size
    # The lexicon's rows are untouched (same seed); rows were only added.
    torch.testing.assert_close(table[:n + 1], base.encoder.ngram_embeddings.table.weight)
    assert any("4 training words seen >= 1 times added" in x for x in spec.notes)
    # The matcher finds a new word in text, at its place.
    chars = list("他们在天地学习")
    rec = inputs.char_windows([chars], [[(0, len(chars))]])[0][0]
    found = {inputs.lexicon.ngrams[i - 1]: (int(s), int(k)) for i, s, k in
             zip(rec["ngram_ids"], rec["ngram_starts"], rec["ngram_lengths"])}
    assert found[("天", "地")] == (4, 2)  # chars 3..4, after [CLS]
    assert found[("学", "习")] == (6, 2)


def test_ner_adds_entities_not_words(tmp_path):
    data = _data(tmp_path, "ner")
    _, _, inputs, spec, _ = tiny_model(tmp_path, "ner", f"data.train={data}", "model.training_ngrams=1")
    n = len(Lexicon.load(NGRAM))
    assert inputs.lexicon.ngrams[n:] == [("山", "水"), ("我", "们")]  # entities; 天地 is a word only
    assert any("2 training entities" in x for x in spec.notes)


def test_a_sentence_task_adds_the_pmi_ngrams_of_its_training_texts(tmp_path):
    """sa: no labelled words, so the PMI n-grams of the training texts (counted over the model's tokens)
    join the lexicon."""
    data = tmp_path / "sa.tsv"
    texts = ["天地山水很好龘龘", "我们在天地山水学习", "天地山水和日月龘龘", "他们在北京"] * 3
    lines = [f"{i % 2}\t{t}" for i, t in enumerate(texts)]
    data.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    r, out = finetune(tmp_path, "sa", "--set", "model.training_ngrams=3", "--train", str(data), "--dev", str(data),
                      "--test", str(data), steps=2, dev=False)
    grown = (out / "model" / "ngram.txt").read_text(encoding="utf-8").splitlines()
    original = NGRAM.read_text(encoding="utf-8").splitlines()
    assert grown[:len(original)] == original
    added = {line.rsplit(",", 1)[0]: int(line.rsplit(",", 1)[1]) for line in grown[len(original):]}
    assert added["天 地 山 水"] == 9 and all(n >= 3 for n in added.values()) and "北 京" not in added
    assert not any("[UNK]" in g for g in added)  # 龘 is not in the vocabulary
    assert "PMI n-grams of the training text seen >= 3 times added" in r.output


def test_a_task_with_neither_words_nor_texts_says_so(tmp_path):
    from tests.test_tasks_mrc import train_file

    msg = error("--task", "mrc", "--train", str(train_file(tmp_path)), "-o", str(tmp_path / "o"), "--vocab",
                str(VOCAB), "--ngram", str(NGRAM), "--set", "model.training_ngrams=1")
    assert msg.startswith("model.training_ngrams:") and "task mrc" in msg


def test_finetune_saves_the_grown_lexicon_and_the_model_predicts_after_loading(tmp_path):
    # Of the made-up training words only 我们 (once) is not a fixture n-gram.
    r, out = finetune(tmp_path, "pos", "--set", "model.training_ngrams=1", steps=4)
    model_dir = out / "model"
    grown = (model_dir / "ngram.txt").read_text(encoding="utf-8").splitlines()
    original = NGRAM.read_text(encoding="utf-8").splitlines()
    assert grown == [*original, "我 们,1"]  # ids are line numbers: the original lines stay first
    loaded = load_task_model(model_dir)
    assert loaded.model.encoder.config.word_size == 101
    assert loaded.inputs.lexicon.id(("我", "们")) == 100
    examples = [loaded.task.parse_input("我们在图书馆学习", "stdin", 1)]
    assert len(loaded.task.predict(loaded.model, loaded.inputs, examples)[0]) == 8
    assert "1 training words seen >= 1 times added" in r.output
    _, out2 = finetune(tmp_path, "pos", "--set", "model.training_ngrams=2", out="run2", steps=2, dev=False)
    assert (out2 / "model" / "ngram.txt").read_text(encoding="utf-8").splitlines() == original


def test_errors_name_the_key(tmp_path):
    from tests.test_tasks_tagging import write_task_data

    data = write_task_data(tmp_path, "cws")
    common = ["--task", "cws", "--train", str(data), "-o", str(tmp_path / "o"), "--vocab", str(VOCAB)]
    msg = error(*common, "--encoder", "bert", "--set", "model.training_ngrams=1")
    assert msg.startswith("model.training_ngrams:") and "BERT" in msg
    msg = error(*common, "--ngram", str(NGRAM), "--set", "model.training_ngrams=0")
    assert "training_ngrams" in msg and ">= 1" in msg


def _slots(inputs, rec) -> set[tuple[str, ...]]:
    return {inputs.lexicon.ngrams[i - 1] for i in rec["ngram_ids"]}


def test_a_training_sentence_sees_only_what_the_other_sentences_hold(tmp_path):
    """Leave-one-out: 日月 occurs once in training (sentence 3), so sentence 3 trains without it — as a test
    sentence with an unknown word would — while 天地 (sentences 1 and 2) stays visible to both; a sentence
    without 日月 still matches it, and prediction inputs match everything."""
    data = _data(tmp_path, "cws")
    task, _, inputs, spec, gold = tiny_model(tmp_path, "cws", f"data.train={data}", "model.training_ngrams=1")
    records, _ = task.training_records(gold.examples, inputs)
    assert len(records) == 3
    assert ("天", "地") in _slots(inputs, records[0]) and ("天", "地") in _slots(inputs, records[1])
    assert ("山", "水") in _slots(inputs, records[0]) and ("山", "水") in _slots(inputs, records[2])
    assert ("日", "月") not in _slots(inputs, records[2])  # its own only occurrence
    assert ("我", "们") not in _slots(inputs, records[1])
    # Known n-grams of the model's own lexicon are never hidden: 北京 and 学习 occur once here too.
    assert {("北", "京"), ("学", "习")} <= _slots(inputs, records[1])
    chars = list("山水和日月")
    rec = inputs.char_windows([chars], [[(0, len(chars))]])[0][0]
    assert {("山", "水"), ("日", "月")} <= _slots(inputs, rec)
    assert any("not its own" in x for x in spec.notes)


def test_leave_one_out_counts_a_sentences_own_occurrences(tmp_path):
    """With min_count 2, a word seen 3 times in all, twice in one sentence, is hidden from that sentence
    (3 − 2 < 2) and visible to the sentence holding it once (3 − 1 >= 2)."""
    from zencli.tasks.inputs import LeaveOneOut

    lexicon = Lexicon([("北", "京"), ("天", "地"), ("山", "水")], [10, 3, 2])
    loo = LeaveOneOut(lexicon, first_id=2, min_count=2, char_ids=_char_ids())
    assert loo.excluded(Counter({"天地": 2})).tolist() == [2]
    assert loo.excluded(Counter({"天地": 1})) is None
    assert loo.excluded(Counter({"北京": 5, "山水": 1, "天地": 1})).tolist() == [3]  # 北京: the model's own


def test_excluded_ids_are_dropped_before_the_slot_cap():
    """An excluded n-gram never takes a slot: with a cap of one slot, the next-best match gets it."""
    from zencli.data.features import NgramFeaturizer

    vocab = Vocab.load(VOCAB)
    lexicon = Lexicon([("天", "地"), ("山", "水")], [5, 9])
    f = NgramFeaturizer(vocab, lexicon, max_ngrams=1, max_seq_len=16)
    ids = _char_ids()(list("天地山水"))
    assert f.featurize(ids)["ngram_ids"].tolist() == [2]  # the more frequent
    assert f.featurize(ids, excluded=np.array([2]))["ngram_ids"].tolist() == [1]
    out = f.featurize_batch([ids, ids], excluded=[np.array([1, 2]), None])
    assert out[0]["ngram_ids"].tolist() == [] and out[1]["ngram_ids"].tolist() == [2]
