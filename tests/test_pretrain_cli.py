"""`zen pretrain` and `zen data pretrain` end to end on made-up text with a micro model: outputs, the model
loading, exporting and fine-tuning, exact resume, two processes, continuing from a BERT checkpoint,
length-grouped batches, the held-out baseline, recipes and one-line errors."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from tests.conftest import PD98, ROOT, needs_data, write
from zencli.cli.app import app
from zencli.config import list_recipes, load_job_recipe
from zencli.datasets import data_path
from zencli.errors import ZenError

runner = CliRunner()

# 60 made-up CJK "words" of 1-3 characters; sentences follow a word-level Markov chain (each word has three
# likely successors), so the lexicon finds n-grams and a model can learn something.
_CHARS = [chr(c) for c in range(0x4E00 + 300, 0x4E00 + 370)]
_RNG = random.Random(7)
_WORDS = ["".join(_RNG.choice(_CHARS) for _ in range(_RNG.choice([1, 2, 2, 3]))) for _ in range(60)]


def sentences(n_lines: int, seed: int) -> list[str]:
    """`n_lines` lines (one document each) of 1-3 sentences of made-up words."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        parts = []
        for _ in range(rng.randint(1, 3)):
            w = [rng.randrange(60)]
            for _ in range(rng.randint(4, 10)):
                w.append((w[-1] * 7 + rng.choice([1, 2, 3])) % 60)
            parts.append("".join(_WORDS[i] for i in w) + rng.choice("。！？"))
        lines.append("".join(parts))
    return lines


MICRO = {
    "job": "pretrain",
    "language": "zh",
    "data": {"build_missing": True, "max_seq_len": 32, "examples_per_shard": 200, "workers": 1,
             "heldout_examples": 64, "eval_batch_size": 16},
    "model": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
              "num_hidden_word_layers": 1},
    "train": {"lr": 2e-3, "warmup_steps": 1, "max_steps": 6, "batch_size": 8, "save_every": 3, "keep_last": 2,
              "log_every": 1, "eval_every": 3, "dtype": "fp32", "num_threads": 1, "tensorboard": False},
}


def micro_recipe(tmp: Path, **sections) -> Path:
    """A micro recipe over made-up train/dev text in `tmp`; `sections` update its sections."""
    data = json.loads(json.dumps(MICRO))
    data["data"]["corpus"] = [str(write(tmp / "text" / "train.txt", sentences(300, 1)))]
    data["data"]["heldout"] = [str(write(tmp / "text" / "dev.txt", sentences(60, 2)))]
    data["train"]["output_dir"] = str(tmp / "run")
    for name, values in sections.items():
        data[name].update(values)
    path = tmp / "micro.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def zen(*args: str) -> str:
    r = runner.invoke(app, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def error(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert isinstance(r.exception, ZenError), r.output
    message = str(r.exception)
    assert "\n" not in message
    return message


def records(out: Path, kind: str) -> list[dict]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["kind"] == kind]


# --- a whole run -----------------------------------------------------------------------------------------

def assert_resumed_at_3_like(out: Path, first: list[dict]) -> None:
    """The 6-step run in `out` resumed from its step-3 checkpoint and logged the losses and accuracies of the
    uninterrupted run's `first` train records, bit for bit."""
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["started_at_step"] == 3 and results["steps"] == 6
    again = records(out, "train")
    assert [r["step"] for r in again] == list(range(1, 7))
    for a, b in zip(first, again):
        assert (a["loss"], a["mlm_acc"], a["nsp_acc"]) == (b["loss"], b["mlm_acc"], b["nsp_acc"]), a["step"]


def test_data_then_pretrain_writes_model_metrics_results_and_the_model_loads_exports_and_finetunes(tmp_path):
    from zencli.data.shards import IGNORE_INDEX, PretrainShards
    from zencli.model.pretraining import ZenForPreTraining
    from zencli.model.sources import load_pretrained
    from zencli.text.vocab import Vocab

    recipe = micro_recipe(tmp_path)
    out = tmp_path / "run"
    summary = json.loads(zen("data", "pretrain", "-r", str(recipe), "--json"))
    assert summary["train"]["shards_made"] >= 2 and summary["heldout"]["totals"]["examples"] > 64
    assert summary["built"] == [str(out / "vocab.txt"), str(out / "ngram.txt")]
    zen("pretrain", "-r", str(recipe), "--quiet")

    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] == 6 and results["started_at_step"] == 0
    assert results["data"]["train"]["shards_made"] == 0  # `zen data pretrain` made them
    train = records(out, "train")
    assert [r["step"] for r in train] == list(range(1, 7))
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "lr", "tokens_per_s"):
        assert all(r[key] is not None for r in train), key
    assert [r["step"] for r in records(out, "eval")] == [3, 6]
    held = results["heldout"]
    last_eval = {k: v for k, v in records(out, "eval")[-1].items() if k not in ("kind", "step")}
    assert held["examples"] == 64 and held["final"] == pytest.approx(last_eval)
    assert held["initial"]["mlm_loss"] > held["final"]["mlm_loss"]  # it learned something in 6 steps

    # The baseline is the most frequent training MLM target, scored on the held-out [MASK] positions.
    train_ds, dev_ds = PretrainShards(out / "data" / "train"), PretrainShards(out / "data" / "heldout")
    counts = np.bincount(np.concatenate([r["mlm_labels"][r["mlm_labels"] != IGNORE_INDEX]
                                         for r in (train_ds[i] for i in range(len(train_ds)))]))
    top = int(counts.argmax())
    chosen = np.unique(np.linspace(0, len(dev_ds) - 1, 64).round().astype(int))
    hits = shown = 0
    mask_id = Vocab.load(out / "vocab.txt").mask_id
    for i in chosen:
        rec = dev_ds[int(i)]
        pos = rec["mlm_labels"] != IGNORE_INDEX
        is_mask = rec["input_ids"][pos] == mask_id
        hits += int((rec["mlm_labels"][pos][is_mask] == top).sum())
        shown += int(is_mask.sum())
    assert held["baseline"]["prediction_id"] == top
    assert held["baseline"]["masked_acc"] == pytest.approx(hits / shown)

    model_dir = out / "model"
    assert {"config.json", "model.safetensors", "vocab.txt", "ngram.txt", "vocab.json"} <= {
        p.name for p in model_dir.iterdir()}
    p = load_pretrained(model_dir)
    assert p.kind == "zen" and isinstance(p.model, ZenForPreTraining)
    assert (p.model.config.num_hidden_layers, p.model.config.hidden_size) == (2, 32)

    zen("model", "export", str(model_dir), "-o", str(tmp_path / "released"))
    back = load_pretrained(tmp_path / "released")
    assert back.kind == "released" and back.model.config.encoder == "zen2"
    for name, w in p.model.state_dict().items():
        torch.testing.assert_close(back.model.state_dict()[name], w, rtol=0, atol=0, msg=name)

    # The pretrained model is a starting point for fine-tuning (CWS on the made-up words).
    rng = random.Random(3)
    cws = write(tmp_path / "cws.txt", [" ".join(rng.choice(_WORDS) for _ in range(8)) for _ in range(12)])
    zen("finetune", "--task", "cws", "--train", str(cws), "--model", str(model_dir), "-o", str(tmp_path / "ft"),
        "--max-steps", "2", "--batch-size", "4", "--quiet")
    assert (tmp_path / "ft" / "model" / "config.json").is_file()

    # `zen model info` describes both: the pretraining run's model with its held-out score, the fine-tuned one
    pre = json.loads(zen("model", "info", str(out), "--json"))
    assert (pre["kind"], pre["path"], pre["encoder"]["layers"]) == ("zen pretrained model", str(model_dir), 2)
    assert pre["scores"]["heldout"]["masked_acc"] == held["final"]["masked_acc"]
    ft = json.loads(zen("model", "info", str(tmp_path / "ft"), "--json"))
    assert (ft["kind"], ft["task"]["name"], ft["task"]["scheme"], ft["encoder"]["hidden_size"]) == (
        "fine-tuned model", "cws", "BMES", 32)
    assert "source" in ft and ft["scores"] == {}  # no dev or test file: no scores


def test_a_second_invocation_resumes_exactly_and_other_settings_are_refused(tmp_path):
    recipe = micro_recipe(tmp_path)
    out = tmp_path / "run"
    zen("pretrain", "-r", str(recipe), "--quiet")
    first = records(out, "train")
    ckpts = sorted(p.name for p in (out / "checkpoints").glob("step-*.pt"))
    assert ckpts == ["step-00000003.pt", "step-00000006.pt"]
    # As if killed after the step-3 checkpoint: the next start continues from it, bit for bit, also with
    # batches built ahead in worker processes (data_workers is not part of what a run is).
    (out / "checkpoints" / "step-00000006.pt").unlink()
    shutil.rmtree(out / "model")
    zen("pretrain", "-r", str(recipe), "--quiet", "--set", "train.data_workers=2")
    assert_resumed_at_3_like(out, first)
    assert (out / "model" / "model.safetensors").is_file()
    # A finished run started again: nothing to train, the model and results are written again.
    zen("pretrain", "-r", str(recipe), "--quiet")
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["started_at_step"] == 6
    # Other settings in the same directory: refused before anything is built, naming the key.
    msg = error("pretrain", "-r", str(recipe), "--quiet", "--set", "train.lr=0.01")
    assert str(out) in msg and "train.lr: 0.002 there, 0.01 now" in msg and "--overwrite" in msg
    msg = error("pretrain", "-r", str(recipe), "--quiet", "--max-steps", "8")
    assert "train.max_steps: 6 there, 8 now" in msg
    zen("pretrain", "-r", str(recipe), "--quiet", "--max-steps", "2", "--overwrite")
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["steps"] == 2
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*.pt")) == ["step-00000002.pt"]


SITECUSTOMIZE = """import os
if os.environ.get("RANK") is not None:  # a training process started by --nproc, not the launcher
    from pathlib import Path
    from tests.helpers_train import audit_writes
    log = Path(os.environ["ZEN_TEST_AUDIT"]) / f"rank-{os.environ['RANK']}.txt"
    audit_writes(Path(os.environ["ZEN_TEST_AUDIT_ROOT"]), log)
"""


def audit_nproc_writes(tmp: Path, root: Path, monkeypatch) -> Path:
    """Make every process `--nproc` starts log its writes under `root` to tmp/audit/rank-R.txt (a
    sitecustomize on their PYTHONPATH installs tests.helpers_train.audit_writes); returns tmp/audit."""
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("ZEN_TEST_AUDIT_ROOT", str(root))
    monkeypatch.setenv("ZEN_TEST_AUDIT", str(tmp / "audit"))
    return tmp / "audit"


def test_two_processes_with_nproc_train_like_one_write_from_rank_0_and_resume_with_one(tmp_path, monkeypatch):
    # No dropout, so 1 and 2 processes see the same global batches and compute the same thing.
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    recipe = micro_recipe(tmp_path, model=no_dropout, train={"max_steps": 4, "save_every": 2, "eval_every": 0})
    audit = audit_nproc_writes(tmp_path, tmp_path / "run", monkeypatch)
    zen("pretrain", "-r", str(recipe), "--quiet", "--nproc", "2")
    out = tmp_path / "run"
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["world_size"] == 2 and results["steps"] == 4
    two = records(out, "train")
    assert [r["step"] for r in two] == [1, 2, 3, 4]  # rank 0 logs once per step
    assert (out / "model" / "model.safetensors").is_file()
    assert (audit / "rank-1.txt").read_text(encoding="utf-8") == ""  # rank 1 wrote nothing
    rank0 = (audit / "rank-0.txt").read_text(encoding="utf-8")
    assert all(name in rank0 for name in ("step-00000004.pt", "model.safetensors", "results.json", "metrics.jsonl"))

    # One process, the same global batch of 8: the same curve, to 0.2%. Not bit-equal: the loss (and the
    # gradient) of 2 processes is the mean of their two micro-batch means, each MLM loss a mean over its
    # own masked positions, whose counts differ; one process takes one mean over all of them. Measured
    # here: at most 9e-4 relative over the 4 steps. The accuracies are exact sums over the batch.
    one_dir = tmp_path / "one"
    zen("pretrain", "-r", str(recipe), "--quiet", "-o", str(one_dir))
    one = records(one_dir, "train")
    for a, b in zip(one, two):
        assert a["loss"] == pytest.approx(b["loss"], rel=2e-3), a["step"]
        assert (a["mlm_acc"], a["nsp_acc"]) == pytest.approx((b["mlm_acc"], b["nsp_acc"]), abs=0.05), a["step"]

    # The 2-process run stopped after its step-2 checkpoint; continue it with one process: a note, no crash.
    shutil.rmtree(out / "model")
    (out / "checkpoints" / "step-00000004.pt").unlink()
    r = runner.invoke(app, ["pretrain", "-r", str(recipe)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "resuming a 2-process checkpoint with 1 processes" in " ".join(r.output.split())
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert (results["world_size"], results["started_at_step"], results["steps"]) == (1, 2, 4)
    again = records(out, "train")
    assert [r["step"] for r in again] == [1, 2, 3, 4] and again[:2] == two[:2]
    for a, b in zip(again[2:], two[2:]):
        assert a["loss"] == pytest.approx(b["loss"], rel=2e-3), a["step"]  # as above (measured: 3e-4)


def test_continue_from_a_bert_checkpoint_with_the_from_bert_recipe(tmp_path):
    from zencli.model.config import ZenConfig
    from zencli.model.encoder import ZenModel
    from zencli.model.released import export_released
    from zencli.model.sources import load_pretrained
    from zencli.text.vocab_build import build_vocab

    corpus = write(tmp_path / "text" / "train.txt", sentences(300, 1))
    dev = write(tmp_path / "text" / "dev.txt", sentences(60, 2))
    vocab = build_vocab([corpus]).vocab
    vocab.save(tmp_path / "vocab.txt")
    torch.manual_seed(0)
    bert = ZenModel(ZenConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64, max_position_embeddings=64, encoder="bert"))
    export_released(bert, tmp_path / "bert", vocab=tmp_path / "vocab.txt")
    out = tmp_path / "run"
    sets = [f"init.pretrained={tmp_path / 'bert'}", f"data.corpus=[{corpus}]", f"data.heldout=[{dev}]",
            "data.ngram=null", "data.build_missing=true", "data.max_seq_len=32", "data.workers=1",
            "data.heldout_examples=32", "model.num_hidden_word_layers=1", "train.max_steps=2", "train.warmup_steps=1",
            "train.batch_size=8", "train.dtype=fp32", "train.num_threads=1", "train.eval_every=0",
            "train.tensorboard=false", f"train.output_dir={out}"]
    zen("pretrain", "-r", "pretrain-zh-from-bert", "--quiet", *[x for s in sets for x in ("--set", s)])
    p = load_pretrained(out / "model")
    cfg = p.model.config
    assert cfg.encoder == "zen2" and cfg.num_hidden_layers == 2 and cfg.num_hidden_word_layers == 1
    assert (out / "model" / "vocab.txt").read_text(encoding="utf-8") \
        == (tmp_path / "vocab.txt").read_text(encoding="utf-8")
    assert not (out / "vocab.txt").exists()  # the checkpoint's vocabulary was used, not a new one
    torch.testing.assert_close(p.model.bert.embeddings.char_embeddings.weight,
                               bert.embeddings.char_embeddings.weight, atol=0.02, rtol=0)  # 2 steps from BERT


# --- recipes and errors ----------------------------------------------------------------------------------

def test_pretrain_recipes_are_valid_and_match_the_paper():
    names = [n for n in list_recipes() if n.startswith("pretrain-")]
    assert {"pretrain-zh-tiny", "pretrain-zh-base", "pretrain-zh-large", "pretrain-ar-tiny",
            "pretrain-zh-from-bert"} <= set(names)
    for name in names:
        assert load_job_recipe(name).job == "pretrain"
    base, large = load_job_recipe("pretrain-zh-base"), load_job_recipe("pretrain-zh-large")
    for cfg, arch, batch in ((base, (12, 12, 768, 6), 24_576), (large, (24, 16, 1024, 6), 8_192)):
        m, t = cfg.model, cfg.train
        assert (m.num_hidden_layers, m.num_attention_heads, m.hidden_size, m.num_hidden_word_layers) == arch
        assert (t.batch_size, t.max_steps, t.warmup_steps, t.lr) == (batch, 600_000, 36_000, 1e-4)
        assert t.micro_batch_size(8) * 8 * t.grad_accum == batch
    ar = load_job_recipe("pretrain-ar-tiny")
    assert ar.language == "ar" and ar.data.corpus == [data_path("ar/quran-uthmani.txt").path]  # ${data}/ar/...
    assert load_job_recipe("pretrain-zh-from-bert").init.pretrained is not None


def test_recipe_errors_name_the_key(tmp_path):
    recipe = str(micro_recipe(tmp_path))
    msg = error("pretrain", "-r", recipe, "--set", "data.corpuss=[x.txt]")
    assert "unknown key 'data.corpuss'" in msg and "data.corpus" in msg
    assert "model.hidden_size" in error("pretrain", "-r", recipe, "--set", "model.hidden_size=30")
    assert "data.max_seq_len" in error("pretrain", "-r", recipe, "--set", "data.max_seq_len=3")
    assert "masking.rate" in error("pretrain", "-r", recipe, "--set", "masking.rate=1.5")
    assert "`zen lexicon`" in error("pretrain", "-r", "lexicon-zh-pd98")
    assert "run `zen lexicon --workdir" in error("pretrain", "-o", str(tmp_path / "x"),
                                                "--workdir", str(tmp_path / "ws"))
    assert "no such file" in error("pretrain", "-r", recipe, "--set", "data.corpus=[nope.txt]")
    msg = error("pretrain", "-r", recipe, "--set", "data.build_missing=false", "-o", str(tmp_path / "y"))
    assert msg.startswith("data.vocab: not given") and "build_missing" in msg


def test_bad_inputs_are_one_line_errors_in_real_processes(tmp_path):
    from zencli.text.vocab_build import build_vocab

    base = micro_recipe(tmp_path)
    corpus = Path(yaml.safe_load(base.read_text(encoding="utf-8"))["data"]["corpus"][0])
    vocab = tmp_path / "vocab.txt"
    build_vocab([corpus]).vocab.save(vocab)
    foreign = write(tmp_path / "foreign-ngram.txt", [f"{a} {b},{30 - i}" for i, (a, b) in enumerate(
        zip("αβγδεζηθ", "ικλμνξοπ"))])  # tokens the vocabulary does not have
    other = tmp_path / "other-run"
    (other / "checkpoints").mkdir(parents=True)
    (other / "run.json").write_text('{"fingerprint": "abc"}\n', encoding="utf-8")
    one_doc = write(tmp_path / "one-doc.txt", ["".join(sentences(20, 5))])
    blank = write(tmp_path / "blank.txt", ["", "  ", "", "\t"])
    cases = {
        "one document": (["--set", f"data.corpus=[{one_doc}]"], [str(one_doc), "single document"]),
        "blank lines": (["--set", f"data.corpus=[{blank}]"], [str(blank), "no text to pretrain on"]),
        "lexicon vs vocab": (["--set", f"data.vocab={vocab}", "--set", f"data.ngram={foreign}"],
                             [str(foreign), "does not match the vocabulary"]),
        "another run": (["-o", str(other)], [str(other), "another run's checkpoints"]),
    }
    procs = {}
    for name, (args, _) in cases.items():
        out = ["-o", str(tmp_path / f"out-{len(procs)}")] if "-o" not in args else []
        procs[name] = subprocess.Popen([sys.executable, "-m", "zencli", "pretrain", "-r", str(base), "--quiet",
                                        *out, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    for name, p in procs.items():
        _, err = p.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert p.returncode == 2, (name, err)
        assert len(lines) == 1 and lines[0].startswith("zen: error: "), (name, err)
        for part in cases[name][1]:
            assert part in lines[0], (name, lines[0])
    assert sorted(p.name for p in other.iterdir()) == ["checkpoints", "run.json"]  # left as it was


# --- the tiny recipe on PD98 (slow: ~10 minutes; ZEN_SLOW=1) ----------------------------------------------

@pytest.mark.slow
@needs_data(PD98 / "raw")
def test_tiny_recipe_on_pd98_learns(tmp_path, monkeypatch):
    """The acceptance run: the MLM loss ends far below its start, held-out masked-char accuracy far above
    always guessing the most frequent character, and the model exports to the released layout."""
    monkeypatch.chdir(ROOT)  # the recipe's paths are relative to the repository root
    out = tmp_path / "run"
    zen("pretrain", "-r", "pretrain-zh-tiny", "-o", str(out), "--quiet")
    r = json.loads((out / "results.json").read_text(encoding="utf-8"))
    held = r["heldout"]
    assert held["final"]["mlm_loss"] < held["initial"]["mlm_loss"] - 3
    assert held["final"]["mlm_loss"] < held["baseline"]["mlm_loss"] - 1
    assert held["final"]["masked_acc"] > 3 * held["baseline"]["masked_acc"]
    assert r["last_train_record"]["mlm_loss"] < r["first_train_record"]["mlm_loss"] - 3
    zen("model", "export", str(out / "model"), "-o", str(tmp_path / "released"))
    assert (tmp_path / "released" / "pytorch_model.bin").is_file()


def test_run_plan_leaves_out_data_keys_added_later_while_they_are_off():
    """Runs started before `data.normalize` / `data.ngram_min_entropy` existed keep resuming: the plan only
    names those keys when they are set."""
    import dataclasses

    from zencli.config import load_job_recipe
    from zencli.tasks.pretraining import run_plan

    cfg = load_job_recipe("pretrain-zh-tiny")
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, ngram_min_entropy=None))  # both off
    assert not {"normalize", "ngram_min_entropy"} & set(run_plan(cfg)["data"])
    assert "ngram_max_size" not in run_plan(cfg)["data"]
    on = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, ngram_min_entropy=1.5, normalize=["tatweel"],
                                                          ngram_max_size=1000))
    assert run_plan(on)["data"]["ngram_min_entropy"] == 1.5 and run_plan(on)["data"]["normalize"] == ["tatweel"]
    assert run_plan(on)["data"]["ngram_max_size"] == 1000


def test_the_built_lexicon_keeps_data_ngram_max_size_of_the_most_frequent(tmp_path):
    import dataclasses

    from zencli.config import load_job_recipe
    from zencli.tasks.pretraining.vocab_lexicon import build_lexicon_file

    corpus = tmp_path / "c.txt"
    lines = ["中国人民银行在北京开会", "北京大学的学生在中国人民大学"] * 20
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = load_job_recipe("pretrain-zh-tiny")
    data = dataclasses.replace(cfg.data, ngram_min_freq=2, ngram_min_pmi=0.5, ngram_min_entropy=None, workers=1)
    full, top = tmp_path / "all.txt", tmp_path / "top.txt"
    build_lexicon_file(dataclasses.replace(cfg, data=data), [corpus], tmp_path / "v.txt", full, None)
    capped = dataclasses.replace(cfg, data=dataclasses.replace(data, ngram_max_size=4))
    line = build_lexicon_file(capped, [corpus], tmp_path / "v.txt", top, None)
    lines = full.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 4 and top.read_text(encoding="utf-8").splitlines() == lines[:4]
    assert "built lexicon: 4 n-grams" in line and "the 4 most frequent" in line
    msg = error("pretrain", "-r", "pretrain-zh-tiny", "--set", "data.ngram_max_size=0", "-o", str(tmp_path / "x"))
    assert "ngram_max_size: expected an integer >= 1" in msg
