"""Shard storage and the memory-mapped dataset: records, the batch fast path, checksums, damage."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest
import torch

from tests.test_pretraining_data import CHARS, LEXICON_WORDS, SPECIALS, make_inputs
from zencli.data.collate import collate
from zencli.data.features import RECORD_KEYS
from zencli.data.pretraining import generate_shards
from zencli.data.shards import (
    COLUMNS,
    MANIFEST_NAME,
    PretrainShards,
    read_manifest,
    token_dtype,
    write_shard,
)
from zencli.errors import WriteError, ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.vocab import Vocab
from zencli.train.data import IndexedBatches


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shards")
    corpus, vocab, lexicon = make_inputs(tmp, n_docs=80, seed=2)
    out = tmp / "out"
    generate_shards([corpus], vocab, lexicon, out, max_seq_len=48, examples_per_shard=30, seed=4)
    return out, vocab, lexicon


def test_records_have_the_featurizer_layout(shards):
    out, vocab_path, lexicon_path = shards
    ds = PretrainShards(out, vocab=vocab_path, lexicon=lexicon_path)
    lexicon = Lexicon.load(lexicon_path)
    assert len(ds) == read_manifest(out)["totals"]["examples"] and len(ds.names) >= 3
    dtypes = {"input_ids": np.int32, "token_type_ids": np.int8, "ngram_ids": np.int32, "ngram_starts": np.int32,
              "ngram_lengths": np.int32, "ngram_freqs": np.int64, "ngram_token_type_ids": np.int8,
              "mlm_labels": np.int64, "nsp_labels": np.int64}
    for i in (0, len(ds) // 2, len(ds) - 1):
        rec = ds[i]
        assert set(rec) == set(RECORD_KEYS) | {"mlm_labels", "nsp_labels"}
        assert {k: v.dtype for k, v in rec.items()} == {k: np.dtype(t) for k, t in dtypes.items()}
        n = len(rec["input_ids"])
        assert rec["mlm_labels"].shape == rec["token_type_ids"].shape == (n,) and rec["nsp_labels"].shape == ()
        seg_a = int(rec["token_type_ids"].argmax())
        assert (rec["ngram_token_type_ids"] == (rec["ngram_starts"] >= seg_a)).all()
        assert [lexicon.freqs[g - 1] for g in rec["ngram_ids"]] == rec["ngram_freqs"].tolist()
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds[-1]


def test_get_batch_equals_collate_of_the_records(shards):
    out, *_ = shards
    ds = PretrainShards(out)
    rng = np.random.default_rng(0)
    for size in (1, 7, 32):
        idx = rng.choice(len(ds), size=size, replace=False)
        fast = ds.get_batch(idx)
        slow = collate([ds[int(i)] for i in idx], pad_id=ds.pad_id)
        assert fast.keys() == slow.keys()
        for k in slow:
            assert fast[k].dtype == slow[k].dtype == torch.int64, k
            assert torch.equal(fast[k], slow[k]), k
        # slots padded to the longest row: no trailing all-padding slot reaches the model (see ZenModel)
        assert fast["ngram_ids"].shape[1] == 0 or fast["ngram_attention_mask"][:, -1].any()
    # the same indices through the training loop's batch source, fast path and record path
    a = IndexedBatches(range(len(ds)), ds.get_batch, seed=3)
    b = IndexedBatches(ds, partial(collate, pad_id=ds.pad_id), seed=3)
    for x in (a, b):
        x.configure(micro_batch_size=8, rank=0, world_size=1)
    for fa, fb, _ in zip(a, b, range(4)):
        assert all(torch.equal(fa[k], fb[k]) for k in fb)


def test_few_shards_are_open_at_once_and_a_machine_limit_is_named(shards, monkeypatch):
    """A 1G-character corpus makes thousands of shards: mapping every one ran out of file descriptors."""
    import errno

    import zencli.data.shards as shards_mod

    out, *_ = shards
    want = PretrainShards(out)
    want_batch = want.get_batch(np.arange(len(want)))
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert 1 <= shards_mod.open_shards_limit() <= shards_mod.OPEN_SHARDS
    monkeypatch.setattr(resource, "getrlimit", lambda _: (66, hard))  # ulimit -n 66: 3 shards of 11 columns
    assert shards_mod.open_shards_limit() == 3
    monkeypatch.setattr(shards_mod, "OPEN_SHARDS", 2)
    ds = PretrainShards(out)
    assert len(ds.names) >= 3
    assert np.array_equal(ds.lengths, want.lengths) and len(ds._open) == 0  # lengths: read, not kept open
    rng = np.random.default_rng(1)
    for _ in range(3):
        idx = rng.permutation(len(ds))  # every shard in one batch
        got = ds.get_batch(idx)
        assert all(torch.equal(got[k], want_batch[k][torch.from_numpy(idx)]) for k in got)
        assert len(ds._open) <= 2
    assert [ds[i]["input_ids"].tolist() for i in (0, len(ds) - 1)] == [want[i]["input_ids"].tolist()
                                                                       for i in (0, len(ds) - 1)]

    def too_many(*a, **k):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(shards_mod.np, "load", too_many)
    with pytest.raises(ZenError, match=r"cannot open \(Too many open files\); raise the limit \(ulimit -n\)"):
        PretrainShards(out).get_batch([0])


def test_a_batch_trains_the_pretraining_model(shards):
    from zencli.model.config import ZenConfig
    from zencli.model.pretraining import ZenForPreTraining

    out, *_ = shards
    ds = PretrainShards(out)
    torch.manual_seed(0)
    cfg = ZenConfig(vocab_size=len(SPECIALS) + len(CHARS), hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                    word_size=len(LEXICON_WORDS) + 1, num_hidden_word_layers=1)
    model = ZenForPreTraining(cfg)
    batch = ds.get_batch(np.arange(16))
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss) and model.bert.ngram_embeddings.table.weight.grad.abs().sum() > 0


def test_checksums_catch_the_wrong_vocab_or_lexicon(shards, tmp_path):
    out, _, lexicon_path = shards
    other_vocab = tmp_path / "vocab.txt"
    Vocab(SPECIALS + CHARS[::-1]).save(other_vocab)
    with pytest.raises(ZenError, match=r"vocab\.txt: not the vocabulary the shards in .* were made with"):
        PretrainShards(out, vocab=other_vocab)
    lex = Lexicon.load(lexicon_path)
    lex.freqs[0] += 1
    with pytest.raises(ZenError, match="not the n-gram lexicon the shards"):
        PretrainShards(out, lexicon=lex)


def test_missing_incomplete_and_damaged_folders(shards, tmp_path):
    out, *_ = shards
    with pytest.raises(ZenError, match="no such folder"):
        PretrainShards(tmp_path / "nothing")
    with pytest.raises(ZenError, match=r"manifest\.json: no such file"):
        PretrainShards(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"format": "something"}), encoding="utf-8")
    with pytest.raises(ZenError, match="not a zen-pretrain-shards manifest"):
        PretrainShards(tmp_path)

    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    ds = PretrainShards(copy)
    lengths = copy / ds.names[1] / "lengths.npy"
    np.save(lengths, np.load(lengths)[:-1])  # one row short
    damaged = PretrainShards(copy)
    with pytest.raises(ZenError, match=r"shard-00001.*damaged"):
        [damaged[i] for i in range(len(damaged))]
    (copy / ds.names[0] / "input_ids.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(ZenError, match=r"input_ids\.npy: cannot read"):
        PretrainShards(copy).get_batch([0])


def test_write_shard_is_all_or_nothing(tmp_path, monkeypatch):
    cols = {name: np.zeros(2 if name not in ("mlm_offsets", "ngram_offsets") else 3, np.int64) for name in COLUMNS}
    cols["input_ids"] = np.zeros((2, 8), np.uint16)
    calls = []
    real_save = np.save

    def failing_save(f, a):
        calls.append(1)
        if len(calls) == 5:
            raise OSError("disk full")
        real_save(f, a)

    monkeypatch.setattr(np, "save", failing_save)
    with pytest.raises(WriteError, match=r"shard-00000: cannot write: disk full"):
        write_shard(tmp_path, 0, cols, {"fingerprint": "x"})
    assert list(tmp_path.iterdir()) == []  # neither the shard nor its temp folder
    monkeypatch.setattr(np, "save", real_save)
    with pytest.raises(ValueError, match="missing"):
        write_shard(tmp_path, 0, {k: v for k, v in cols.items() if k != "seg_a"}, {})
    write_shard(tmp_path, 0, cols, {"fingerprint": "x"})
    assert [p.name for p in tmp_path.iterdir()] == ["shard-00000"]


def test_large_vocabularies_store_int32_token_ids(tmp_path):
    assert token_dtype(65_536) == np.uint16 and token_dtype(65_537) == np.int32
    corpus, _, lexicon = make_inputs(tmp_path, n_docs=30)
    big = tmp_path / "big.txt"
    Vocab(SPECIALS + CHARS + [f"x{i}" for i in range(70_000)]).save(big)
    out = tmp_path / "out"
    generate_shards([corpus], big, lexicon, out, max_seq_len=40, seed=0)
    ds = PretrainShards(out)
    assert np.load(out / ds.names[0] / "input_ids.npy", mmap_mode="r").dtype == np.int32
    ids = np.concatenate([ds[i]["input_ids"] for i in range(len(ds))])
    assert ids.max() >= 65_536  # random replacements drew from the whole vocabulary and survived storage


def test_pretraining_batches_from_data_workers_equal_the_in_process_ones(shards):
    # The training loop's source over the shards, run in 2 worker processes (train.data_workers: 2).
    from zencli.train.data import LengthGroupedBatches, PrefetchedBatches

    out, *_ = shards
    ds = PretrainShards(out)

    def source():
        src = LengthGroupedBatches(ds.lengths, ds.get_batch, seed=3, group=4)
        src.configure(micro_batch_size=8, rank=0, world_size=1)
        return src

    plain, prefetched = source(), PrefetchedBatches(source(), 2)
    for a, b, _ in zip(plain, prefetched, range(2 * len(ds) // 8)):  # two epochs
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        assert prefetched.state() == plain.state()
