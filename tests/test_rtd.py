"""Replaced-token detection (`objective: rtd`): generator and discriminator shapes and losses on a tiny
model, the no-leakage rule for the discriminator's n-grams (a property test), ROC AUC, the recipe keys,
and `zen pretrain` end to end: exact resume, the saved discriminator fine-tuning, two processes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_pretrain_cli import error, micro_recipe, records, zen
from zencli.data.features import NgramFeaturizer
from zencli.data.pretraining import PretrainDataSettings, slot_featurizer
from zencli.lexicon.ngram_file import Lexicon
from zencli.metrics.classification import roc_auc
from zencli.model.config import ZenConfig
from zencli.model.electra import ZenForReplacedTokenDetection, generator_config
from zencli.model.pretraining import IGNORE_INDEX, ZenForPreTraining
from zencli.tasks.pretraining.rtd import CorruptedNgramSlots
from zencli.text.vocab import Vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CHARS = list("甲乙丙丁戊己")  # ids 5..10
VOCAB = Vocab(SPECIALS + CHARS)
ID = {c: VOCAB.get(c) for c in CHARS}
CLS, SEP, MASK = VOCAB.cls_id, VOCAB.sep_id, VOCAB.mask_id
LEXICON = Lexicon(ngrams=[tuple(g) for g in ["甲乙", "乙丙", "甲乙丙", "丙丁", "丁戊己", "戊己", "己甲", "乙乙"]],
                  freqs=[50, 40, 30, 20, 10, 60, 15, 25])
NGRAM_OF = {i + 1: [ID[c] for c in g] for i, g in enumerate(LEXICON.ngrams)}  # n-gram id → token ids


def tiny(encoder: str = "zen2", *, size: float = 0.25, samplable: torch.Tensor | None = None,
         seed: int = 0) -> ZenForReplacedTokenDetection:
    torch.manual_seed(seed)
    config = ZenConfig(vocab_size=len(VOCAB), word_size=len(LEXICON) + 1, hidden_size=16, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=32, num_hidden_word_layers=1,
                       max_position_embeddings=32, encoder=encoder, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
    if samplable is None:
        samplable = torch.zeros(len(VOCAB), dtype=torch.bool)
        samplable[len(SPECIALS):] = True
    return ZenForReplacedTokenDetection(ZenForPreTraining(config), size, 50.0, samplable)


def slot_fn(max_seq_len: int = 32, max_ngrams: int | None = None) -> CorruptedNgramSlots:
    return CorruptedNgramSlots(slot_featurizer(VOCAB, LEXICON, PretrainDataSettings(max_seq_len=max_seq_len,
                                                                                     max_ngrams=max_ngrams)))


def batch_of(pairs: list[tuple[str, str]], masked: list[set[int]]) -> dict[str, torch.Tensor]:
    """`[CLS] A [SEP] B [SEP]` of text pairs, padded; masked positions shown as [MASK] with their labels."""
    rows = [[CLS, *(ID[c] for c in a), SEP, *(ID[c] for c in b), SEP] for a, b in pairs]
    L = max(map(len, rows))
    B = len(rows)
    ids = torch.zeros(B, L, dtype=torch.long)
    types = torch.zeros(B, L, dtype=torch.long)
    attn = torch.zeros(B, L, dtype=torch.long)
    labels = torch.full((B, L), IGNORE_INDEX, dtype=torch.long)
    for i, (row, (a, _)) in enumerate(zip(rows, pairs)):
        n = len(row)
        ids[i, :n] = torch.tensor(row)
        attn[i, :n] = 1
        types[i, len(a) + 2:n] = 1
        for p in masked[i]:
            labels[i, p] = ids[i, p]
            ids[i, p] = MASK
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": attn, "mlm_labels": labels,
            "nsp_labels": torch.zeros(B, dtype=torch.long)}


def run(model, batch, nsp=True, slots=None, generator=None):
    return model(batch["input_ids"], mlm_labels=batch["mlm_labels"], token_type_ids=batch["token_type_ids"],
                 attention_mask=batch["attention_mask"], nsp_labels=batch["nsp_labels"] if nsp else None,
                 ngram_slots=slots, sampling_generator=generator)


# --- the model -------------------------------------------------------------------------------------------

def test_generator_sizes_follow_the_fraction_at_the_same_head_size():
    base = ZenConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072, num_hidden_layers=12)
    g = generator_config(base, 1 / 3)
    assert (g.hidden_size, g.num_attention_heads, g.intermediate_size, g.num_hidden_layers) == (256, 4, 1024, 12)
    assert (g.encoder, g.num_hidden_word_layers) == ("zen2", 0)
    g = generator_config(ZenConfig(hidden_size=128, num_attention_heads=4, intermediate_size=512), 0.25)
    assert (g.hidden_size, g.num_attention_heads, g.intermediate_size) == (32, 1, 128)
    g = generator_config(ZenConfig(hidden_size=128, num_attention_heads=4, intermediate_size=512), 0.01)
    assert (g.hidden_size, g.num_attention_heads) == (32, 1)  # at least one head


@pytest.mark.parametrize("encoder", ["zen2", "zen1", "bert"])
def test_shapes_losses_and_gradients_on_a_tiny_model(encoder):
    model = tiny(encoder)
    assert model.generator.embeddings is model.discriminator.bert.embeddings  # shared, at the encoder's width
    assert model.generator.config.hidden_size == 4 and model.generator.config.encoder == encoder
    batch = batch_of([("甲乙丙丁", "戊己甲"), ("丙丁戊", "己甲乙乙丙")], [{1, 2}, {4, 5, 8}])
    out = run(model, batch, slots=slot_fn() if encoder != "bert" else None)
    B, L = batch["input_ids"].shape
    masked = batch["mlm_labels"] != IGNORE_INDEX
    N = int(masked.sum())
    assert out.mlm_logits.shape == (N, len(VOCAB)) and out.rtd_logits.shape == (B, L)
    assert out.nsp_logits.shape == (B, 2) and out.corrupted.shape == out.replaced.shape == (B, L)

    # x̂: the original text except at masked positions, which hold samples of real tokens (no specials).
    original = torch.where(masked, batch["mlm_labels"], batch["input_ids"])
    assert torch.equal(out.corrupted[~masked], original[~masked])
    assert bool((out.corrupted[masked] >= len(SPECIALS)).all())
    assert torch.equal(out.replaced, out.corrupted != original)

    # The losses, computed by hand.
    mlm = F.cross_entropy(out.mlm_logits, batch["mlm_labels"][masked])
    real = batch["attention_mask"].bool()
    rtd = F.binary_cross_entropy_with_logits(out.rtd_logits[real], out.replaced[real].float())
    nsp = F.cross_entropy(out.nsp_logits, batch["nsp_labels"])
    torch.testing.assert_close(out.mlm_loss, mlm)
    torch.testing.assert_close(out.rtd_loss, rtd)
    torch.testing.assert_close(out.loss, mlm + 50.0 * rtd + nsp)
    assert run(model, batch, nsp=False).nsp_logits is None

    # No gradient through the sample: the discriminator's loss reaches the shared embeddings and the
    # discriminator, never the generator's own layers; the MLM loss trains the generator.
    out.rtd_loss.backward()
    g = model.generator
    assert all(p.grad is None for p in g.encoder.parameters())
    assert g.embeddings.char_embeddings.weight.grad is not None
    assert model.discriminator_predictions.dense.weight.grad is not None
    model.zero_grad(set_to_none=True)
    run(model, batch).loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in g.encoder.parameters() if p.dim() > 1)
    assert model.discriminator.cls.predictions.transform.dense.weight.grad is None  # the unused MLM head


def test_sampling_is_seeded_and_a_batch_without_masked_positions_has_no_replacements():
    model = tiny()
    batch = batch_of([("甲乙丙丁戊", "己甲乙丙")] * 3, [{1, 2, 3}, {7, 8}, {2}])
    a = run(model, batch, generator=torch.Generator().manual_seed(5)).corrupted
    b = run(model, batch, generator=torch.Generator().manual_seed(5)).corrupted
    assert torch.equal(a, b)
    none = batch_of([("甲乙", "丙")], [set()])
    out = run(model, none)
    assert not out.replaced.any() and out.mlm_loss.item() == 0.0 and torch.isfinite(out.loss)


# --- no leakage: the discriminator's n-grams are those of the text it reads ------------------------------

def test_a_masked_ngram_is_not_revealed_and_the_replacement_is_matched():
    # Only 丁 may be sampled: 乙 of 甲乙 is masked and becomes 丁, so the discriminator reads 甲丁丙.
    only = torch.zeros(len(VOCAB), dtype=torch.bool)
    only[ID["丁"]] = True
    model = tiny(samplable=only)
    batch = batch_of([("甲乙丙", "戊己")], [{2}])
    seen = {}
    slots = slot_fn()

    def spy(ids, types, mask):
        seen["ids"] = ids.clone()
        seen["slots"] = slots(ids, types, mask)
        return seen["slots"]

    out = run(model, batch, slots=spy)
    assert torch.equal(seen["ids"], out.corrupted)
    assert out.corrupted[0, :4].tolist() == [CLS, ID["甲"], ID["丁"], ID["丙"]]
    s = seen["slots"]
    found = {tuple(NGRAM_OF[int(i)]) for i, m in zip(s["ngram_ids"][0], s["ngram_attention_mask"][0]) if m}
    # 甲乙, 乙丙, 甲乙丙 (the original text) are gone; 丙丁 is not there either (丁丙 is what it reads);
    # 戊己 in segment B is matched, as fine-tuning would.
    assert found == {(ID["戊"], ID["己"])}
    assert out.replaced[0].tolist() == [False, False, True] + [False] * 5


_text = st.text(alphabet="".join(CHARS), min_size=1, max_size=9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(_text, _text), min_size=1, max_size=4), data=st.data(),
       seed=st.integers(0, 2**31 - 1), max_ngrams=st.sampled_from([None, 2]))
def test_no_slot_reveals_a_replaced_character(pairs, data, seed, max_ngrams):
    """Whatever was masked and whatever the generator drew: every slot the discriminator gets spells the
    corrupted text at its span, so no slot covering a replaced position holds the original characters
    there (the corrupted text differs at that position), and the slots are exactly what fine-tuning's
    featurizer gives for the corrupted text: they depend on what the discriminator reads, nothing else."""
    masked = []
    for a, b in pairs:
        n = len(a) + len(b) + 3
        maskable = [p for p in range(1, n - 1) if p != len(a) + 1]
        masked.append(set(data.draw(st.lists(st.sampled_from(maskable), max_size=len(maskable)))))
    batch = batch_of(pairs, masked)
    model = tiny(seed=seed % 7)  # a small random generator: near-uniform samples, many replacements
    slots = slot_fn(max_ngrams=max_ngrams)
    seen = {}

    def spy(ids, types, mask):
        seen["slots"] = slots(ids, types, mask)
        return seen["slots"]

    got = {}
    hook = model.discriminator.bert.register_forward_pre_hook(
        lambda module, args, kwargs: got.update(ids=args[0], **kwargs), with_kwargs=True)
    out = run(model, batch, slots=spy, generator=torch.Generator().manual_seed(seed))
    hook.remove()
    assert torch.equal(got["ids"], out.corrupted)  # the discriminator read x̂ ...
    for key, value in seen["slots"].items():  # ... and exactly the slots matched on it
        assert torch.equal(got[key], value), key

    original = torch.where(batch["mlm_labels"] != IGNORE_INDEX, batch["mlm_labels"], batch["input_ids"])
    s = {k: v.numpy() for k, v in seen["slots"].items()}
    for b in range(len(pairs)):
        x_hat, x = out.corrupted[b].tolist(), original[b].tolist()
        for gid, start, length, on in zip(s["ngram_ids"][b], s["ngram_starts"][b], s["ngram_lengths"][b],
                                          s["ngram_attention_mask"][b]):
            if not on:
                continue
            span = slice(int(start), int(start) + int(length))
            assert NGRAM_OF[int(gid)] == x_hat[span]  # spells the corrupted text
            if out.replaced[b, span].any():
                assert x[span] != x_hat[span]  # so it does not spell the original there

    # The slots equal fine-tuning's featurization of the corrupted segments.
    featurizer = NgramFeaturizer(VOCAB, LEXICON, max_seq_len=32, max_ngrams=max_ngrams)
    segs = [(out.corrupted[b, 1:len(a) + 1].tolist(), out.corrupted[b, len(a) + 2:len(a) + len(bb) + 2].tolist())
            for b, (a, bb) in enumerate(pairs)]
    records_ = featurizer.featurize_batch([a for a, _ in segs], [b for _, b in segs])
    for b, rec in enumerate(records_):
        m = int(s["ngram_attention_mask"][b].sum())
        assert s["ngram_attention_mask"][b][:m].all()
        for key in ("ngram_ids", "ngram_starts", "ngram_lengths", "ngram_freqs", "ngram_token_type_ids"):
            assert s[key][b][:m].tolist() == rec[key].tolist(), key


# --- ROC AUC ---------------------------------------------------------------------------------------------

def test_roc_auc_counts_pairs_with_ties_as_half():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75  # scikit-learn's documented example
    assert roc_auc([1, 1, 1], [0, 1, 1]) == 0.5
    assert roc_auc([3, 2, 1], [1, 0, 0]) == 1.0 and roc_auc([3, 2, 1], [0, 1, 1]) == 0.0
    assert roc_auc([0.2, 0.3], [1, 1]) is None
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 200).astype(float), rng.random(200) < 0.3
    pairs = [(a > b) + 0.5 * (a == b) for a in s[y] for b in s[~y]]
    assert roc_auc(s, y) == pytest.approx(sum(pairs) / len(pairs))


# --- recipes ---------------------------------------------------------------------------------------------

def test_the_tiny_rtd_recipe_is_the_tiny_recipe_with_rtd(tmp_path):
    from zencli.config import load_job_recipe
    from zencli.tasks.pretraining import run_plan

    mlm, rtd = load_job_recipe("pretrain-zh-tiny"), load_job_recipe("pretrain-zh-tiny-rtd")
    assert (mlm.objective, rtd.objective) == ("mlm", "rtd")
    assert rtd.model == mlm.model and rtd.data == mlm.data
    assert (rtd.rtd.generator_size, rtd.rtd.discriminator_weight, rtd.rtd.nsp) == (0.25, 50.0, True)
    assert rtd.masking.scheme == "ngram"
    for key in ("lr", "warmup_steps", "max_steps", "batch_size", "dtype", "seed"):
        assert getattr(rtd.train, key) == getattr(mlm.train, key), key
    assert "objective" not in run_plan(mlm) and run_plan(rtd)["objective"] == "rtd"  # old MLM runs continue

    recipe = str(micro_recipe(tmp_path))
    assert "rtd: only used by objective: rtd" in error("pretrain", "-r", recipe, "--set", "rtd.nsp=false")
    msg = error("pretrain", "-r", recipe, "--set", "objective=rtd", "--set", "rtd.generator_size=0")
    assert "rtd.generator_size" in msg and "(0, 1]" in msg
    assert "rtd.discriminator_weight" in error("pretrain", "-r", recipe, "--set", "objective=rtd",
                                               "--set", "rtd.discriminator_weight=-1")
    assert "objective" in error("pretrain", "-r", recipe, "--set", "objective=electra")


# --- zen pretrain end to end -----------------------------------------------------------------------------

def test_rtd_pretraining_resumes_exactly_and_the_saved_discriminator_finetunes(tmp_path):
    import random

    from tests.test_pretrain_cli import _WORDS, write
    from zencli.model.sources import load_pretrained

    recipe = micro_recipe(tmp_path)
    out = tmp_path / "run"
    zen("pretrain", "-r", str(recipe), "--quiet", "--set", "objective=rtd")
    first = records(out, "train")
    keys = ("loss", "mlm_loss", "mlm_acc", "rtd_loss", "rtd_acc", "replaced", "nsp_acc")
    assert [r["step"] for r in first] == list(range(1, 7)) and all(r[k] is not None for r in first for k in keys)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    final = results["heldout"]["final"]
    assert results["objective"] == "rtd" and set(final) >= {"masked_acc", "rtd_acc", "rtd_auc", "replaced"}
    assert 0.5 < final["rtd_auc"] <= 1.0 and 0.0 < final["replaced"] < 0.2
    assert final == pytest.approx({k: v for k, v in records(out, "eval")[-1].items() if k not in ("kind", "step")})

    # The saved model is the discriminator, in an MLM run's layout, with the weights training ended with.
    p = load_pretrained(out / "model")
    assert p.kind == "zen" and isinstance(p.model, ZenForPreTraining) and p.model.config.hidden_size == 32
    ckpt = torch.load(out / "checkpoints" / "step-00000006.pt", weights_only=True)["model"]
    for name, w in p.model.state_dict().items():
        torch.testing.assert_close(w, ckpt[f"discriminator.{name}"], rtol=0, atol=0, msg=name)

    # As if killed after the step-3 checkpoint: the next start continues from it, bit for bit.
    (out / "checkpoints" / "step-00000006.pt").unlink()
    shutil.rmtree(out / "model")
    zen("pretrain", "-r", str(recipe), "--quiet", "--set", "objective=rtd")
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["started_at_step"] == 3
    again = records(out, "train")
    assert [r["step"] for r in again] == list(range(1, 7))
    for a, b in zip(first, again):
        assert [a[k] for k in keys] == [b[k] for k in keys], a["step"]
    # The same directory with MLM is another run: refused, naming the difference.
    assert "objective" in error("pretrain", "-r", str(recipe), "--quiet")

    rng = random.Random(3)
    cws = write(tmp_path / "cws.txt", [" ".join(rng.choice(_WORDS) for _ in range(8)) for _ in range(12)])
    zen("finetune", "--task", "cws", "--train", str(cws), "--model", str(out / "model"), "-o", str(tmp_path / "ft"),
        "--max-steps", "2", "--batch-size", "4", "--quiet")
    assert (tmp_path / "ft" / "model" / "config.json").is_file()

    # `zen model info` says what was saved: the discriminator, scored by replaced-token detection.
    held = json.loads(zen("model", "info", str(out), "--json"))["scores"]["heldout"]
    assert held["objective"] == "rtd" and held["rtd_auc"] == results["heldout"]["final"]["rtd_auc"]
    assert "replaced-token detection acc" in zen("model", "info", str(out))


def test_rtd_with_two_processes(tmp_path):
    recipe = micro_recipe(tmp_path, train={"max_steps": 2, "eval_every": 0, "save_every": 0})
    zen("pretrain", "-r", str(recipe), "--quiet", "--nproc", "2", "--set", "objective=rtd", "--set", "rtd.nsp=false")
    out = tmp_path / "run"
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["world_size"] == 2 and results["steps"] == 2 and "nsp_acc" not in results["heldout"]["final"]
    assert [r["step"] for r in records(out, "train")] == [1, 2]
    assert (out / "model" / "model.safetensors").is_file()
