"""Word-level tagging (one label per word, e.g. Arabic): the readers, the first-piece alignment and its
inverse, conlleval-style NER scores and word accuracy for POS, and the prediction output. All data is
made up for these tests (nonsense Arabic-script words, not from any corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import write
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import apply_overrides, from_dict
from zencli.data.readers.tagging import TaggedSentence, read_tagging
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.metrics.ner import conlleval_spans, score_ner
from zencli.metrics.pos import score_word_tags
from zencli.model.heads import TokenClassificationHead
from zencli.tasks.base import task_class
from zencli.tasks.inputs import InputPipeline, InputSettings
from zencli.tasks.network_build import build_task_model
from zencli.tasks.scoring import score_files
from zencli.text.vocab import SPECIAL_TOKENS, Vocab

# A WordPiece vocabulary over made-up Arabic-script pieces: مكتبة → م ##كت ##بة (3 pieces), البيت → ال ##بيت.
PIECES = ["م", "##كت", "##بة", "ال", "##بيت", "قال", "(", ")", ".", "،", "كتاب", "في", "سمر", "##ان", "نور",
          "##ي", "دار", "##س", "ب", "##ل", "##د"]


def _read(tmp_path: Path, text: str, task: str = "ner", fmt: str = "auto"):
    return read_tagging(write(tmp_path / "f.txt", text), task, fmt)


# --- readers ------------------------------------------------------------------------------------------------

def test_word_level_conll_is_detected_with_tabs_or_spaces_and_char_level_files_stay_char_level(tmp_path):
    tab = "قال\tO\nسمران\tB-PER\nنوري\tI-PER\nفي\tO\nالبيت\tB-LOC\n.\tO\n\nكتاب\tO\n.\tO\n"
    sents, info = _read(tmp_path, tab)
    assert (info.format, info.level, info.scheme, info.entities) == ("conll-word", "word", "BIO", {"LOC": 1, "PER": 1})
    assert sents[0].chars == ["قال", "سمران", "نوري", "في", "البيت", "."] and sents[0].level == "word"
    assert sents[0].labels == ["O", "B-PER", "I-PER", "O", "B-LOC", "O"]
    assert (sents[0].line, sents[1].line) == (1, 8) and info.words == info.tokens == 8
    assert sents[0].text == "قال سمران نوري في البيت ." and sents[0].word_offsets()[1] == (4, 9)
    spaced, info2 = _read(tmp_path, "-DOCSTART- -X- O\n\n" + tab.replace("\t", "  "))
    assert info2.format == "conll-word" and [s.chars for s in spaced] == [s.chars for s in sents]
    # A char-level Chinese file is read exactly as before.
    zh, info3 = _read(tmp_path, "北\tB-LOC\n京\tI-LOC\n在\tO\n\n")
    assert (info3.format, info3.level, zh[0].chars) == ("conll", "char", ["北", "京", "在"])


def test_iob1_files_are_read_as_iob2_and_iobes_is_kept(tmp_path):
    # IOB1: entities start with I-; B- only where an entity follows one of the same type.
    iob1 = "قال\tO\nسمران\tI-PER\nنوري\tB-PER\nفي\tO\nالبيت\tI-LOC\nدار\tI-LOC\n\n"
    sents, info = _read(tmp_path, iob1)
    assert sents[0].labels == ["O", "B-PER", "B-PER", "O", "B-LOC", "I-LOC"]
    assert info.entities == {"LOC": 1, "PER": 2} and any("IOB1" in n for n in info.notes)
    iobes = "سمران\tB-PER\nنوري\tE-PER\nفي\tO\nالبيت\tS-LOC\n\n"
    sents, info = _read(tmp_path, iobes)
    assert info.scheme == "IOBES" and sents[0].labels == ["B-PER", "E-PER", "O", "S-LOC"] and not info.notes


def test_word_level_pos_formats_word_slash_word_tab_and_conllu(tmp_path):
    sents, info = _read(tmp_path, "قال/VERB سمران/NOUN_PROP ./PUNC\nفي/PREP البيت/DET+NOUN\n", "pos")
    assert (info.format, info.level, info.scheme) == ("word-slash", "word", None)
    assert sents[1].tagged_words == [("في", "PREP"), ("البيت", "DET+NOUN")]
    sents, info = _read(tmp_path, "قال\tVERB\nسمران\tNOUN_PROP\n\nفي\tPREP\n", "pos")
    assert (info.format, info.level, [s.labels for s in sents]) \
        == ("conll-word", "word", [["VERB", "NOUN_PROP"], ["PREP"]])
    conllu = ("# sent_id = 1\n# text = وبالبيت قال\n1-3\tوبالبيت\t_\t_\t_\t_\t_\t_\t_\t_\n"
              "1\tو\tو\tCCONJ\tC---------\t_\t0\tcc\t_\t_\n2\tب\tب\tADP\tP---------\t_\t3\tcase\t_\t_\n"
              "3\tالبيت\tبيت\t_\tN------S2D\t_\t0\troot\t_\t_\n4\tقال\tقال\tVERB\tVP-A-3MS--\t_\t0\troot\t_\t_\n\n")
    sents, info = _read(tmp_path, conllu, "pos")
    assert (info.format, info.level) == ("conllu", "word")
    assert sents[0].chars == ["و", "ب", "البيت", "قال"] and sents[0].labels == ["CCONJ", "ADP", "N------S2D", "VERB"]
    assert sents[0].line == 4  # the first word line
    # Chinese word/TAG lines keep their char-level joint labels.
    zh, info = _read(tmp_path, "北京/ns 大学/n\n", "pos")
    assert (info.level, zh[0].labels) == ("char", ["B-ns", "E-ns", "B-n", "E-n"])


@pytest.mark.parametrize("text,task,fmt,message", [
    ("قال\tO\nسمران\tB-PER\tx\n", "ner", "auto", r"f\.txt:2: expected 2 columns word<TAB>label"),
    ("قال\tO\nسمران\tX-PER\n", "ner", "auto", r"f\.txt:2: .*expected O or an entity label"),
    ("قال\tO\nسمران\tB-PER\n", "ner", "conll", r"f\.txt:1: expected one character in column 1 .*--format conll-word"),
    ("قال/VERB سمران\n", "pos", "word-slash", r"f\.txt:1: token 'سمران': expected word/TAG"),
    ("1\tو\tو\tCCONJ\t_\t_\t0\tcc\t_\t_\n2\tب\tب\tADP\n", "pos", "conllu", r"f\.txt:2: expected 10 TAB-separated"),
    ("1\tو\tو\t_\t_\t_\t0\tcc\t_\t_\n", "pos", "conllu", r"f\.txt:1: word 1 has no form or no tag"),
])
def test_bad_word_level_lines_are_one_line_errors_naming_file_and_line(tmp_path, text, task, fmt, message):
    with pytest.raises(ZenError, match=message) as e:
        _read(tmp_path, text, task, fmt)
    assert "\n" not in str(e.value)


# --- first-piece alignment and its inverse -------------------------------------------------------------------

def _inputs(max_seq_len: int = 128) -> InputPipeline:
    vocab = Vocab([*SPECIAL_TOKENS, *PIECES])
    return InputPipeline(vocab, InputSettings(max_seq_len=max_seq_len, lowercase=False, strip_accents=False))


def test_words_become_pieces_with_the_label_position_on_the_first_piece():
    inputs = _inputs()
    v = inputs.vocab
    words = ["مكتبة", "زز", "البيت", "\u200f", "(قال)", "سمران"]
    ids, first = inputs.word_pieces(words)
    pieces = [v.id_to_token(int(i)) for i in ids]
    assert pieces == ["م", "##كت", "##بة", "[UNK]", "ال", "##بيت", "[UNK]", "(", "قال", ")", "سمر", "##ان"]
    assert first.tolist() == [0, 3, 4, 6, 7, 10]
    empty_ids, empty_first = inputs.word_pieces([])
    assert len(empty_ids) == 0 and len(empty_first) == 0


class _IdEcho(torch.nn.Module):
    """A stand-in model whose emission for label c at a position is 1 iff the token there has id c: the
    merged per-word scores then name the id of each word's first piece."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.w = torch.nn.Parameter(torch.zeros(1))
        decoder = TokenClassificationHead(1, n)  # its softmax decode: argmax per word

        class Head:
            def __call__(self, hidden):
                return type("H", (), {"logits": hidden})()

            decode = decoder.decode

        self.head = Head()

    @property
    def device(self):
        return torch.device("cpu")

    def encode(self, batch):
        return type("E", (), {"hidden": torch.nn.functional.one_hot(batch["input_ids"], self.n).float()})()

    def outputs(self, batch):  # what a prediction engine answers (zencli.tasks.engine)
        return (self.head(self.encode(batch).hidden).logits,)


def test_per_word_scores_come_from_each_words_first_piece_across_windows():
    inputs = _inputs(max_seq_len=8)  # 6 pieces per window: the sentence below needs several
    n = len(inputs.vocab)
    settings = from_dict(FinetuneConfig, apply_overrides({}, ["task.name=pos", "task.max_seq_len=8"]), source="t").task
    task = task_class("pos")(settings, {"labels": [f"T{i}" for i in range(n)], "scheme": None, "level": "word"})
    words = ["مكتبة", "زز", "البيت", "(قال)", "سمران", "نوري", "في", "مكتبة", "دارس", "بلد"] * 2
    ids, first = inputs.word_pieces(words)
    scores = task.emissions(_IdEcho(n), inputs, [words], batch_size=3)[0]  # [w, C]
    assert scores.shape == (len(words), n)
    assert scores.argmax(1).tolist() == ids[first].tolist()
    labels = task.decode(_IdEcho(n), [scores], 4)[0]
    assert labels == [f"T{int(i)}" for i in ids[first]]


# --- task.word_labels: continuation -----------------------------------------------------------------------------

@pytest.mark.parametrize("scheme,words,lengths,pieces", [
    (None, ["NOUN", "VERB"], [3, 1], ["NOUN", "NOUN", "NOUN", "VERB"]),
    ("BIO", ["O", "B-PER", "I-PER", "B-LOC"], [2, 2, 1, 3],
     ["O", "O", "B-PER", "I-PER", "I-PER", "B-LOC", "I-LOC", "I-LOC"]),
    ("IOBES", ["B-PER", "E-PER", "S-LOC", "S-ORG", "O"], [2, 3, 3, 1, 2],
     ["B-PER", "I-PER", "I-PER", "I-PER", "E-PER", "B-LOC", "I-LOC", "E-LOC", "S-ORG", "O", "O"]),
    ("BMES", ["B-PER", "M-PER", "E-PER", "S-LOC"], [2, 2, 1, 2],
     ["B-PER", "M-PER", "M-PER", "M-PER", "E-PER", "B-LOC", "E-LOC"]),
])
def test_continuation_labels_spread_each_words_label_over_its_pieces_and_come_back(scheme, words, lengths, pieces):
    from zencli.text.labels import continuation_labels, is_well_formed, spans_from_labels, word_label_of_pieces

    got = [lab for w, n in zip(words, lengths) for lab in continuation_labels(w, n, scheme)]
    assert got == pieces
    if scheme is not None:  # the pieces mark the words' chunks, in piece positions
        assert is_well_formed(got, scheme)
        assert len(spans_from_labels(got, scheme)) == len(spans_from_labels(words, scheme))
    ends = np.cumsum(lengths)
    assert [word_label_of_pieces(got[e - n:e], scheme) for e, n in zip(ends, lengths)] == words


def test_a_decoded_word_takes_its_start_from_the_first_piece_and_its_end_from_the_last():
    from zencli.text.labels import word_label_of_pieces

    assert word_label_of_pieces(["B-PER", "I-PER", "E-PER"], "IOBES") == "S-PER"
    assert word_label_of_pieces(["B-PER", "E-PER", "B-LOC"], "IOBES") == "B-PER"  # the last piece opens a chunk
    assert word_label_of_pieces(["I-PER", "S-LOC"], "IOBES") == "E-PER"
    assert word_label_of_pieces(["M-PER", "M-PER"], "BMES") == "M-PER"
    assert word_label_of_pieces(["O", "E-PER"], "IOBES") == "O"
    assert word_label_of_pieces(["I-PER", "B-LOC"], "BIO") == "I-PER"  # BIO and POS tags: the first piece's
    assert word_label_of_pieces(["NOUN", "VERB"], None) == "NOUN"


def _ner_model(tmp_path: Path, train_text: str, *sets: str):
    vocab = write(tmp_path / "vocab.txt", "".join(t + "\n" for t in [*SPECIAL_TOKENS, *PIECES]))
    ngram = tmp_path / "ngram.txt"
    Lexicon([("ال", "##بيت"), ("سمر", "##ان")], [5, 3]).save(ngram)
    train = write(tmp_path / "train.txt", train_text)
    cfg = from_dict(FinetuneConfig, apply_overrides({}, [
        "task.name=ner", f"data.train={train}", f"model.vocab={vocab}", f"model.ngram={ngram}", "model.hidden_size=16",
        "model.num_hidden_layers=1", "model.num_attention_heads=2", "model.intermediate_size=32",
        "model.num_hidden_word_layers=1", *sets]), source="t")
    cls = task_class("ner")
    gold = cls.read(train)
    task = cls.from_training_data(cfg.task, gold)
    model, inputs, _ = build_task_model(cfg, task, gold.examples)
    return task, model, inputs, gold


def test_continuation_labels_every_piece_and_saves_the_choice(tmp_path):
    text = "قال\tO\nسمران\tB-PER\nنوري\tI-PER\n\nالبيت\tB-LOC\n.\tO\n\n"
    task, model, inputs, gold = _ner_model(tmp_path, text, "task.word_labels=continuation")
    # I-LOC is in no word's label, but the second piece of البيت needs it.
    assert task.labels.labels == ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]
    assert task.state()["word_labels"] == "continuation" and task.state()["level"] == "word"
    records, notes = task.training_records(gold.examples, inputs)
    ids = task.labels.encode_all
    # [CLS] قال سمر ##ان نور ##ي [SEP]: every piece labelled
    assert records[0]["labels"].tolist() == [-100, *ids(["O", "B-PER", "I-PER", "I-PER", "I-PER"]), -100]
    assert records[1]["labels"].tolist() == [-100, *ids(["B-LOC", "I-LOC", "O"]), -100]
    assert any("every one (continuation labels)" in n for n in notes)
    model.eval()
    predicted = task.predict(model, inputs, gold.examples)
    assert [len(p) for p in predicted] == [3, 2]  # one label per word
    # Models saved before the setting labelled first pieces; char-level data takes no word_labels.
    old = task_class("ner")(task.settings, {"labels": ["B-PER", "O"], "scheme": "BIO", "level": "word"})
    assert old.word_labels == "first"
    with pytest.raises(ZenError, match=r"task.word_labels: applies to word-level data; .*zh\.txt is read as char"):
        task_class("ner").from_training_data(task.settings, task_class("ner").read(
            write(tmp_path / "zh.txt", "北\tB-LOC\n京\tI-LOC\n\n")))


@pytest.mark.parametrize("name", ["sa", "cws"])
def test_word_labels_is_refused_by_tasks_without_word_level_data(name):
    settings = from_dict(FinetuneConfig, apply_overrides({}, [f"task.name={name}", "task.word_labels=first"]),
                         source="t").task
    with pytest.raises(ZenError, match=f"task.word_labels: applies to word-level tagging data .*not task {name}"):
        task_class(name).check_settings(settings)


def test_continuation_predictions_map_back_from_every_words_pieces():
    inputs = _inputs(max_seq_len=8)
    n = len(inputs.vocab)
    settings = from_dict(FinetuneConfig, apply_overrides({}, ["task.name=pos", "task.max_seq_len=8"]), source="t").task
    state = {"labels": [f"T{i}" for i in range(n)], "scheme": None, "level": "word", "word_labels": "continuation"}
    task = task_class("pos")(settings, state)
    words = ["مكتبة", "زز", "البيت", "(قال)", "سمران", "نوري", "في", "مكتبة", "دارس", "بلد"] * 2
    ids, first = inputs.word_pieces(words)
    # Every piece is decoded (the stand-in labels each with its own id); each word takes its first piece's.
    sentence = TaggedSentence(words, None, "<test>", 1, "word")
    labels = task.predict(_IdEcho(n), inputs, [sentence], batch_size=3)[0]
    assert labels == [f"T{int(i)}" for i in ids[first]]


def test_continuation_training_windows_are_cut_only_before_a_word(tmp_path):
    words = ["مكتبة", "البيت", "سمران", "في"] * 6  # 3 + 2 + 2 + 1 pieces each
    text = "".join(f"{w}\tO\n" for w in words) + "\n"
    task, model, inputs, gold = _ner_model(tmp_path, text, "task.word_labels=continuation", "task.max_seq_len=9")
    ids, first = inputs.word_pieces(words)
    records, _ = task.training_records(gold.examples, inputs)
    starts, pos = set(first.tolist()), 0
    for r in records:  # the windows tile the sentence, each starting at a word's first piece
        assert pos in starts
        pos += len(r["input_ids"]) - 2
    assert pos == len(ids) and len(records) > 1


# --- scores ---------------------------------------------------------------------------------------------------

# Worked by hand as conlleval.pl counts (13 tokens, 5 gold phrases, 7 found, 2 correct).
GOLD = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["O", "I-PER", "O"], ["B-LOC", "I-LOC", "I-LOC"], ["B-ORG", "I-ORG"]]
PRED = [["B-PER", "I-PER", "O", "B-ORG", "O"], ["O", "B-PER", "O"], ["B-LOC", "I-LOC", "B-LOC"], ["I-ORG", "I-PER"]]


def test_word_level_ner_scores_agree_with_conlleval():
    r = score_ner(GOLD, PRED, chunking="conlleval")
    assert (r.overall.correct, r.overall.predicted, r.overall.gold) == (2, 7, 5)
    assert round(100 * r.overall.precision, 2) == 28.57 and round(100 * r.overall.recall, 2) == 40.00
    assert round(100 * r.overall.f1, 2) == 33.33
    assert {t: (p.correct, p.predicted, p.gold) for t, p in r.per_type.items()} == {
        "LOC": (0, 2, 2), "ORG": (0, 2, 1), "PER": (2, 3, 2)}
    assert round(100 * r.per_type["PER"].f1, 2) == 80.00
    d = r.to_dict()
    assert (d["tokens"], round(100 * d["accuracy"], 2), d["chunking"]) == (13, 61.54, "conlleval")
    # Strict reading differs exactly where conlleval is lenient: the gold `O I-PER` is no entity there.
    assert score_ner(GOLD, PRED).overall.gold == 4


def test_conlleval_chunks_for_iobes_close_at_e_and_s():
    assert conlleval_spans(["S-PER", "S-PER", "B-LOC", "E-LOC", "B-LOC", "E-LOC"]) == [
        (0, 1, "PER"), (1, 2, "PER"), (2, 4, "LOC"), (4, 6, "LOC")]
    assert conlleval_spans(["O", "E-PER", "I-PER", "O", "M-ORG"]) == [(1, 2, "PER"), (2, 3, "PER"), (4, 5, "ORG")]


def test_word_level_pos_is_scored_by_word_accuracy_and_files_score_by_level(tmp_path):
    r = score_word_tags([["VERB", "NOUN", "PUNC"], ["PREP"]], [["VERB", "ADJ", "PUNC"], ["PREP"]])
    assert (r.correct, r.words, r.accuracy, r.main_score) == (3, 4, 0.75, 0.75)
    assert r.to_dict()["per_tag"]["NOUN"] == {"accuracy": 0.0, "correct": 0, "gold": 1}
    words = ["سمران", "نوري", "في", "البيت", "."]
    gold = write(tmp_path / "g.txt", "".join("".join(f"{w}\t{t}\n" for w, t in zip(words, s)) + "\n" for s in GOLD))
    pred = write(tmp_path / "p.txt", "".join("".join(f"{w}\t{t}\n" for w, t in zip(words, s)) + "\n" for s in PRED))
    ev = score_files("ner", gold, pred)  # the hand-counted conlleval figures above, from files
    assert ev.gold_format == "conll-word" and ev.result.to_dict()["chunking"] == "conlleval"
    assert (ev.result.overall.correct, ev.result.overall.predicted, ev.result.overall.gold) == (2, 7, 5)
    bad = write(tmp_path / "b.txt", "سمران\tO\nنور\tO\n\n")
    one = write(tmp_path / "o.txt", "سمران\tO\nنوري\tO\n\n")
    with pytest.raises(ZenError, match=r"b\.txt:1: sentence 1 differs .* at word 2"):
        score_files("ner", one, bad)


# --- output ---------------------------------------------------------------------------------------------------

def test_prediction_lines_are_cut_into_words_with_offsets_and_written_in_three_formats():
    settings = from_dict(FinetuneConfig, apply_overrides({}, ["task.name=ner"]), source="t").task
    task = task_class("ner")(settings, {"labels": ["B-PER", "I-PER", "O"], "scheme": "BIO", "level": "word"})
    line = "  قال سمرانُ نوري: «في البيت»"
    ex = task.parse_input(line, "<stdin>", 1)
    assert ex.chars == ["قال", "سمرانُ", "نوري", ":", "«", "في", "البيت", "»"]
    assert [line[s:e] for s, e in ex.word_offsets()] == ex.chars and ex.text == line
    labels = ["O", "B-PER", "I-PER", "O", "O", "O", "O", "O"]
    out = json.loads(task.format_prediction(ex, labels, "json"))
    assert out["text"] == line and out["entities"] == [{"text": "سمرانُ نوري", "start": 6, "end": 17, "type": "PER"}]
    assert out["words"][1] == {"text": "سمرانُ", "start": 6, "end": 12, "label": "B-PER"}
    assert task.format_prediction(ex, labels, "text") == "  قال [سمرانُ نوري]/PER: «في البيت»"
    assert task.format_prediction(ex, labels, "conll").splitlines()[:2] == ["قال\tO", "سمرانُ\tB-PER"]
    blank = task.parse_input(" \u00a0\u3000\t ", "<stdin>", 2)  # white space is never a word or an entity
    assert blank.chars == [] and task.format_prediction(blank, [], "conll") == ""
    assert json.loads(task.format_prediction(blank, [], "json")) == {"text": " \u00a0\u3000\t ", "words": [],
                                                                     "entities": []}
    pos = task_class("pos")(from_dict(FinetuneConfig, apply_overrides({}, ["task.name=pos"]), source="t").task,
                            {"labels": ["NOUN", "PUNC"], "scheme": None, "level": "word"})
    ex = pos.parse_input("البيت.", "<stdin>", 1)
    assert pos.format_prediction(ex, ["NOUN", "PUNC"], "text") == "البيت/NOUN ./PUNC"
    assert json.loads(pos.format_prediction(ex, ["NOUN", "PUNC"], "json"))["words"][1] == {
        "text": ".", "start": 5, "end": 6, "tag": "PUNC"}


def test_a_word_level_model_refuses_char_level_data_and_chte_from_characters(tmp_path):
    vocab = write(tmp_path / "vocab.txt", "".join(t + "\n" for t in [*SPECIAL_TOKENS, *PIECES]))
    ngram = tmp_path / "ngram.txt"
    Lexicon([("ال", "##بيت"), ("سمر", "##ان")], [5, 3]).save(ngram)
    train = write(tmp_path / "train.txt", "قال\tO\nسمران\tB-PER\nنوري\tI-PER\n\nالبيت\tB-LOC\n.\tO\n\n")
    sets = ["task.name=ner", f"data.train={train}", f"model.vocab={vocab}", f"model.ngram={ngram}",
            "model.hidden_size=16", "model.num_hidden_layers=1", "model.num_attention_heads=2",
            "model.intermediate_size=32", "model.num_hidden_word_layers=1", "model.training_ngrams=1"]
    cfg = from_dict(FinetuneConfig, apply_overrides({}, sets), source="t")
    cls = task_class("ner")
    gold = cls.read(train)
    task = cls.from_training_data(cfg.task, gold)
    assert task.state()["level"] == "word"
    model, inputs, spec = build_task_model(cfg, task, gold.examples)
    # training_ngrams spells the entities with their pieces: سمران نوري → سمر ##ان نور ##ي.
    assert inputs.lexicon.id(("سمر", "##ان", "نور", "##ي")) > 2
    records, notes = task.training_records(gold.examples, inputs)
    assert records[0]["labels"].tolist() == [-100, task.labels.encode_all(["O"])[0],
                                             *task.labels.encode_all(["B-PER"]), -100,
                                             *task.labels.encode_all(["I-PER"]), -100, -100]
    assert any("word pieces" in n for n in notes)
    zh = cls.read(write(tmp_path / "zh.txt", "北\tB-LOC\n京\tI-LOC\n\n"))
    with pytest.raises(ZenError, match=r"zh\.txt: read as char-level conll data, "
                                       r"but the model tags one label per word"):
        task.evaluate(zh, [["O", "O"]])
    chte = from_dict(FinetuneConfig, apply_overrides({}, [*sets[:2], "model.encoder=chte"]), source="t")
    with pytest.raises(ZenError, match="CHTE from characters reads char-level data"):
        build_task_model(chte, task, gold.examples)


def test_the_arabic_recipes_load_and_name_their_tasks():
    from zencli.config import load_job_recipe

    expected = {"finetune-anercorp-ner": "ner", "finetune-aqmar-ner": "ner", "finetune-atb-pos": "pos",
                "finetune-astd-sa": "sa", "finetune-sanad-dc": "dc", "finetune-xnli-ar-nli": "nli",
                "finetune-arcd-mrc": "mrc", "finetune-ar-tiny-ner": "ner"}
    for name, task in expected.items():
        cfg = load_job_recipe(name, expected_job="finetune")
        assert cfg.task.name == task, name
    tiny = load_job_recipe("finetune-ar-tiny-ner", expected_job="finetune")
    assert str(tiny.model.pretrained) == "runs/pretrain-ar-tiny/model"
