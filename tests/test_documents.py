"""Pretraining documents and NSP pairs: layouts, sentence splitting, no truncation of the corpus."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from zencli.data.documents import detect_layout, make_pairs, read_documents, split_sentences
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
