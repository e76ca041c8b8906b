"""`zen bench model`: FLOP formula, benchmark inputs, report structure, CLI (tiny models, 1–2 steps)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from tests.conftest import PD98, needs_data
from zencli.bench.encoder_batches import (
    LENGTH_DIST,
    Slots,
    computed_slots,
    drop_slots_covering,
    encoder_inputs,
    make_batches,
    real_slots,
    synthetic_chars,
    synthetic_slots,
    text_chars,
)
from zencli.bench.flops import forward_flops, training_flops
from zencli.bench.model import (
    DENSE_VARIANT,
    ENCODERS,
    ModelBenchSettings,
    ModelSize,
    model_config,
    parse_size,
    run,
)
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.lexicon.matcher import NgramMatcher
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.pretraining import IGNORE_INDEX, ZenForPreTraining

MICRO = ModelSize("micro", 2, 32, 2, 64, 1)
SMALL_RUN = dict(batch=2, seq_len=16, slots=12, ngram_rows=300, vocab_size=200, steps=2, warmup=1, infer_steps=2,
                 curve_steps=3, gemm_size=64, gemm_seconds=0.01)


def _batch(seed: int = 0, **kw):
    args = dict(batch=3, seq_len=24, slots=16, ngram_rows=500, vocab_size=300, matcher=None, ngram_rate=0.4)
    args.update(kw)
    chars = synthetic_chars(5000, args["vocab_size"], np.random.default_rng(seed))
    return make_batches(1, chars=chars, seed=seed, **args)[0]


@pytest.mark.parametrize("encoder", ENCODERS)
def test_flop_formula_equals_torch_flop_counter(encoder):
    # The analytic counts must equal what torch's FlopCounterMode sees in a training step (math
    # attention path): the forward, and forward + backward.
    b = _batch()
    torch.manual_seed(0)
    model = ZenForPreTraining(model_config(MICRO, encoder, vocab_size=300, ngram_rows=500)).train()
    with FlopCounterMode(display=False) as fwd:
        out = model(b["input_ids"], mlm_labels=b["mlm_labels"], nsp_labels=b["nsp_labels"],
                    **encoder_inputs(b, model.config.has_ngrams))
    masked = int((b["mlm_labels"] != IGNORE_INDEX).sum())
    rows = real_slots(b)  # the tower's linears run on the real slots only (packed on a CPU)
    assert rows < 3 * computed_slots(b)
    expected = forward_flops(model.config, 3, 24, computed_slots(b), masked, heads=True, slot_rows=rows)
    assert fwd.get_total_flops() == expected
    with FlopCounterMode(display=False) as bwd:
        out.loss.backward()
    total = training_flops(model.config, 3, 24, computed_slots(b), masked, rows)
    assert fwd.get_total_flops() + bwd.get_total_flops() == total


def test_flop_formula_by_hand_and_ngram_terms():
    cfg = model_config(MICRO, "bert", vocab_size=100, ngram_rows=50)
    B, L, H, I = 2, 8, 32, 64
    per_layer = 2 * B * L * H * (4 * H + 2 * I) + 4 * B * L * L * H
    assert forward_flops(cfg, B, L, 5, 3, heads=False) == 2 * per_layer + 2 * B * H * H
    assert forward_flops(cfg, B, L, 5, 3, heads=True) == (2 * per_layer + 2 * B * H * H + 2 * 3 * H * H
                                                          + 2 * 3 * H * 100 + 2 * B * H * 2)
    zen1 = model_config(MICRO, "zen1", vocab_size=100, ngram_rows=50)
    tower = 2 * B * 5 * H * (4 * H + 2 * I) + 4 * B * 25 * H
    fusion = 2 * B * L * 5 * H  # P·g once, after the one n-gram layer (the second char layer adds it again)
    assert forward_flops(zen1, B, L, 5, 3, heads=False) - forward_flops(cfg, B, L, 5, 3, heads=False) == tower + fusion
    assert forward_flops(zen1, B, L, 0, 3, heads=False) == forward_flops(cfg, B, L, 0, 3, heads=False)


def test_synthetic_slots_are_realistic_and_inside_the_text():
    rng = np.random.default_rng(0)
    B, L, M, rows = 64, 128, 128, 100_000
    s = synthetic_slots(B, L, M, rows, 0.4, rng)
    used = s.lengths > 0
    counts = used.sum(1)
    assert abs(counts.mean() - 0.4 * (L - 3)) < 3  # ~50 of 128 slots, as measured on released data
    assert np.all(used[:, :-1] >= used[:, 1:])  # left-packed
    assert np.all(s.starts[used] >= 1) and np.all(s.starts[used] + s.lengths[used] <= L - 1)
    assert set(np.unique(s.lengths[used])) <= set(range(2, 2 + len(LENGTH_DIST)))
    assert np.mean(s.lengths[used] == 2) == pytest.approx(LENGTH_DIST[0], abs=0.05)
    assert s.ids[used].min() >= 1 and s.ids[used].max() < rows
    assert np.all(s.ids[~used] == 0) and np.all(s.freqs[~used] == 0) and np.all(s.freqs[used] > 0)
    # frequent n-grams have small ids: a batch repeats some rows, as real text does
    assert len(np.unique(s.ids[used])) < used.sum()


def test_drop_slots_covering_masked_positions_left_packs_the_rest():
    slots = Slots(ids=np.array([[5, 6, 7, 0]]), starts=np.array([[1, 3, 5, 0]]),
                  lengths=np.array([[2, 2, 3, 0]]), freqs=np.array([[50, 60, 70, 0]]))
    masked = np.zeros((1, 10), bool)
    masked[0, 4] = True  # inside slot 1 (chars 3..4) only
    out = drop_slots_covering(slots, masked)
    assert out.ids.tolist() == [[5, 7, 0, 0]]
    assert out.starts.tolist() == [[1, 5, 0, 0]]
    assert out.lengths.tolist() == [[2, 3, 0, 0]]
    assert out.freqs.tolist() == [[50, 70, 0, 0]]


def test_batches_have_the_pretraining_layout():
    b = _batch(seed=3)
    ids, labels = b["input_ids"], b["mlm_labels"]
    assert ids.shape == (3, 24) and ids.dtype == torch.long
    assert torch.all(ids[:, 0] == 101) and torch.all(ids[:, -1] == 102)  # [CLS] … [SEP]
    masked = labels != IGNORE_INDEX
    assert torch.all(masked.sum(1) >= 1) and torch.all(ids[masked] == 103)  # [MASK]
    assert not masked[:, 0].any() and not masked[:, -1].any()
    assert set(b["nsp_labels"].tolist()) <= {0, 1}
    slot_used = b["ngram_lengths"] > 0
    assert torch.equal(b["ngram_attention_mask"].bool(), slot_used)
    assert torch.all(b["ngram_ids"][~slot_used] == 0)
    assert slot_used[:, -1].any() and b["ngram_ids"].shape[1] <= 16  # padded to the longest row, as collate does


def test_lexicon_slots_are_real_matches_that_avoid_masked_chars(tmp_path: Path):
    text = tmp_path / "t.txt"
    text.write_text("甲乙丙丁甲乙戊己庚辛甲乙丙丁壬癸\n" * 20, encoding="utf-8")
    lex_path = tmp_path / "ngram.txt"
    lex_path.write_text("甲 乙,40\n丙 丁,30\n甲 乙 丙,20\n", encoding="utf-8")
    chars = text_chars(text, 300, max_chars=10_000)
    lex = Lexicon.load(lex_path)
    matcher = NgramMatcher.from_lexicon(lex, chars.vocab.get)
    b = make_batches(2, batch=4, seq_len=20, slots=10, ngram_rows=50, vocab_size=300, chars=chars,
                     matcher=matcher, ngram_rate=0.0, seed=1)
    id_of = {g: i + 1 for i, g in enumerate(lex.ngrams)}
    inv = {v: k for k, v in chars.vocab.items()}
    n_slots = 0
    for batch in b:
        original = torch.where(batch["mlm_labels"] != IGNORE_INDEX, batch["mlm_labels"], batch["input_ids"])
        masked = batch["mlm_labels"] != IGNORE_INDEX
        for r in range(4):
            for k in range(batch["ngram_lengths"].shape[1]):
                n = int(batch["ngram_lengths"][r, k])
                if n == 0:
                    continue
                n_slots += 1
                s = int(batch["ngram_starts"][r, k])
                gram = tuple(inv[int(t)] for t in original[r, s:s + n])
                assert id_of[gram] == int(batch["ngram_ids"][r, k])
                assert int(batch["ngram_freqs"][r, k]) == lex.freqs[id_of[gram] - 1]
                assert not masked[r, s:s + n].any()
    assert n_slots > 10


def test_run_report_structure_and_positive_ratios():
    report = run(ModelBenchSettings(sizes=[MICRO], dtypes=["fp32", "bf16"], **SMALL_RUN))
    res = report["results"][0]
    names = {(r["encoder"], r["dtype"]) for r in res["rows"]}
    assert names == {(e, p) for e in (*ENCODERS, DENSE_VARIANT) for p in ("fp32", "bf16")}
    for row in res["rows"]:
        tr = row["train"]
        assert tr["steps_timed"] == 2
        for key in ("fwd_ms", "bwd_ms", "opt_ms", "step_ms", "tokens_per_s", "gflops_per_s", "pct_of_gemm_peak",
                    "opt_over_fwd_bwd"):
            assert math.isfinite(tr[key]) and tr[key] > 0, key
        assert tr["step_ms"] >= tr["step_min_ms"] > 0
        assert row["train_ratio_vs_bert"] > 0 and row["fwd_bwd_ratio_vs_bert"] > 0
        if row["encoder"] == "bert":
            assert row["train_ratio_vs_bert"] == 1.0
        if row["encoder"] != DENSE_VARIANT:
            assert row["infer"]["tokens_per_s"] > 0 and row["infer_ratio_vs_bert"] > 0
        else:
            assert "infer" not in row
        if row["dtype"] == "bf16":
            assert row["bf16_train_speedup"] > 0
    assert res["params"]["zen2"] > res["params"]["bert"]
    acc = {a["encoder"]: a for a in res["bf16_accuracy"]}
    assert set(acc) == set(ENCODERS)
    for a in acc.values():
        assert 0 < a["seq_rel_err"] < 0.05 and a["mlm_loss_abs_diff"] < 0.05  # bf16 is close, but not exact
    curve = report["bf16_training"]
    assert len(curve["loss_fp32"]) == len(curve["loss_bf16"]) == 3
    assert curve["loss_fp32"][0] == pytest.approx(curve["loss_bf16"][0], rel=0.01)
    assert report["gemm_peak_gflops"]["fp32"]["start"] > 0
    assert 0 < report["inputs"]["slots_filled_per_seq"] <= 12
    s = report["summary"]
    assert set(s["zen2_train_ratio_vs_bert"]) == {"micro/fp32", "micro/bf16"}
    assert isinstance(s["bf16_default_ok"], bool) and isinstance(s["optimizer_cheaper_than_fwd_bwd"], bool)
    json.dumps(report)  # JSON-ready


def test_run_is_deterministic_in_its_inputs_and_losses():
    settings = ModelBenchSettings(sizes=[MICRO], encoders=["zen2"], dtypes=["fp32", "bf16"], dense_opt=False,
                                  **SMALL_RUN)
    a = run(settings)
    b = run(settings)
    assert a["bf16_training"]["loss_fp32"] == b["bf16_training"]["loss_fp32"]
    assert a["bf16_training"]["loss_bf16"] == b["bf16_training"]["loss_bf16"]
    assert a["results"][0]["bf16_accuracy"] == b["results"][0]["bf16_accuracy"]
    assert "train_ratio_vs_bert" not in a["results"][0]["rows"][0]  # no baseline measured


def test_one_thread_is_judged_by_cpu_time_and_threads_are_restored():
    before = torch.get_num_threads()
    report = run(ModelBenchSettings(sizes=[MICRO], encoders=["zen2", "bert"], dtypes=["fp32"], threads=1,
                                    **SMALL_RUN))
    assert torch.get_num_threads() == before
    assert report["settings"]["threads"] == 1 and report["summary"]["clock"] == "cpu"
    zen2 = report["results"][0]["rows"][0]
    assert report["summary"]["zen2_train_ratio_vs_bert"]["micro/fp32"] == zen2["cpu_train_ratio_vs_bert"]
    assert len(zen2["train"]["cpu_step_ms_per_round"]) == 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(sizes=[MICRO], encoders=["gpt"]), "--encoders"),
    (dict(sizes=[MICRO], dtypes=["fp16"]), "--dtype"),
    (dict(sizes=[MICRO], lexicon=Path("x.txt")), "--lexicon needs --text"),
    (dict(sizes=[MICRO], batch=0), "--batch"),
    (dict(sizes=[MICRO], seq_len=513), "--seq-len: expected at most 512"),
    (dict(sizes=[]), "--sizes"),
])
def test_bad_arguments_are_zen_errors(kwargs, message):
    with pytest.raises(ZenError, match=message):
        run(ModelBenchSettings(**kwargs))


def test_parse_size():
    assert parse_size("tiny") == ModelSize("tiny", 4, 256, 4, 1024, 2)
    assert parse_size("base").ngram_layers == 6
    assert parse_size("3x128x2") == ModelSize("3x128x2", 3, 128, 2, 512, 2)
    for bad in ("huge", "2x64", "2x64x3", "0x64x0", "2x6x1"):
        with pytest.raises(ZenError, match="--sizes"):
            parse_size(bad)


def test_cli_prints_tables_and_writes_json(tmp_path: Path):
    out = tmp_path / "r" / "model.json"
    r = CliRunner().invoke(app, ["bench", "model", "--sizes", "2x32x1", "--curve-size", "2x32x1", "--batch", "2",
                                 "--seq-len", "16", "--slots", "12", "--ngram-rows", "300", "--vocab-size", "200",
                                 "--steps", "1", "--curve-steps", "2", "--gemm-size", "64", "--dtype",
                                 "fp32,bf16", "--no-dense-adamw", "--json", str(out)])
    assert r.exit_code == 0, r.output
    for text in ("training step", "inference", "bf16 autocast vs fp32", "ZEN 2.0 / BERT training step"):
        assert text in r.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [row["encoder"] for row in report["results"][0]["rows"]] == ["zen2", "zen1", "bert"] * 2


def test_cli_bad_size_is_a_zen_error():
    with pytest.raises(ZenError, match="--sizes: expected tiny, small, base"):
        CliRunner().invoke(app, ["bench", "model", "--sizes", "tiny,huge"], catch_exceptions=False)


@needs_data(PD98 / "raw" / "train.txt")
def test_pd98_text_with_a_real_lexicon(tmp_path: Path):
    # Real characters and real lexicon matches: the slot fill must look like the released data's.
    from zencli.bench.matcher import count_lexicon

    train = PD98 / "raw" / "train.txt"
    ngrams, freqs, _ = count_lexicon(train, 2_000_000, 50, 4)
    lex = tmp_path / "ngram.txt"
    Lexicon(ngrams, freqs).save(lex)
    report = run(ModelBenchSettings(sizes=[MICRO], encoders=["zen2", "bert"], dtypes=["fp32"], text=train,
                                    lexicon=lex, batch=4, seq_len=128, steps=1, curve_steps=0, gemm_size=128,
                                    gemm_seconds=0.05))
    filled = report["inputs"]["slots_filled_per_seq"]
    assert 10 < filled < 128
    assert report["settings"]["ngram_rows"] >= len(ngrams) + 1
    assert report["results"][0]["rows"][0]["train_ratio_vs_bert"] > 0


# -- zencli.model.attention.attend: the CPU attention product this benchmark led to -----------------

@pytest.mark.parametrize("full_bias", [False, True])
def test_attend_on_cpu_equals_sdpa_values_and_gradients(full_bias):
    import torch.nn.functional as F

    from zencli.model.attention import attend

    g = torch.Generator().manual_seed(0)
    B, A, L, d = 2, 3, 5, 4
    q, k, v = (torch.randn(B, A, L, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    if full_bias:  # ZEN 2.0: position term + mask, itself trained through
        bias = torch.randn(B, A, L, L, generator=g, dtype=torch.float64, requires_grad=True)
    else:  # padding mask: the last key of sequence 1 is padding
        bias = torch.zeros(B, 1, 1, L, dtype=torch.float64)
        bias[1, ..., -1] = -10000.0
    got = attend(q, k, v, bias, 0.0)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)
    inputs = [q, k, v] + ([bias] if full_bias else [])
    grads = torch.autograd.grad((got * torch.arange(d)).sum(), inputs)
    want_grads = torch.autograd.grad((want * torch.arange(d)).sum(), inputs)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_attend_dropout_drops_attention_weights_and_rescales():
    from zencli.model.attention import attend

    torch.manual_seed(0)
    B, A, L = 4, 2, 64
    q, k = torch.randn(B, A, L, L), torch.randn(B, A, L, L)
    v = torch.eye(L).expand(B, A, L, L)  # ctx = the attention weights themselves
    bias = torch.zeros(B, 1, 1, L)
    probs = attend(q, k, v, bias, 0.0)
    dropped = attend(q, k, v, bias, 0.25)
    zero = dropped == 0
    assert 0.2 < float(zero.float().mean()) < 0.3
    torch.testing.assert_close(dropped[~zero], probs[~zero] / 0.75)
