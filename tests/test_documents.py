"""Pretraining documents and NSP pairs: layouts, sentence splitting, no truncation of the corpus."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from zencli.data.documents import (
    Segments,
    detect_layout,
    half_segment,
    make_pairs,
    pair_spans,
    read_documents,
    split_sentences,
)
from zencli.errors import ZenError


def test_split_sentences_keeps_closing_quotes():
    assert split_sentences("他说：“好。”我们走吧！真的？") == ["他说：“好。”", "我们走吧！", "真的？"]
    assert split_sentences("没有句号") == ["没有句号"]
    assert split_sentences("   ") == []


def test_layouts(tmp_path: Path):
    a = tmp_path / "a.txt"
    a.write_text("甲。\n乙。\n\n丙。\n", encoding="utf-8")
    assert detect_layout(a) == "blank-line"
    assert list(read_documents([a])) == [["甲。", "乙。"], ["丙。"]]
    b = tmp_path / "b.txt"
    b.write_text("甲。乙！\n丙。\n", encoding="utf-8")
    assert detect_layout(b) == "line"
    assert list(read_documents([b])) == [["甲。", "乙！"], ["丙。"]]


def _docs(rng, n_docs=30):
    docs, tok = [], 0
    for _ in range(n_docs):
        doc = []
        for _ in range(int(rng.integers(1, 8))):
            n = int(rng.integers(1, 90))
            doc.append(list(range(tok, tok + n)))
            tok += n
        docs.append(doc)
    return docs, tok


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairs_fit_and_cover_every_token_once(seed: int):
    rng = np.random.default_rng(seed)
    docs, total = _docs(rng)
    pairs = make_pairs(docs, max_seq_len=64, rng=np.random.default_rng(seed))
    seen = Counter()
    for p in pairs:
        assert 1 <= len(p.a) and 1 <= len(p.b) and len(p.a) + len(p.b) + 3 <= 64
        seen.update(p.a)
        if not p.is_random_next:
            seen.update(p.b)
    assert set(seen) == set(range(total)) and max(seen.values()) == 1
    frac = np.mean([p.is_random_next for p in pairs])
    assert abs(frac - 0.5) < 3.5 * 0.5 / len(pairs) ** 0.5  # half random, within 3.5 standard errors


def test_one_document_is_a_clear_error():
    with pytest.raises(ZenError, match="fewer than two documents"):
        make_pairs([[[1, 2, 3], [4, 5]]], max_seq_len=32, rng=np.random.default_rng(0))


def _windows_reference(docs, half):
    """The segments as lists: each sentence cut into windows of `half`, empty ones and empty documents left out."""
    out = []
    for doc in docs:
        segs = [s[i : i + half] for s in doc for i in range(0, len(s), half)]
        if segs:
            out.append(segs)
    return out


@pytest.mark.parametrize("half", [1, 3, 30])
def test_segments_cut_long_sentences_into_windows_and_skip_empty_ones(half: int):
    rng = np.random.default_rng(half)
    docs, _ = _docs(rng, n_docs=25)
    docs.insert(3, [])  # an empty document
    docs[5].insert(1, [])  # an empty sentence inside a document
    docs.insert(7, [[]])  # a document of one empty sentence
    seg = Segments.of_lists(docs, half)
    ids, b, d = seg.ids.tolist(), seg.bounds.tolist(), seg.docs.tolist()
    got = [[ids[b[k] : b[k + 1]] for k in range(d[j], d[j + 1])] for j in range(seg.n_docs)]
    assert got == _windows_reference(docs, half)


@pytest.mark.parametrize("seed", [0, 3])
def test_pair_spans_are_slices_of_their_documents(seed: int):
    """A is consecutive segments of one document; a true B follows A; a random B lies in another document."""
    docs, _ = _docs(np.random.default_rng(seed), n_docs=40)
    seg = Segments.of_lists(docs, half_segment(32))
    spans = pair_spans(seg, 32, np.random.default_rng(seed), short_seq_prob=0.3)
    doc_start = seg.bounds[seg.docs[:-1]]  # [D] first token of each document
    doc_of = np.searchsorted(doc_start, np.arange(len(seg.ids)), side="right") - 1  # [T]
    assert ((spans.a1 > spans.a0) & (spans.b1 > spans.b0)).all()
    assert (spans.a1 - spans.a0 + spans.b1 - spans.b0 + 3 <= 32).all()
    assert (doc_of[spans.a0] == doc_of[spans.a1 - 1]).all() and (doc_of[spans.b0] == doc_of[spans.b1 - 1]).all()
    true = ~spans.is_random_next
    assert (spans.b0[true] == spans.a1[true]).all()
    assert (doc_of[spans.b0[~true]] != doc_of[spans.a0[~true]]).all()
