"""Arabic normalisation as a tokenizer setting: what each one does, offsets into the original text,
and the setting travelling from vocab.json to a fine-tuned model's task.json (old models: none).
The words are made up for these tests."""

from __future__ import annotations

import json

import pytest

from zencli.data.features import CharIds
from zencli.errors import ZenError
from zencli.tasks.inputs import InputPipeline, InputSettings
from zencli.text.tokenizer import BasicTokenizer, Tokenizer
from zencli.text.vocab import SPECIAL_TOKENS, Vocab, write_sidecar
from zencli.text.vocab_build import build_vocab

ALL = ["diacritics", "tatweel", "alef", "yaa"]


@pytest.mark.parametrize("names,expected", [
    ([], ["قالَ", "أحمـــدٌ", ":", "إلى", "مُصطفى"]),
    (["diacritics"], ["قال", "أحمـــد", ":", "إلى", "مصطفى"]),
    (["tatweel"], ["قالَ", "أحمدٌ", ":", "إلى", "مُصطفى"]),
    (["alef"], ["قالَ", "احمـــدٌ", ":", "الى", "مُصطفى"]),
    (["yaa"], ["قالَ", "أحمـــدٌ", ":", "إلي", "مُصطفي"]),
    (ALL, ["قال", "احمد", ":", "الي", "مصطفي"]),
])
def test_each_normalisation_and_original_offsets(names, expected):
    text = "  قالَ أحمـــدٌ: إلى مُصطفى"
    basic = BasicTokenizer(lowercase=False, strip_accents=False, normalize=names)
    assert basic.split(text) == expected
    toks = basic.split_with_offsets(text)
    assert [t.text for t in toks] == expected
    # Spans cover the original characters, dropped marks included (a word-final tanween too).
    assert [text[t.start:t.end] for t in toks] == ["قالَ", "أحمـــدٌ", ":", "إلى", "مُصطفى"]


def test_unknown_names_are_errors_and_order_is_canonical():
    with pytest.raises(ValueError, match="unknown normalisation 'hamza'; expected some of diacritics"):
        BasicTokenizer(normalize=["hamza"])
    assert BasicTokenizer(normalize=["yaa", "diacritics"]).normalize == ["diacritics", "yaa"]
    with pytest.raises(ZenError, match="inputs.normalize: unknown normalisation 'x'"):
        InputSettings.from_dict({"normalize": ["x"]}, "task.json")
    assert InputSettings.from_dict({"max_seq_len": 64}, "task.json").normalize == []  # older models: none


def test_the_setting_goes_from_the_vocab_sidecar_to_every_tokenizer_and_char_ids(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("قالَ أحمـــدٌ إلى مُصطفى\nقال احمد الي مصطفي\n" * 20, encoding="utf-8")
    built = build_vocab([corpus], language="ar", size=60, normalize=["alef", "diacritics", "tatweel", "yaa"])
    assert built.info["normalize"] == ALL
    assert not any(c in tok for tok in built.vocab for c in "ٌَُـأإى")  # the vocabulary never sees them
    path = tmp_path / "vocab.txt"
    built.vocab.save(path)
    write_sidecar(path, built.info)
    tok = Tokenizer.from_vocab(path)
    assert tok.normalize == ALL and tok.tokens("أحمـــدٌ") == tok.tokens("احمد")
    pipeline = InputPipeline(built.vocab, InputSettings(lowercase=True, strip_accents=False, normalize=ALL))
    ids, first = pipeline.word_pieces(["مُصطفى", "إلى"])
    same, _ = pipeline.word_pieces(["مصطفي", "الي"])
    assert ids.tolist() == same.tolist()
    chars = CharIds(built.vocab, False, False, normalize=ALL)
    assert chars(list("إى")).tolist() == chars(list("اي")).tolist()
    side = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    side["normalize"] = "diacritics"
    path.with_suffix(".json").write_text(json.dumps(side), encoding="utf-8")
    with pytest.raises(ZenError, match=r"vocab\.json: normalize: expected a list of names"):
        Tokenizer.from_vocab(path)


def test_without_the_setting_arabic_text_is_tokenized_as_before():
    vocab = Vocab([*SPECIAL_TOKENS, "قال", "##َ", "أ"])
    assert Tokenizer(vocab, lowercase=False, strip_accents=False).tokens("قالَ أ") == ["قال", "##َ", "أ"]


def test_mrc_answer_spans_map_back_to_the_exact_original_characters():
    from zencli.config.finetune import FinetuneConfig
    from zencli.config.loading import apply_overrides, from_dict
    from zencli.data.readers import MrcExample
    from zencli.data.windows import char_span_to_tokens, tokens_to_char_span
    from zencli.tasks.base import task_class

    vocab = Vocab([*SPECIAL_TOKENS, "ال", "##كتاب", "في", "دار", "##س", "قال", "احمد", "اين", "؟", "."])
    inputs = InputPipeline(vocab, InputSettings(lowercase=False, strip_accents=False, normalize=ALL))
    settings = from_dict(FinetuneConfig, apply_overrides({}, ["task.name=mrc"]), source="t").task
    task = task_class("mrc")(settings, {"max_answer_length": 8})
    context = "قالَ أحمـــدُ: الكِتابُ في دارِسٍ."
    doc = task.document(MrcExample("q", "أينَ الكتاب؟", context, [], False), inputs)
    for answer in ("الكِتابُ", "أحمـــدُ", "دارِسٍ", "الكِتابُ في دارِسٍ"):
        start = context.index(answer)
        ts, te = char_span_to_tokens(doc.offsets, start, start + len(answer))
        s, e = tokens_to_char_span(doc.offsets, ts, te)
        assert context[s:e] == answer  # every diacritic and the tatweel kept, nothing more
