"""Counting a large corpus in passes (counting/prune.py): each pass leaves out the n-grams the one before
rules out, and the merge (on one thread or several) gives the same frequent n-grams, entropies and lexicon."""

import random
from pathlib import Path

import numpy as np
import pytest

from zencli.config.schema import LexiconConfig
from zencli.errors import ZenError
from zencli.lexicon import extract
from zencli.lexicon.counting import KnownFrequent, count_corpus, iter_sections, merge_sections
from zencli.lexicon.extract import TextTokenizer
from zencli.lexicon.settings import FIRST_PASS_ABOVE_BYTES

TOKENIZE = TextTokenizer()
SIG = {"kind": "test"}


def _corpus(path: Path, seed: int = 0, n: int = 800) -> Path:
    """Lines of a few common parts and many rare ones (`##` pieces among them), so that some k-grams are
    frequent and many are not."""
    rng = random.Random(seed)
    common = ["甲", "乙", "丙", "丁", "１９", "ａｂ", "，"]
    rare = [chr(0x4E00 + 300 + i) for i in range(60)]
    lines = ["".join(rng.choice(common) if rng.random() < 0.8 else rng.choice(rare)
                     for _ in range(rng.randint(0, 16))) for _ in range(n)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _count(tmp: Path, corpus: Path, max_n: int, known=None, workers: int = 1):
    return count_corpus([corpus], TOKENIZE, SIG, out_dir=tmp, max_n=max_n, workers=workers, chunk_chars=2000,
                        known=known)


def _merge(tmp: Path, parts, max_n: int, min_freq: int, entropy: bool = True, workers: int = 1):
    return merge_sections(list(iter_sections(parts)), max_n=max_n, min_freq=min_freq, tmp_dir=tmp,
                          partition_entries=50, entropy_from=1 if entropy else None, workers=workers)


def _entries(parts) -> dict[int, int]:
    out: dict[int, int] = {}
    for s in iter_sections(parts):
        for a in s.header["arrays"]:
            if a["name"].startswith("counts_"):
                n = int(a["name"].split("_")[1])
                out[n] = out.get(n, 0) + a["length"]
    return out


@pytest.mark.parametrize("k", [2, 3])
def test_second_pass_leaves_out_entries_and_merges_the_same(tmp_path: Path, k: int):
    corpus = _corpus(tmp_path / "c.txt")
    max_n, min_freq = 6, 3
    one = _count(tmp_path / "one", corpus, max_n + 1)
    first = _merge(tmp_path / "m1", _count(tmp_path / "first", corpus, k).parts, k, min_freq, entropy=False)
    known = KnownFrequent.from_frequent(first, k)
    two = _count(tmp_path / "two", corpus, max_n + 1, known=known, workers=2)

    full, pruned = _entries(one.parts), _entries(two.parts)
    assert pruned[1] == full[1] and all(pruned[n] <= full[n] for n in full)
    assert pruned[k + 1] < full[k + 1] and pruned[max_n + 1] < 0.7 * full[max_n + 1]
    assert all(s.header["pruned"] == {"k": k, "min_freq": min_freq} for s in iter_sections(two.parts))

    a = _merge(tmp_path / "ma", one.parts, max_n, min_freq)
    b = _merge(tmp_path / "mb", two.parts, max_n, min_freq, workers=3)  # sections on threads: the same
    assert a.size(4) > 20
    for n in range(1, max_n + 1):
        assert np.array_equal(a.counts[n], b.counts[n])
        assert a.candidates[n] == b.candidates[n]
        assert np.array_equal(a.entropy_left[n], b.entropy_left[n])  # rare neighbours still counted
        assert np.array_equal(a.entropy_right[n], b.entropy_right[n])
        if n >= 2:
            assert np.array_equal(a.prefix[n], b.prefix[n]) and np.array_equal(a.suffix[n], b.suffix[n])

    with pytest.raises(ZenError, match=rf"min_freq={min_freq}; expected min_freq >= {min_freq}, got 2"):
        _merge(tmp_path / "mc", two.parts, max_n, min_freq - 1)


def test_build_with_a_first_pass_writes_the_same_lexicon(tmp_path: Path):
    corpus = _corpus(tmp_path / "c.txt", seed=1, n=1500)
    common = dict(corpus=[corpus], min_freq=3, min_pmi=0.0, min_entropy=0.5, max_n=5, workers=2, chunk_chars=3000)
    one = extract.build(LexiconConfig(output=tmp_path / "one" / "ngram.txt", first_pass_n=0, **common))
    two = extract.build(LexiconConfig(output=tmp_path / "two" / "ngram.txt", first_pass_n=2, **common))
    assert (tmp_path / "one" / "ngram.txt").read_bytes() == (tmp_path / "two" / "ngram.txt").read_bytes()
    assert len(one.lexicon) > 30 and one.per_length == two.per_length
    assert "first_passes" in two.times and "first_passes" not in one.times


def test_when_a_first_pass_runs():
    cfg = LexiconConfig(max_n=8, min_entropy=1.0)  # counts to 9
    assert cfg.passes(FIRST_PASS_ABOVE_BYTES) == [9] and cfg.passes(FIRST_PASS_ABOVE_BYTES + 1) == [3, 6, 9]
    assert LexiconConfig(max_n=3).passes(10**12) == [3]  # nothing longer than the first pass to leave out
    assert LexiconConfig(max_n=8, first_pass_n=0).passes(10**12) == [8]
    assert LexiconConfig(max_n=8, first_pass_n=4).passes(10) == [4, 8]
    assert LexiconConfig(max_n=8, first_pass_n=2).passes(10) == [2, 4, 8]
    for bad in (1, 9, -1):
        with pytest.raises(ZenError, match=r"first_pass_n: expected 0 \(one pass\), 2 to 8"):
            LexiconConfig(first_pass_n=bad).validate()
