"""Feature records: slots under the released and zen rules, the reference fixtures rebuilt from text,
char-level ids, WordPiece offsets."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from zencli.data.collate import collate
from zencli.data.features import (
    CharIds,
    NgramFeaturizer,
    char_token_ids,
    encode_with_offsets,
    released_slot_cap,
)
from zencli.lexicon.matcher import NgramMatcher
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.tokenizer import Tokenizer
from zencli.text.vocab import Vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CHARS = list("甲乙丙丁戊己庚辛")  # ids 5..12
VOCAB = Vocab(SPECIALS + CHARS + ["ab", "##c", "é"])
LEXICON = Lexicon(
    ngrams=[tuple(g) for g in ["甲乙", "乙丙", "甲乙丙", "丙丁", "丁戊己庚辛甲乙", "甲乙丙丁戊己庚辛",
                               "戊", "己庚", "庚辛", "辛甲", "甲甲", "乙乙乙"]],
    freqs=[50, 40, 30, 20, 10, 5, 99, 60, 70, 15, 25, 35],
)
ID = {c: VOCAB.get(c) for c in CHARS}


def ids(text: str) -> list[int]:
    return [ID[c] for c in text]


def slots(rec: dict) -> list[tuple[int, int, int]]:
    return list(zip(rec["ngram_ids"].tolist(), rec["ngram_starts"].tolist(), rec["ngram_lengths"].tolist()))


def released_reference(full: list[int], ngram_to_id: dict, max_seq_len: int, max_ngram_in_seq: int):
    """The released matching loop over the full token list, sorted by id (stable), proportional cap."""
    matches = []
    for p in range(2, 8):
        for q in range(len(full) - p + 1):
            i = ngram_to_id.get(tuple(full[q:q + p]))
            if i is not None:
                matches.append((i, q, p))
    matches.sort(key=lambda s: s[0])
    return matches[: math.ceil(len(full) / max_seq_len * max_ngram_in_seq)]


NGRAM_TO_ID = {tuple(ids("".join(g))): i for i, g in enumerate(LEXICON.ngrams, 1)}


# ---------------------------------------------------------------------------------------------- basics


def test_record_layout_and_types():
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=32)
    rec = f.featurize(ids("甲乙丙"), ids("丙丁"))
    assert rec["input_ids"].tolist() == [2, *ids("甲乙丙"), 3, *ids("丙丁"), 3]
    assert rec["token_type_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    # zen rules, slot order (start, length): 甲乙@1, 甲乙丙@1, 乙丙@2, 丙丁@5 (in B: type 1)
    assert slots(rec) == [(1, 1, 2), (3, 1, 3), (2, 2, 2), (4, 5, 2)]
    assert rec["ngram_token_type_ids"].tolist() == [0, 0, 0, 1]
    assert rec["ngram_freqs"].tolist() == [50, 30, 40, 20]
    assert rec["input_ids"].dtype == np.int32 and rec["ngram_freqs"].dtype == np.int64


def test_ngrams_never_cover_specials_or_cross_the_segment_boundary():
    # "乙丙" = last of A + first of B: the [SEP] between them keeps it from matching.
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=32)
    rec = f.featurize(ids("甲乙"), ids("丙丁"))
    got = slots(rec)
    assert (2, 2, 2) not in got and (3, 1, 3) not in got
    assert got == [(1, 1, 2), (4, 4, 2)]
    # A lexicon holding the specials themselves: still never matched over [CLS]/[SEP].
    lex = Lexicon([("[CLS]", "甲"), ("乙", "[SEP]"), ("[SEP]", "丙"), ("甲", "乙")], [1, 2, 3, 4])
    rec = NgramFeaturizer(VOCAB, lex, max_seq_len=32).featurize(ids("甲乙"), ids("丙"))
    assert slots(rec) == [(4, 1, 2)]


def test_released_type_rule_on_pairs():
    f = NgramFeaturizer(VOCAB, LEXICON, rules="released", max_seq_len=32)
    rec = f.featurize(ids("丁甲乙"), ids("甲乙丙"))
    # type 1 exactly for starts >= len(A) + 2 = 5
    assert ((rec["ngram_starts"] >= 5).astype(np.int8) == rec["ngram_token_type_ids"]).all()
    assert rec["ngram_token_type_ids"].any() and not rec["ngram_token_type_ids"].all()


def test_too_long_sequences_are_an_error_not_truncated():
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=6)
    f.featurize(ids("甲乙丙丁"))  # 6 with specials: fits
    with pytest.raises(ValueError, match="windows"):
        f.featurize(ids("甲乙丙丁戊"))
    with pytest.raises(ValueError, match="example 1"):
        f.featurize_batch([ids("甲"), ids("甲乙丙")], [None, ids("丙")])


def test_empty_segments_and_batches():
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=8)
    assert f.featurize_batch([]) == []
    rec = f.featurize([], [])
    assert rec["input_ids"].tolist() == [2, 3, 3] and rec["token_type_ids"].tolist() == [0, 0, 1]
    assert len(rec["ngram_ids"]) == 0


def test_batch_equals_one_by_one():
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=40)
    rng = np.random.default_rng(0)
    a = [rng.integers(5, 13, size=rng.integers(0, 15)) for _ in range(20)]
    b = [None if k % 3 == 0 else rng.integers(5, 13, size=rng.integers(0, 15)) for k in range(20)]
    batch = f.featurize_batch(a, b)
    for x, y, rec in zip(a, b, batch):
        one = f.featurize(x, y)
        assert one.keys() == rec.keys()
        for k in rec:
            np.testing.assert_array_equal(one[k], rec[k])


# ---------------------------------------------------------------------------------------------- rules


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(5, 12), max_size=14), min_size=1, max_size=6),
    st.lists(st.one_of(st.none(), st.lists(st.integers(5, 12), max_size=14)), min_size=6, max_size=6),
    st.sampled_from([(32, 128), (32, 8), (40, 5), (64, 3)]),
)
def test_released_rules_equal_the_released_loop(a, b, caps):
    """Over random pairs, the released slots (ids, starts, lengths, order) are exactly what the released
    loop over the full token list keeps (our lexicon holds no specials, so no match can cross them)."""
    max_seq_len, max_in_seq = caps
    b = b[: len(a)]
    f = NgramFeaturizer(VOCAB, LEXICON, rules="released", max_seq_len=max_seq_len, max_ngram_in_seq=max_in_seq)
    for x, y, rec in zip(a, b, f.featurize_batch(a, b)):
        full = [2, *x, 3] + ([] if y is None else [*y, 3])
        assert slots(rec) == released_reference(full, NGRAM_TO_ID, max_seq_len, max_in_seq)
        types = [0 if s < len(x) + 2 else 1 for s in rec["ngram_starts"].tolist()]
        assert rec["ngram_token_type_ids"].tolist() == types


def segment_matches(x: list[int], offset: int, lo: int, hi: int) -> set[tuple[int, int, int]]:
    return {(i, s + offset, n) for n in range(lo, hi + 1) for s in range(len(x) - n + 1)
            if (i := NGRAM_TO_ID.get(tuple(x[s:s + n]))) is not None}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(5, 12), max_size=20),
    st.one_of(st.none(), st.lists(st.integers(5, 12), max_size=20)),
    st.sampled_from([(2, 8), (1, 3), (3, 8)]),
)
def test_zen_rules_keep_every_match_in_position_order(x, y, lens):
    lo, hi = lens
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=64, min_len=lo, max_len=hi)
    rec = f.featurize(x, y)
    want = segment_matches(x, 1, lo, hi) | (set() if y is None else segment_matches(y, len(x) + 2, lo, hi))
    got = slots(rec)
    assert set(got) == want and len(got) == len(want)
    assert got == sorted(got, key=lambda t: (t[1], t[2]))


def test_zen_cap_prefers_longer_then_more_frequent_then_earlier():
    text = ids("甲乙丙丁戊己庚辛甲乙")
    full = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=64).featurize(text)
    assert len(full["ngram_ids"]) > 4
    capped = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=64, max_ngrams=4).featurize(text)
    got = slots(capped)
    # 8-gram 甲..辛, 7-gram 丁..乙, 3-gram 甲乙丙, then among the 2-grams the most frequent: 庚辛 (70)
    assert sorted(got, key=lambda t: (-t[2], t[1])) == [(6, 1, 8), (5, 4, 7), (3, 1, 3), (9, 7, 2)]
    assert got == sorted(got, key=lambda t: (t[1], t[2]))  # kept slots in position order
    # Equal length and frequency: the earlier one wins (甲乙 occurs at 1 and 9).
    twice = NgramFeaturizer(VOCAB, Lexicon([("甲", "乙")], [5]), max_seq_len=64, max_ngrams=1).featurize(text)
    assert slots(twice) == [(1, 1, 2)]


def test_released_rules_match_lengths_2_to_7_only_and_max_ngrams_caps_further():
    text = ids("甲乙丙丁戊己庚辛")  # holds the 8-gram, which the released loop never matches
    rel = NgramFeaturizer(VOCAB, LEXICON, rules="released", max_seq_len=64).featurize(text)
    assert 6 not in rel["ngram_ids"].tolist() and 7 not in rel["ngram_ids"].tolist()  # 8-gram, 1-gram
    capped = NgramFeaturizer(VOCAB, LEXICON, rules="released", max_seq_len=64, max_ngrams=2).featurize(text)
    assert slots(capped) == slots(rel)[:2]


def test_zen1_released_rules_keep_a_seeded_random_subset():
    text = ids("甲乙丙丁戊己庚辛甲乙丙")
    kw = dict(rules="released", released_version="zen1", max_seq_len=13, max_ngram_in_seq=4)
    everything = set(released_reference([2, *text, 3], NGRAM_TO_ID, 13, 1000))
    cap = released_slot_cap(len(text) + 2, 13, 4)
    assert len(everything) > cap
    runs = [slots(NgramFeaturizer(VOCAB, LEXICON, seed=s, **kw).featurize(text)) for s in (1, 1, 2)]
    assert runs[0] == runs[1]  # same seed, same draw
    for got in runs:
        assert len(got) == cap and set(got) <= everything
    many = {tuple(slots(NgramFeaturizer(VOCAB, LEXICON, seed=s, **kw).featurize(text))) for s in range(20)}
    assert len(many) > 1  # really random


def test_blocked_positions_drop_covering_ngrams_before_the_cap():
    text = ids("甲乙丙丁")
    f = NgramFeaturizer(VOCAB, LEXICON, rules="released", max_seq_len=6, max_ngram_in_seq=2)
    assert slots(f.featurize(text)) == [(1, 1, 2), (2, 2, 2)]  # cap 2 of 甲乙, 乙丙, 甲乙丙, 丙丁
    blocked = np.zeros(6, bool)
    blocked[2] = True  # 乙: everything but 丙丁 covers it
    assert slots(f.featurize(text, blocked=blocked)) == [(4, 3, 2)]
    with pytest.raises(ValueError, match="blocked mask 0"):
        f.featurize(text, blocked=np.zeros(4, bool))


def test_padded_slots_with_blocked_positions_equal_the_records_slots():
    """A shard's examples are matched as one padded grid with their masked positions blocked: the same slots,
    in the same order, as featurize_batch gives for the examples one list each."""
    rng = np.random.default_rng(0)
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=24)
    a = [rng.integers(5, 13, size=int(rng.integers(1, 10))) for _ in range(60)]
    b = [rng.integers(5, 13, size=int(rng.integers(1, 10))) for _ in range(60)]
    n_tok = np.array([len(x) + len(y) + 3 for x, y in zip(a, b)])
    grid = np.zeros((60, 24), np.int64)
    blocked = np.zeros((60, 24), bool)
    for i, (x, y) in enumerate(zip(a, b)):
        grid[i, : n_tok[i]] = [VOCAB.cls_id, *x, VOCAB.sep_id, *y, VOCAB.sep_id]
        blocked[i, : n_tok[i]] = rng.random(n_tok[i]) < 0.15
    records = f.featurize_batch(a, b, blocked=[blocked[i, : n_tok[i]] for i in range(60)])
    m = f.slots_of_padded(grid, n_tok, np.array([len(x) for x in a]), blocked=blocked)
    want = [(i, s, n, g) for i, r in enumerate(records)
            for g, s, n in zip(r["ngram_ids"].tolist(), r["ngram_starts"].tolist(), r["ngram_lengths"].tolist())]
    assert list(zip(m.seq.tolist(), m.start.tolist(), m.length.tolist(), m.ngram_id.tolist())) == want
    assert len(want) > 20  # the lexicon matched, and blocking dropped some but not all
    assert len(want) < len(f.slots_of_padded(grid, n_tok, np.array([len(x) for x in a])))
    with pytest.raises(ValueError, match="blocked has shape"):
        f.slots_of_padded(grid, n_tok, np.array([len(x) for x in a]), blocked=blocked[:, :5])


def test_matcher_argument_and_its_range_checked():
    m = NgramMatcher.from_lexicon(LEXICON, VOCAB.get, 2, 8)
    f = NgramFeaturizer(VOCAB, m, rules="released", max_seq_len=32)
    g = NgramFeaturizer(VOCAB, LEXICON, rules="released", max_seq_len=32)
    assert slots(f.featurize(ids("甲乙丙丁"))) == slots(g.featurize(ids("甲乙丙丁")))
    with pytest.raises(ValueError, match="need 1..8"):
        NgramFeaturizer(VOCAB, m, min_len=1)
    with pytest.raises(ValueError, match="rules"):
        NgramFeaturizer(VOCAB, LEXICON, rules="bert")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- fixtures


def rebuild_fixture(name: str, **kw) -> tuple[dict[str, torch.Tensor], dict, Lexicon]:
    d = FIXTURES / name
    vocab, lexicon = Vocab.load(d / "vocab.txt"), Lexicon.load(d / "ngram.txt")
    tok = Tokenizer.from_vocab(vocab)
    # The fixture was made with max_seq_len 16 and max_ngram_in_seq 8: row 0 (15 tokens) keeps
    # ceil(15/16·8) = 8 of its 10 matches, row 1 (14 tokens) ceil(14/16·8) = 7 of 9.
    f = NgramFeaturizer(vocab, lexicon, rules="released", max_seq_len=16, max_ngram_in_seq=8, **kw)
    recs = f.featurize_batch([tok.encode("北京大学的学生在图书馆学习"), tok.encode("中国人民银行")],
                             [None, tok.encode("发布新政策")])
    batch = collate(recs, pad_id=vocab.pad_id, length=16, n_slots=8)
    return batch, torch.load(d / "inputs.pt", weights_only=True), lexicon


FIELDS = {  # ours → inputs.pt
    "input_ids": "input_ids", "token_type_ids": "token_type_ids", "attention_mask": "attention_mask",
    "ngram_ids": "input_ngram_ids", "ngram_token_type_ids": "ngram_token_type_ids",
    "ngram_attention_mask": "ngram_attention_mask", "ngram_starts": "ngram_starts",
    "ngram_lengths": "ngram_lengths", "ngram_freqs": "ngram_freqs",
}


def test_zen2_fixture_rebuilt_from_text_exactly():
    batch, ref, lexicon = rebuild_fixture("zen2_ref")
    for ours, theirs in FIELDS.items():
        assert torch.equal(batch[ours], ref[theirs].long()), ours
    strings = [["".join(lexicon.ngrams[i - 1]) for i in row if i] for row in batch["ngram_ids"].tolist()]
    assert strings == ref["ngram_strings"]


def test_zen2_fixture_rebuilt_inputs_give_the_released_outputs():
    from zencli.model.released import import_released

    batch, _, _ = rebuild_fixture("zen2_ref")
    model = import_released(FIXTURES / "zen2_ref").model.eval()
    out = torch.load(FIXTURES / "zen2_ref" / "outputs.pt", weights_only=True)
    with torch.no_grad():
        got = model(**batch)
    torch.testing.assert_close(got.encoder.sequence_output, out["sequence_output"], atol=1e-5, rtol=0)
    torch.testing.assert_close(got.encoder.pooled_output, out["pooled_output"], atol=1e-5, rtol=0)


def test_zen1_fixture_same_slot_sets_and_outputs_in_any_slot_order():
    """ZEN 1.0 shuffles before capping, which cannot be replayed: compare the kept n-grams as sets. ZEN 1.0
    is blind to slot order (no positions in the n-gram tower, 0/1 fusion), so permuted slots must give
    the released outputs too; and the zen1 draw keeps `cap` of the sequence's matches."""
    from zencli.model.released import import_released

    batch, ref, _ = rebuild_fixture("zen1_ref")  # smallest ids, as the fixture happens to hold
    for ours, theirs in (("input_ids", "input_ids"), ("token_type_ids", "token_type_ids"),
                         ("attention_mask", "attention_mask")):
        assert torch.equal(batch[ours], ref[theirs].long())
    slot_keys = ("ngram_ids", "ngram_starts", "ngram_lengths", "ngram_token_type_ids")
    for b in range(2):
        ours = set(zip(*(batch[k][b].tolist() for k in slot_keys)))
        theirs = set(zip(*(ref[FIELDS[k]][b].tolist() for k in slot_keys)))
        assert ours == theirs
    g = torch.Generator().manual_seed(0)
    perm = torch.stack([torch.randperm(8, generator=g) for _ in range(2)])
    shuffled = dict(batch)
    for k in (*slot_keys, "ngram_freqs", "ngram_attention_mask"):
        shuffled[k] = batch[k].gather(1, perm)
    model = import_released(FIXTURES / "zen1_ref").model.eval()
    out = torch.load(FIXTURES / "zen1_ref" / "outputs.pt", weights_only=True)
    with torch.no_grad():
        got = model(**shuffled)
    torch.testing.assert_close(got.encoder.sequence_output, out["sequence_output"], atol=1e-5, rtol=0)

    drawn, _, _ = rebuild_fixture("zen1_ref", released_version="zen1", seed=3)
    every = set(zip(*(batch[k][0].tolist() for k in slot_keys)))  # row 0: 8 kept of 10 either way
    assert int(drawn["ngram_attention_mask"][0].sum()) == 8
    assert len(set(zip(*(drawn[k][0].tolist() for k in slot_keys))) - every) <= 2


# ---------------------------------------------------------------------------------------------- token ids


def test_char_token_ids_one_id_per_char():
    chars = list("甲A乙 c\u200bÉab") + ["ab"]
    got = char_token_ids(chars, VOCAB, lowercase=True)
    unk = VOCAB.unk_id
    # A→a and É→e (lower-cased, accent stripped, as the Tokenizer would) are not in VOCAB; c is "##c";
    # a space or a zero-width space keeps its position as [UNK] instead of being dropped.
    assert got.tolist() == [ID["甲"], unk, ID["乙"], unk, VOCAB.get("##c"), unk, unk, unk, unk, VOCAB.get("ab")]
    assert len(got) == len(chars) and got.dtype == np.int32


def test_char_ids_normalise_like_the_tokenizer():
    v = Vocab(SPECIALS + ["a", "e", "##b", "Q"])
    lower = CharIds(v, lowercase=True)
    assert lower(list("AÉbQq")).tolist() == [5, 6, 7, 8, 1]  # A→a, É→e, b→##b, Q as written, q unknown
    cased = CharIds(v, lowercase=False)
    assert cased(list("AÉbQ")).tolist() == [1, 1, 7, 8]
    tok = Tokenizer(v, lowercase=True)
    assert CharIds.from_tokenizer(tok)(list("AÉ")).tolist() == [5, 6]


def test_char_ids_read_a_char_unknown_in_one_width_in_the_other():
    v = Vocab(SPECIALS + ["２", "##０", "，", "ｃ", "!"])
    ids = {t: v.get(t) for t in ("２", "##０", "，", "ｃ", "!")}
    assert CharIds(v)(list("20,C！x")).tolist() == [ids["２"], ids["##０"], ids["，"], ids["ｃ"], ids["!"], 1]
    assert CharIds(v, width_fallback=False)(list("20,C")).tolist() == [1, 1, 1, 1]
    assert CharIds.from_tokenizer(Tokenizer(v, width_fallback=False))(list("2")).tolist() == [1]


def test_encode_with_offsets_spans_point_into_the_text():
    v = Vocab(SPECIALS + list("北京") + ["hello", "##s", ",", "world"])
    tok = Tokenizer(v, lowercase=True)
    text = "北京 Hellos, World!"
    got_ids, spans = encode_with_offsets(tok, text)
    assert [v.id_to_token(i) for i in got_ids.tolist()] == ["北", "京", "hello", "##s", ",", "world", "[UNK]"]
    assert [text[s:e] for s, e in spans.tolist()] == ["北", "京", "Hello", "s", ",", "World", "!"]
    assert got_ids.tolist() == tok.encode(text)
    assert spans.shape == (7, 2)
