"""Collation: per-batch padding, model-argument keys, label pass-through, bucketing; batches run in ZenModel."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from zencli.data.collate import MODEL_KEYS, bucket_batches, collate
from zencli.data.features import NgramFeaturizer
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.text.vocab import Vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = Vocab(SPECIALS + list("甲乙丙丁戊己庚辛"))
LEXICON = Lexicon([tuple(g) for g in ["甲乙", "乙丙", "甲乙丙", "丙丁", "戊己庚", "庚辛"]], [9, 8, 7, 6, 5, 4])


def featurize(texts_a, texts_b=None, **kw):
    f = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=64, **kw)
    enc = lambda t: [VOCAB.get(c) for c in t]  # noqa: E731
    return f.featurize_batch([enc(t) for t in texts_a], None if texts_b is None else
                             [None if t is None else enc(t) for t in texts_b])


def test_pads_to_the_batch_maximum_with_the_right_values():
    recs = featurize(["甲乙丙丁", "戊", "庚辛甲乙丙"], [None, "丙丁", None])
    batch = collate(recs)
    assert set(batch) == set(MODEL_KEYS)
    lens = [len(r["input_ids"]) for r in recs]
    slots = [len(r["ngram_ids"]) for r in recs]
    assert lens == [6, 6, 7] and slots == [4, 1, 4]
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert batch[key].shape == (3, 7) and batch[key].dtype == torch.int64
    for key in ("ngram_ids", "ngram_starts", "ngram_lengths", "ngram_freqs", "ngram_token_type_ids",
                "ngram_attention_mask"):
        assert batch[key].shape == (3, 4) and batch[key].dtype == torch.int64
    assert batch["attention_mask"].tolist() == [[1] * 6 + [0], [1] * 6 + [0], [1] * 7]
    assert batch["ngram_attention_mask"][1].tolist() == [1, 0, 0, 0]
    assert batch["input_ids"][1].tolist() == [*recs[1]["input_ids"].tolist(), 0]
    assert batch["token_type_ids"][1].tolist() == [0, 0, 0, 1, 1, 1, 0]
    for key in ("ngram_ids", "ngram_starts", "ngram_lengths", "ngram_freqs", "ngram_token_type_ids"):
        assert batch[key][1, 1:].eq(0).all(), key
        for b, r in enumerate(recs):
            assert batch[key][b, : slots[b]].tolist() == r[key].tolist()
    assert batch["ngram_token_type_ids"][1, 0].item() == 1  # 丙丁 in segment B
    assert collate(recs, pad_id=7)["input_ids"][1, 6:].tolist() == [7]


def test_no_trailing_all_padding_slot_reaches_the_model():
    # What lets ZenModel skip its trimming checks (host syncs) on a GPU: the last slot column is used by some
    # row, and a batch without any n-gram has no slot column at all.
    batch = collate(featurize(["戊", "甲乙丙丁", "丁"]))
    assert batch["ngram_ids"].shape == (3, 4) and batch["ngram_attention_mask"][:, -1].tolist() == [0, 1, 0]
    assert (batch["ngram_lengths"][:, -1] > 0).any()
    empty = collate(featurize(["戊", "丁甲"]))
    assert empty["ngram_ids"].shape == empty["ngram_lengths"].shape == (2, 0)


def test_keys_are_zen_model_forward_arguments():
    params = inspect.signature(ZenModel.forward).parameters
    assert set(MODEL_KEYS) <= set(params)


def test_fixed_and_rounded_sizes():
    recs = featurize(["甲乙丙", "甲"])
    batch = collate(recs, length=9, n_slots=5)
    assert batch["input_ids"].shape == (2, 9) and batch["ngram_ids"].shape == (2, 5)
    batch = collate(recs, multiple_of=8)
    assert batch["input_ids"].shape == (2, 8) and batch["ngram_ids"].shape == (2, 8)
    with pytest.raises(ValueError, match="length=3 but record 0 has 5 tokens"):
        collate(recs, length=3)


def test_labels_pass_through_padded_with_ignore_index():
    recs = featurize(["甲乙丙", "甲"])
    recs[0]["labels"] = np.array([-100, 1, 2, 3, -100])
    recs[1]["labels"] = np.array([-100, 4, -100])
    for r, y in zip(recs, (1, 0)):
        r["nsp_labels"] = np.int64(y)
    recs[0]["soft"] = np.array([[0.5, 0.5]] * 5, np.float32)
    recs[1]["soft"] = np.array([[1.0, 0.0]] * 3, np.float32)
    batch = collate(recs, length=6)
    assert batch["labels"].tolist() == [[-100, 1, 2, 3, -100, -100], [-100, 4, -100, -100, -100, -100]]
    assert batch["labels"].dtype == torch.int64
    assert batch["nsp_labels"].tolist() == [1, 0]
    assert batch["soft"].shape == (2, 6, 2) and batch["soft"].dtype == torch.float32
    assert batch["soft"][1, 3:].eq(-100).all()
    del recs[1]["labels"]
    with pytest.raises(ValueError, match="record 1 has keys"):
        collate(recs)


def test_records_without_ngrams_give_a_bert_batch():
    recs = [{"input_ids": np.array([2, 5, 3]), "token_type_ids": np.zeros(3, np.int8)},
            {"input_ids": np.array([2, 3])}]
    with pytest.raises(ValueError, match="keys"):
        collate(recs)
    batch = collate(recs[:1])
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask"}


def tiny_model(encoder: str) -> ZenModel:
    torch.manual_seed(0)
    cfg = ZenConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=64, word_size=len(LEXICON) + 1,
                    num_hidden_word_layers=1, encoder=encoder)
    return ZenModel(cfg).eval()


@pytest.mark.parametrize("encoder", ["zen2", "zen1", "bert"])
def test_a_collated_batch_runs_and_padding_changes_nothing(encoder):
    """Each example's outputs at its real positions are the same alone and inside a padded batch."""
    texts_a, texts_b = ["甲乙丙丁戊己庚辛", "戊", "庚辛甲乙丙", "丁"], [None, "甲乙丙丁", None, None]
    recs = featurize(texts_a, texts_b)
    model = tiny_model(encoder)
    batch = collate(recs)
    with torch.no_grad():
        out = model(**batch)
        assert out.sequence_output.shape == (4, batch["input_ids"].shape[1], 16)
        for b, r in enumerate(recs):
            alone = model(**collate([r]))
            n = len(r["input_ids"])
            torch.testing.assert_close(out.sequence_output[b, :n], alone.sequence_output[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(out.pooled_output[b], alone.pooled_output[0], atol=1e-5, rtol=0)
    # The slots matter (so the check above is not vacuous): without them the outputs change.
    if encoder != "bert":
        with torch.no_grad():
            plain = model(**{k: v for k, v in batch.items() if not k.startswith("ngram_")})
        assert not torch.allclose(plain.sequence_output, out.sequence_output, atol=1e-4)


def test_a_batch_with_no_ngram_matches_runs():
    recs = featurize(["丁戊", "辛"])
    batch = collate(recs)
    assert batch["ngram_ids"].shape == (2, 0)
    with torch.no_grad():
        out = tiny_model("zen2")(**batch)
    assert out.sequence_output.shape == (2, 4, 16)


def test_bucketing_is_deterministic_complete_and_reduces_padding():
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 200, size=1000)
    a = bucket_batches(lengths, 16, seed=5, chunk_batches=10)
    b = bucket_batches(lengths, 16, seed=5, chunk_batches=10)
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert sorted(np.concatenate(a).tolist()) == list(range(1000))
    c = bucket_batches(lengths, 16, seed=6, chunk_batches=10)
    assert [x.tolist() for x in a] != [x.tolist() for x in c]

    def padded(batches):
        return sum(int(lengths[x].max()) * len(x) for x in batches)

    random_batches = np.array_split(rng.permutation(1000), 63)
    assert padded(a) < 0.7 * padded(random_batches)
    dropped = bucket_batches(lengths, 16, seed=5, drop_last=True)
    assert all(len(x) == 16 for x in dropped) and len(dropped) == 1000 // 16
