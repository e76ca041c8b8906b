"""The n-gram matcher: exactly the released loop's matches, the released keep rules, the fixture slots."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from zencli.lexicon.matcher import (
    Matches,
    NgramMatcher,
    naive_matches,
    ngram_index,
    released_cap,
    select_released,
)


def as_lists(m: Matches) -> list[list[tuple[int, int, int]]]:
    """(id, start, length) per sequence, in the order the Matches hold them."""
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(m.n_seqs)]
    for b, i, s, n in zip(m.seq.tolist(), m.ngram_id.tolist(), m.start.tolist(), m.length.tolist()):
        out[b].append((i, s, n))
    return out


# ---------------------------------------------------------------------------------------------- basics


def test_small_example_all_overlapping_matches_in_released_order():
    ngrams = [(1, 2), (2, 3), (1, 2, 3), (5,), (3, 1), (1, 2, 3, 1, 2, 3, 1, 2, 3)]
    freqs = [10, 20, 30, 40, 50, 60]
    m = NgramMatcher(ngrams, freqs)  # lengths 2..8: the 1-gram and the 9-gram never match
    got = m.match([1, 2, 3, 1, 2, 5, 3])
    assert got.sequence(0) == [
        (1, 0, 2, 10), (2, 1, 2, 20), (5, 2, 2, 50), (1, 3, 2, 10),  # length 2, by start
        (3, 0, 3, 30),  # length 3
    ]
    assert got.seq.tolist() == [0] * 5 and got.seq_lengths.tolist() == [7]
    assert all(a.dtype == np.int64 for a in (got.seq, got.ngram_id, got.start, got.length, got.freq))


def test_min_and_max_len_bound_the_lengths():
    ngrams = [(7,), (7, 7), (7, 7, 7)]
    tokens = [7, 7, 7]
    assert as_lists(NgramMatcher(ngrams, [1, 2, 3], min_len=1, max_len=2).match(tokens)) == [
        [(1, 0, 1), (1, 1, 1), (1, 2, 1), (2, 0, 2), (2, 1, 2)]
    ]
    assert as_lists(NgramMatcher(ngrams, [1, 2, 3], min_len=3, max_len=3).match(tokens)) == [[(3, 0, 3)]]
    assert as_lists(NgramMatcher(ngrams, [1, 2, 3], min_len=1, max_len=1).match(tokens)) == [
        [(1, 0, 1), (1, 1, 1), (1, 2, 1)]
    ]


def test_batch_never_matches_across_sequences_and_keeps_sequence_index():
    m = NgramMatcher([(4, 5), (5, 6)], [3, 4])
    got = m.match_batch([[4], [5, 6], [], [4, 5, 6, 4]])
    assert as_lists(got) == [[], [(2, 0, 2)], [], [(1, 0, 2), (2, 1, 2)]]
    assert got.seq_lengths.tolist() == [1, 2, 0, 4]
    assert got.counts().tolist() == [0, 1, 0, 2] and got.offsets().tolist() == [0, 0, 1, 1, 3]


def test_padded_array_input_equals_list_input_and_ignores_the_padding():
    m = NgramMatcher([(1, 2), (2, 0), (0, 0)], [5, 6, 7])
    seqs = [[1, 2, 0], [2], [1, 2, 2, 0, 0]]
    padded = np.array([[1, 2, 0, 0, 0], [2, 0, 0, 9, 9], [1, 2, 2, 0, 0]], np.int32)  # 0 is a real token here
    a, b = m.match_batch(seqs), m.match_batch(padded, lengths=[3, 1, 5])
    assert as_lists(a) == as_lists(b) == [[(1, 0, 2), (2, 1, 2)], [], [(1, 0, 2), (2, 2, 2), (3, 3, 2)]]
    assert b.freq.tolist() == [5, 6, 5, 6, 7]


def test_unknown_and_huge_token_ids_never_match():
    m = NgramMatcher([(3, 4)], [1])
    assert len(m.match([3, 4, 10**9, 3, 4, 99])) == 2
    assert len(m.match(np.array([3, 10**6, 4]))) == 0


def test_empty_lexicon_and_empty_batch():
    m = NgramMatcher([None, (1,)], [5, 6])  # nothing of length 2..8
    assert len(m.match([1, 1, 1])) == 0
    empty = NgramMatcher([(1, 2)], [3]).match_batch([])
    assert len(empty) == 0 and empty.n_seqs == 0


def test_duplicate_ngram_the_later_id_wins_like_the_released_dict():
    ngrams = [(1, 2), (3, 4), (1, 2)]
    m = NgramMatcher(ngrams, [10, 20, 30])
    assert m.match([1, 2]).sequence(0) == [(3, 0, 2, 30)]
    assert naive_matches([1, 2], ngram_index(ngrams)) == [(3, 0, 2)]


def test_from_lexicon_skips_ngrams_with_unknown_tokens_but_keeps_ids_aligned():
    class Lex:
        ngrams = [("a", "b"), ("b", "zz"), ("b", "c"), ("c", "a", "b")]
        freqs = [7, 8, 9, 10]

    vocab = {"a": 1, "b": 2, "c": 3}
    m = NgramMatcher.from_lexicon(Lex(), vocab.get)
    assert m.n_ngrams == 4
    assert m.match([1, 2, 3, 1, 2]).sequence(0) == [(1, 0, 2, 7), (3, 1, 2, 9), (1, 3, 2, 7), (4, 2, 3, 10)]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: NgramMatcher([(1, 2)], [1, 2]), "1 n-grams but 2 frequencies"),
        (lambda: NgramMatcher([(1, 2)], [1], min_len=3, max_len=2), "min_len <= max_len"),
        (lambda: NgramMatcher([(1, 2)], [1], min_len=0), "min_len <= max_len"),
        (lambda: NgramMatcher([(1, -2)], [1]), "n-gram token ids must be in"),
        (lambda: NgramMatcher([(1, 2)], [1]).match([1, -1]), "token ids must be >= 0"),
        (lambda: NgramMatcher([(1, 2)], [1]).match_batch(np.zeros((2, 3), np.int64)), "needs `lengths`"),
        (lambda: NgramMatcher([(1, 2)], [1]).match_batch(np.zeros((2, 3), np.int64), [1, 4]), "must give 0..3"),
        (lambda: NgramMatcher([(1, 2)], [1]).match_batch(np.zeros((1, 3)), [1]), "must be integers"),
        (lambda: NgramMatcher([(1, 2)], [1]).match_batch([[1, 2]], [2]), "only for a padded"),
    ],
)
def test_bad_arguments_are_reported(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_padded_slot_arrays():
    m = NgramMatcher([(1, 2), (2, 3), (1, 2, 3)], [5, 6, 7])
    got = m.match_batch([[1, 2, 3], [9], [2, 3]])
    slots = got.padded()
    assert slots["ngram_ids"].tolist() == [[1, 2, 3], [0, 0, 0], [2, 0, 0]]
    assert slots["ngram_starts"].tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 0]]
    assert slots["ngram_lengths"].tolist() == [[2, 2, 3], [0, 0, 0], [2, 0, 0]]
    assert slots["ngram_freqs"].tolist() == [[5, 6, 7], [0, 0, 0], [6, 0, 0]]
    assert slots["ngram_mask"].tolist() == [[1, 1, 1], [0, 0, 0], [1, 0, 0]]
    assert got.padded(5)["ngram_ids"].shape == (3, 5)
    with pytest.raises(ValueError, match="sequence 0 has 3 n-gram matches but only 2 slots"):
        got.padded(2)


# ------------------------------------------------------------------------- the matcher = the naive loop

_token = st.integers(0, 5)
_ngram = st.one_of(st.none(), st.lists(_token, min_size=1, max_size=8).map(tuple))


@st.composite
def lexicon_and_texts(draw):
    # Small alphabets make prefix sharing, overlaps, repeats and duplicates common.
    ngrams = draw(st.lists(_ngram, min_size=0, max_size=40))
    # Also n-grams cut from the texts, so that long matches happen too.
    texts = draw(st.lists(st.lists(_token, max_size=30), min_size=1, max_size=5))
    for t in texts:
        for _ in range(draw(st.integers(0, 4))):
            s = draw(st.integers(0, max(0, len(t) - 1)))
            n = draw(st.integers(1, 8))
            if t[s : s + n]:
                ngrams.insert(draw(st.integers(0, len(ngrams))), tuple(t[s : s + n]))
    freqs = draw(st.lists(st.integers(0, 10**6), min_size=len(ngrams), max_size=len(ngrams)))
    min_len = draw(st.integers(1, 8))
    max_len = draw(st.integers(min_len, 8))
    return ngrams, freqs, texts, min_len, max_len


@settings(max_examples=300, deadline=None)
@given(lexicon_and_texts())
def test_matcher_equals_the_naive_loop(case):
    ngrams, freqs, texts, min_len, max_len = case
    m = NgramMatcher(ngrams, freqs, min_len, max_len)
    index = ngram_index(ngrams)
    expected = [naive_matches(t, index, min_len, max_len) for t in texts]
    batch = m.match_batch(texts)
    # Same matches in the same (released enumeration) order, per sequence and in one batch.
    assert as_lists(batch) == expected
    assert [as_lists(m.match(t))[0] for t in texts] == expected
    assert batch.freq.tolist() == [freqs[i - 1] for i in batch.ngram_id.tolist()]
    assert batch.seq_lengths.tolist() == [len(t) for t in texts]
    # The padded-array form gives the same answer whatever the padding holds.
    width = max(len(t) for t in texts)
    padded = np.full((len(texts), width), 3, np.int64)
    for i, t in enumerate(texts):
        padded[i, : len(t)] = t
    assert as_lists(m.match_batch(padded, lengths=[len(t) for t in texts])) == expected


# -------------------------------------------------------------------------------- released keep rules


def released_zen2(matches: list[tuple[int, int, int]], n_tokens: int, max_seq_len: int, m: int):
    """The released ZEN 2.0 selection, written as the released code does it."""
    kept = sorted(matches, key=lambda x: x[0])
    cap = math.ceil((n_tokens / max_seq_len) * m)
    return kept[:cap] if len(kept) > cap else kept


@settings(max_examples=200, deadline=None)
@given(lexicon_and_texts(), st.integers(0, 12), st.integers(0, 20))
def test_zen2_selection_equals_the_released_code(case, extra_len, max_ngram):
    ngrams, freqs, texts, _, _ = case
    m = NgramMatcher(ngrams, freqs, min_len=1, max_len=8)  # selection must drop 1- and 8-grams itself
    index = ngram_index(ngrams)
    max_seq_len = max(len(t) for t in texts) + extra_len or 1
    got = select_released(m.match_batch(texts), "zen2", max_seq_len, max_ngram)
    expected = [released_zen2(naive_matches(t, index, 2, 7), len(t), max_seq_len, max_ngram) for t in texts]
    assert as_lists(got) == expected


@settings(max_examples=100, deadline=None)
@given(lexicon_and_texts(), st.integers(0, 20), st.integers(0, 2**32 - 1))
def test_zen1_selection_keeps_a_random_capped_subset(case, max_ngram, seed):
    ngrams, freqs, texts, _, _ = case
    m = NgramMatcher(ngrams, freqs, min_len=1, max_len=8)
    index = ngram_index(ngrams)
    max_seq_len = max(len(t) for t in texts) or 1
    matches = m.match_batch(texts)
    got = as_lists(select_released(matches, "zen1", max_seq_len, max_ngram, rng=seed))
    assert got == as_lists(select_released(matches, "zen1", max_seq_len, max_ngram, rng=np.random.default_rng(seed)))
    for kept, t in zip(got, texts):
        full = naive_matches(t, index, 2, 7)
        cap = math.ceil((len(t) / max_seq_len) * max_ngram)
        assert len(kept) == min(len(full), cap)
        assert len(set(kept)) == len(kept) and set(kept) <= set(full)


def test_zen1_selection_is_really_random():
    m = NgramMatcher([(1, 1)], [1])
    matches = m.match([1] * 12)  # 11 matches, cap 2
    kept = {tuple(as_lists(select_released(matches, "zen1", 12, 2, rng=s))[0]) for s in range(20)}
    assert len(kept) > 5
    with pytest.raises(ValueError, match="pass rng"):
        select_released(matches, "zen1", 12, 2)


def test_released_cap_agrees_with_math_ceil_including_float_rounding():
    lengths = np.arange(0, 1025)
    for max_seq_len in (7, 16, 100, 128, 384, 512, 1024):
        for m in (1, 3, 8, 20, 128):
            n = lengths[lengths <= max_seq_len]
            expected = [math.ceil((int(x) / max_seq_len) * m) for x in n]
            assert released_cap(n, max_seq_len, m).tolist() == expected


def test_select_released_rejects_bad_settings():
    matches = NgramMatcher([(1, 2)], [1]).match_batch([[1, 2, 1, 2]])
    with pytest.raises(ValueError, match="version must be one of zen1, zen2"):
        select_released(matches, "zen3", 8)
    with pytest.raises(ValueError, match="sequence 0 has 4 tokens, more than max_seq_len=3"):
        select_released(matches, "zen2", 3)


# -------------------------------------------------------------------------------- released fixtures


def load_fixture(name: str):
    torch = pytest.importorskip("torch")
    from zencli.lexicon.ngram_file import Lexicon
    from zencli.text.vocab import Vocab

    d = FIXTURES / name
    inputs = torch.load(d / "inputs.pt", weights_only=True)
    vocab = Vocab.load(d / "vocab.txt")
    lexicon = Lexicon.load(d / "ngram.txt")
    matcher = NgramMatcher.from_lexicon(lexicon, vocab.get)  # zen's default lengths 2..8
    token_ids = [[vocab.token_to_id(t) for t in row] for row in inputs["tokens"]]
    return inputs, lexicon, matcher, token_ids


def test_zen2_fixture_slots_are_rebuilt_exactly():
    inputs, lexicon, matcher, token_ids = load_fixture("zen2_ref")
    max_seq_len = inputs["input_ids"].shape[1]  # 16
    n_slots = inputs["input_ngram_ids"].shape[1]  # 8 = max_ngram_in_seq
    matches = matcher.match_batch(token_ids)
    # zen's own matcher also finds the 8-gram (id 13); row 0 has 10 released matches + that one.
    assert 13 in matches.ngram_id[matches.seq == 0].tolist()
    assert matches.counts().tolist() == [11, 9]
    kept = select_released(matches, "zen2", max_seq_len, n_slots)
    slots = kept.padded(n_slots)
    for ours, theirs in (("ngram_ids", "input_ngram_ids"), ("ngram_starts", "ngram_starts"),
                         ("ngram_lengths", "ngram_lengths"), ("ngram_freqs", "ngram_freqs"),
                         ("ngram_mask", "ngram_attention_mask")):
        assert slots[ours].tolist() == inputs[theirs].tolist(), ours
    # Row 0 is capped from 10 to ceil(15 / 16 * 8) = 8 by dropping the two highest ids.
    assert kept.counts().tolist() == [8, 7]
    for b, strings in enumerate(inputs["ngram_strings"]):
        ids = [i for i, _, _, _ in kept.sequence(b)]
        assert ["".join(lexicon.ngrams[i - 1]) for i in ids] == strings


def test_zen1_fixture_kept_ngrams_are_a_capped_subset_of_the_matches():
    inputs, lexicon, matcher, token_ids = load_fixture("zen1_ref")
    max_seq_len = inputs["input_ids"].shape[1]
    n_slots = inputs["input_ngram_ids"].shape[1]
    matches = matcher.match_batch(token_ids)
    full = select_released(matches, "zen2", max_seq_len, 10**6)  # released lengths, no cap
    for b in range(len(token_ids)):
        n = int(inputs["ngram_attention_mask"][b].sum())
        theirs = set(zip(*(inputs[k][b, :n].tolist() for k in
                          ("input_ngram_ids", "ngram_starts", "ngram_lengths", "ngram_freqs"))))
        assert n == math.ceil(len(token_ids[b]) / max_seq_len * n_slots) < len(full.sequence(b))
        assert theirs <= set(full.sequence(b))
        for seed in range(5):
            ours = select_released(matches, "zen1", max_seq_len, n_slots, rng=seed).sequence(b)
            assert len(ours) == n and set(ours) <= set(full.sequence(b))


# ------------------------------------------------------------------------------------- the benchmark


def _corpus(path: Path, lines: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    words = ["北京", "大学", "学生", "图书馆", "中国", "人民", "银行", "发布", "新", "政策", "的"]
    text = "".join("".join(rng.choice(words, size=12)) + "\n" for _ in range(lines))
    path.write_text(text, encoding="utf-8")
    return path


def test_bench_run_checks_and_times_every_method(tmp_path):
    from zencli.bench.matcher import run

    train, dev = _corpus(tmp_path / "train.txt", 200, 0), _corpus(tmp_path / "dev.txt", 30, 1)
    steps: list[str] = []
    report = run(train=train, dev=dev, min_freq=5, seq_len=32, batch_size=4, repeats=2, advance=steps.append)
    assert report["identical_to_naive"] is True
    assert report["lexicon"]["ngrams"] > 20 and report["data"]["matches"] > 0
    assert [r["method"] for r in report["rows"]][0] == "naive dict loop (released)"
    assert len(steps) == 2 * len(report["rows"]) == 10
    for r in report["rows"]:
        assert r["tokens_per_s"] > 0 and len(r["wall_s"]) == 2
    assert report["rows"][0]["speedup"] == 1.0


def test_bench_cli_writes_json_and_uses_a_given_lexicon(tmp_path):
    from typer.testing import CliRunner

    from zencli.cli.app import app

    dev = _corpus(tmp_path / "dev.txt", 20, 2)
    lex = tmp_path / "ngram.txt"
    lex.write_text("北 京,50\n大 学,40\n图 书 馆,30\n中 国 人,3\n", encoding="utf-8")
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(app, ["bench", "matcher", "--lexicon", str(lex), "--dev", str(dev), "--seq-len", "16",
                                   "--repeats", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["lexicon"]["ngrams"] == 4 and report["lexicon"]["source"] == str(lex)
    assert report["identical_to_naive"] is True and len(report["rows"]) == 5


def test_bench_rejects_bad_settings(tmp_path):
    from zencli.bench.matcher import run
    from zencli.errors import ZenError

    train = _corpus(tmp_path / "train.txt", 5, 0)
    with pytest.raises(ZenError, match="--seq-len: expected an integer >= 1, got 0"):
        run(train=train, dev=train, seq_len=0)
    with pytest.raises(ZenError, match="is empty; lower --min-freq"):
        run(train=train, dev=train, min_freq=10**6)
