"""Segmenters for whole n-gram masking: forward maximum matching, jieba (mapped to tokens), spec parsing."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from zencli.data.masking import merge_with_lexicon
from zencli.data.segmenters import (
    JiebaSegmenter,
    LexiconSegmenter,
    lexicon_ngram_set,
    make_segmenter,
    spans_from_word_bounds,
)
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.tasks.segmenter import load_model_segmenter


def lexicon_of(*words: str) -> Lexicon:
    return Lexicon([tuple(w) for w in words], [10] * len(words))


def covers(spans, n):
    """Consecutive non-empty spans from 0 to n."""
    if not spans:
        return n == 0
    starts = [s for s, _ in spans]
    return starts == [0, *[e for _, e in spans[:-1]]] and spans[-1][1] == n and all(e > s for s, e in spans)


def test_forward_maximum_matching_takes_the_longest_ngram_at_each_position():
    seg = LexiconSegmenter(lexicon_of("北京", "北京大学", "大学生", "学生", "天安门"))
    toks = list("我在北京大学生活天安门")
    spans = seg.segment(toks)
    assert ["".join(toks[s:e]) for s, e in spans] == ["我", "在", "北京大学", "生", "活", "天安门"]
    assert seg.segment([]) == []
    # max_n bounds the pieces: with max_n=3 北京大学 is not available, 北京 is.
    short = LexiconSegmenter(lexicon_of("北京", "北京大学", "大学生"), max_n=3)
    assert ["".join(toks[s:e]) for s, e in short.segment(toks)][:4] == ["我", "在", "北京", "大学生"]


def test_fmm_properties_on_random_text_and_merge_is_a_no_op_after_it():
    rng = np.random.default_rng(0)
    alphabet = list("甲乙丙丁戊己庚")
    words = {"".join(rng.choice(alphabet, size=int(rng.integers(2, 6)))) for _ in range(40)}
    lex = lexicon_of(*sorted(words))
    seg = LexiconSegmenter(lex)
    ngrams = lexicon_ngram_set(lex)
    for _ in range(200):
        toks = [str(c) for c in rng.choice(alphabet, size=int(rng.integers(0, 40)))]
        spans = seg.segment(toks)
        assert covers(spans, len(toks))
        for s, e in spans:
            assert e - s == 1 or tuple(toks[s:e]) in ngrams
            # maximal: no longer lexicon n-gram starts where this piece starts
            assert not any(tuple(toks[s:k]) in ngrams for k in range(e + 1, min(len(toks), s + 8) + 1))
        # What pretraining relies on to skip the merge for this segmenter:
        assert merge_with_lexicon(toks, spans, ngrams.__contains__, 8) == spans


def test_word_bounds_map_to_token_spans_with_wordpieces_and_specials():
    toks = ["hello", "##world", "北", "京", "[UNK]", "大", "学"]
    # surface: "hello" "world" "北" "京" " " "大" "学" → offsets 0, 5, 10, 11, 12, 13, 14
    assert spans_from_word_bounds(toks, [0, 5, 10, 12, 13]) == [(0, 1), (1, 2), (2, 4), (4, 5), (5, 7)]
    # a word boundary inside a token (at 3, inside "hello") cannot split it: the piece runs on
    assert spans_from_word_bounds(toks, [0, 3, 10]) == [(0, 2), (2, 7)]
    assert spans_from_word_bounds([], [0]) == []


def test_jieba_segmenter_maps_words_back_to_tokens():
    words = ["我们", "在", "北京大学", "学习"]

    def fake_tokenize(text):
        assert text == "我们在北京大学学习"
        pos = 0
        for w in words:
            yield w, pos, pos + len(w)
            pos += len(w)

    seg = JiebaSegmenter(fake_tokenize)
    toks = list("我们在北京大学学习")
    assert [("".join(toks[s:e])) for s, e in seg.segment(toks)] == words


def test_real_jieba_when_installed():
    pytest.importorskip("jieba")
    seg = make_segmenter("jieba", lexicon_of("北京"))
    toks = list("我们在北京大学学习自然语言处理")
    spans = seg.segment(toks)
    assert covers(spans, len(toks))
    assert (3, 7) in spans  # 北京大学 is one jieba word


def test_jieba_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # `import jieba` now raises ImportError
    with pytest.raises(ZenError, match=r"pip install jieba"):
        make_segmenter("jieba", lexicon_of("北京"))


def test_spec_parsing_and_model_segmenter_errors(tmp_path: Path):
    lex = lexicon_of("北京")
    assert isinstance(make_segmenter(" lexicon ", lex), LexiconSegmenter)
    with pytest.raises(ZenError, match=r"expected one of lexicon, jieba, model:DIR, got 'wmseg'"):
        make_segmenter("wmseg", lex)
    with pytest.raises(ZenError, match="expected a model directory"):
        make_segmenter("model:", lex)
    with pytest.raises(ZenError, match=r"cannot load task models"):  # the data layer alone: no task models
        make_segmenter(f"model:{tmp_path / 'nope'}", lex)
    with pytest.raises(ZenError, match=r"needs a CWS model made by `zen finetune --task cws`.*no such directory"):
        make_segmenter(f"model:{tmp_path / 'nope'}", lex, load_model=load_model_segmenter)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps({"zen_format": 1, "architecture": "ZenModel"}), encoding="utf-8")
    with pytest.raises(ZenError, match=r"has no such model \(no task.json"):
        make_segmenter(f"model:{bare}", lex, load_model=load_model_segmenter)


def _saved_tagger(tmp_path: Path, task: str) -> Path:
    from tests.test_tasks_tagging import tiny_model
    from zencli.tasks.model_dir import save_task_model

    (tmp_path / task).mkdir()
    _, model, inputs, spec, _ = tiny_model(tmp_path / task, task)
    return save_task_model(model, inputs, spec, tmp_path / task / "model")


def test_model_segmenter_uses_a_cws_model_and_refuses_other_tasks(tmp_path: Path):
    lex = lexicon_of("北京")
    with pytest.raises(ZenError, match=r"task is 'ner', not 'cws'"):
        make_segmenter(f"model:{_saved_tagger(tmp_path, 'ner')}", lex, load_model=load_model_segmenter)
    seg = make_segmenter(f"model:{_saved_tagger(tmp_path, 'cws')}", lex, load_model=load_model_segmenter)
    tokens = ["[CLS]", "北", "京", "大", "学", "[SEP]", "a", "##b", "[SEP]"]
    spans = seg.segment(tokens)
    # Pieces are consecutive, cover every token once, and special tokens stand alone.
    assert spans[0][0] == 0 and spans[-1][1] == len(tokens)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    for i, tok in enumerate(tokens):
        if tok.startswith("["):
            assert (i, i + 1) in spans
    # The pieces are the model's words: compare with its own prediction on the characters.
    loaded = seg.loaded
    from zencli.data.readers import TaggedSentence

    labels = loaded.task.predict(loaded.model, loaded.inputs, [TaggedSentence(list("北京大学"), None, "t", 0)])[0]
    ends = [i + 1 for i, label in enumerate(labels) if label[0] in "ES"]
    assert [e for s, e in spans if 1 <= s < 5] == [e + 1 for e in ends if e < 4] + [5]
