"""`zen finetune` end to end on small made-up data with tiny models: every tagging task and encoder path
(from scratch, released ZEN, zen directory, BERT, CHTE from characters and on ZEN), per-epoch dev
evaluation and the exported best model, resume, determinism, recipes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.conftest import PD98, REF, ROOT, needs_data, write
from tests.test_pretrain_cli import error as cli_error
from tests.test_pretrain_cli import records
from tests.test_tasks_tagging import (
    NGRAM,
    TINY,
    TINY_CHTE,
    VOCAB,
    write_task_data,
)
from zencli.cli.app import app
from zencli.config import list_recipes, load_job_recipe
from zencli.tasks.base import task_names
from zencli.tasks.model_dir import load_task_model
from zencli.train.checkpoint import load_checkpoint

runner = CliRunner()



def _sets(sets: list[str]) -> list[str]:
    return [x for s in sets for x in ("--set", s)]


def finetune(tmp: Path, task: str, *args: str, out: str = "run", steps: int = 6, dev: bool = True,
             scratch: bool = True) -> tuple[object, Path]:
    """Run `zen finetune` in process on the made-up data of `task`; returns (result, output dir)."""
    data = write_task_data(tmp, task)
    out_dir = tmp / out
    cmd = ["finetune", "--task", task, "--train", str(data), "-o", str(out_dir), "--max-steps", str(steps),
           "--quiet", *_sets(TINY)]
    if dev:
        cmd += ["--dev", str(data), "--test", str(data)]
    if scratch:
        cmd += ["--vocab", str(VOCAB), "--ngram", str(NGRAM)]
    r = runner.invoke(app, [*cmd, *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r, out_dir


def error(*args: str) -> str:
    return cli_error("finetune", "--quiet", *args)


# --- the three tasks -------------------------------------------------------------------------------------

@pytest.mark.parametrize("task,decoder", [("cws", "softmax"), ("pos", "softmax"), ("ner", "crf")])
def test_without_a_decoder_ner_gets_a_crf_and_the_others_softmax(tmp_path, task, decoder):
    _, out = finetune(tmp_path, task, steps=1)
    meta = json.loads((out / "model" / "task.json").read_text(encoding="utf-8"))
    assert meta["task"]["decoder"] == decoder  # saved resolved: the model loads as it trained


@pytest.mark.parametrize("task,decoder", [("cws", "softmax"), ("pos", "softmax"), ("ner", "crf")])
def test_each_tagging_task_trains_evaluates_every_epoch_and_exports(tmp_path, task, decoder):
    r, out = finetune(tmp_path, task, "--decoder", decoder, "--set", "train.patience=0")
    model_dir = out / "model"
    assert {"config.json", "model.safetensors", "vocab.txt", "ngram.txt", "task.json", "dev_scores.json",
            "test_scores.json"} <= {p.name for p in model_dir.iterdir()}
    assert (out / "checkpoints").is_dir() and not (model_dir / "checkpoints").exists()
    # 6 sentences, batch 4: 2 steps per epoch, but a run evaluates at least 5 times: dev is scored every step
    assert [e["step"] for e in records(out, "eval")] == [1, 2, 3, 4, 5, 6]
    dev = json.loads((model_dir / "dev_scores.json").read_text(encoding="utf-8"))
    assert dev["task"] == task and 0 <= dev["main_score"] <= 1 and dev["unseen_gold_label_count"] == 0
    assert dev["step"] in range(1, 7) and dev["prediction_format"] == "model"
    best = max(records(out, "eval"), key=lambda e: e["f1"])
    assert dev["main_score"] == pytest.approx(best["f1"])  # the exported model is the best evaluation's
    meta = json.loads((model_dir / "task.json").read_text(encoding="utf-8"))
    assert meta["task"]["name"] == task and meta["task"]["decoder"] == decoder and meta["encoder"] == "zen2"
    loaded = load_task_model(out)  # the output directory resolves to its model/ folder
    assert loaded.path == model_dir and loaded.task.name == task
    assert f"{task} f1" in r.output or "dev f1" in r.output


def test_an_unseen_dev_label_is_counted_not_a_crash(tmp_path):
    dev = write(tmp_path / "dev.txt", ["我们/r 在/p 北京/ns 学习/v", "他/XX 是/v 学生/n"])
    _, out = finetune(tmp_path, "pos", "--dev", str(dev), dev=False)
    scores = json.loads((out / "model" / "dev_scores.json").read_text(encoding="utf-8"))
    assert scores["unseen_gold_labels"] == {"S-XX": 1} and scores["unseen_gold_label_count"] == 1
    assert scores["gold"] == 7 and scores["correct"] <= 6  # the unknown tag can never be right


# --- encoders ----------------------------------------------------------------------------------------------

def test_from_a_released_zen_directory(tmp_path):
    from zencli.model.released import import_released

    _, out = finetune(tmp_path, "ner", "--model", str(REF), "--decoder", "crf", "--lr", "1e-12", steps=2,
                      scratch=False)
    model_dir = out / "model"
    assert (model_dir / "vocab.txt").read_bytes() == (REF / "vocab.txt").read_bytes()
    assert len((model_dir / "ngram.txt").read_text(encoding="utf-8").splitlines()) == 99
    loaded = load_task_model(model_dir)
    assert loaded.model.encoder.config.hidden_size == 64 and loaded.spec.encoder == "zen2"
    released = import_released(REF).model.bert.state_dict()
    for k, v in loaded.model.encoder.state_dict().items():  # lr ~0: the encoder is the released one
        torch.testing.assert_close(v, released[k], atol=1e-6, rtol=0)
    assert "released ZEN2 directory" in json.loads((model_dir / "task.json").read_text())["source"]


def test_from_a_zen_directory_and_from_a_fine_tuned_model(tmp_path):
    r = runner.invoke(app, ["model", "import", str(REF), "-o", str(tmp_path / "zen")])
    assert r.exit_code == 0, r.output
    _, out = finetune(tmp_path, "cws", "--model", str(tmp_path / "zen"), steps=2, scratch=False)
    cws = load_task_model(out)
    assert cws.model.encoder.config.num_hidden_layers == 3
    # A fine-tuned model's encoder can start another task (its head is new).
    _, out2 = finetune(tmp_path, "ner", "--model", str(out / "model"), out="run2", steps=2, scratch=False)
    ner = load_task_model(out2)
    assert ner.task.name == "ner" and ner.model.encoder.config.hidden_size == 64


def test_a_bert_directory_as_plain_bert_or_inside_a_new_zen2(tmp_path):
    from zencli.model.config import ZenConfig
    from zencli.model.encoder import ZenModel
    from zencli.model.released import export_released

    bert = ZenModel(ZenConfig(vocab_size=200, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=32, max_position_embeddings=64, encoder="bert"))
    export_released(bert, tmp_path / "bert", vocab=VOCAB)
    _, out = finetune(tmp_path, "cws", "--model", str(tmp_path / "bert"), steps=2, scratch=False)
    assert load_task_model(out).spec.encoder == "bert"
    assert not (out / "model" / "ngram.txt").exists()
    _, out2 = finetune(tmp_path, "cws", "--model", str(tmp_path / "bert"), "--encoder", "zen2", "--ngram",
                       str(NGRAM), out="run2", steps=2, scratch=False)
    zen = load_task_model(out2)
    assert zen.spec.encoder == "zen2" and zen.model.encoder.config.word_size == 100
    torch.testing.assert_close(zen.model.encoder.embeddings.char_embeddings.weight,
                               bert.embeddings.char_embeddings.weight, atol=1e-2, rtol=0)  # 2 steps moved it little


def test_chte_from_characters_and_on_a_pretrained_encoder(tmp_path):
    _, out = finetune(tmp_path, "ner", "--encoder", "chte", *_sets(TINY_CHTE), scratch=False)
    model_dir = out / "model"
    meta = json.loads((model_dir / "task.json").read_text(encoding="utf-8"))
    assert meta["encoder"] is None and meta["chte"]["cnn_windows"] == [2, 3]
    assert meta["task"]["decoder"] == "crf"  # the paper's decoder is CHTE's default
    assert (model_dir / "bigrams.json").is_file() and not (model_dir / "ngram.txt").exists()
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and "馆" in vocab  # from the training chars
    assert load_task_model(model_dir).model.encoder is None

    _, out2 = finetune(tmp_path, "ner", "--encoder", "chte", "--model", str(REF), *_sets(TINY_CHTE[:6]),
                       out="run2", steps=2, scratch=False)
    loaded = load_task_model(out2)
    assert loaded.spec.encoder == "zen2" and loaded.model.chte.config.feature_size == 64


def test_chte_paper_settings_come_from_the_recipe(tmp_path):
    cfg = load_job_recipe("finetune-resume-ner", expected_job="finetune")
    from zencli.tasks.network_build import chte_config

    config = chte_config(cfg.model, feature_size=None, char_vocab_size=100, bigram_vocab_size=50)
    assert (config.head_dim, config.ffn_size, config.n_heads, config.n_linear_heads) == (18, 432, 8, 2)
    assert config.cnn_windows == (2, 3, 4, 5, 6, 7) and (config.embed_dropout, config.fc_dropout) == (0.3, 0.2)
    weibo = load_job_recipe("finetune-weibo-ner", expected_job="finetune")
    assert chte_config(weibo.model, feature_size=None, char_vocab_size=9, bigram_vocab_size=9).head_dim == 16


# --- resume and determinism -------------------------------------------------------------------------------

def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def test_a_second_invocation_resumes_from_the_checkpoint(tmp_path):
    args = ["--set", "train.save_every=2", "--set", "train.keep_last=5", "--set", "train.patience=0"]
    _, out = finetune(tmp_path, "cws", *args)
    first = _weights(out / "model")
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("step-*.pt")) == [f"step-0000000{i}.pt" for i in (2, 4, 6)]
    # As if the run had been killed after step 2's checkpoint: the later checkpoints never got written.
    for name in ("step-00000004.pt", "step-00000006.pt"):
        (ckpts / name).unlink()
    r2, _ = finetune(tmp_path, "cws", *args, "--set", "train.data_workers=2")  # batches from worker processes
    assert "resumed at step 2" in r2.output
    resumed = _weights(out / "model")
    assert first.keys() == resumed.keys()
    for k in first:
        assert torch.equal(first[k], resumed[k]), k  # bit for bit the uninterrupted run
    r3, _ = finetune(tmp_path, "cws", *args)  # finished: nothing left to train, the model is re-exported
    assert "resumed at step 6" in r3.output
    msg = error("--task", "cws", "--train", str(tmp_path / "cws.txt"), "-o", str(out), "--max-steps", "6",
                "--vocab", str(VOCAB), "--ngram", str(NGRAM), *_sets(TINY), "--lr", "0.5")
    assert "different run" in msg and "--overwrite" in msg


def test_two_processes_with_nproc_write_from_rank_0_and_resume_with_one(tmp_path, monkeypatch):
    from tests.test_pretrain_cli import audit_nproc_writes

    audit = audit_nproc_writes(tmp_path, tmp_path / "run", monkeypatch)
    args = ["--set", "train.save_every=2", "--set", "train.keep_last=5", "--set", "train.patience=0"]
    _, out = finetune(tmp_path, "cws", "--nproc", "2", *args)  # batch 4: 2 processes × 2
    assert [e["step"] for e in records(out, "eval")] == [1, 2, 3, 4, 5, 6]  # rank 0 evaluated, the other waited
    assert {"dev_scores.json", "test_scores.json", "model.safetensors"} <= {p.name for p in (out / "model").iterdir()}
    assert load_checkpoint(out / "checkpoints" / "step-00000006.pt")["world_size"] == 2
    assert (audit / "rank-1.txt").read_text(encoding="utf-8") == ""  # rank 1 wrote nothing
    rank0 = (audit / "rank-0.txt").read_text(encoding="utf-8")
    assert all(name in rank0 for name in ("step-00000006.pt", "best.pt", "model.safetensors", "dev_scores.json"))
    # Continue with one process from the step-2 checkpoint: a note about the random streams, not a crash.
    for name in ("step-00000004.pt", "step-00000006.pt"):
        (out / "checkpoints" / name).unlink()
    data = tmp_path / "cws.txt"
    r = runner.invoke(app, ["finetune", "--task", "cws", "--train", str(data), "--dev", str(data), "-o", str(out),
                            "--max-steps", "6", "--vocab", str(VOCAB), "--ngram", str(NGRAM), *_sets(TINY), *args],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "resumed at step 2" in r.output
    assert "resuming a 2-process checkpoint with 1 processes" in " ".join(r.output.split())
    assert load_checkpoint(out / "checkpoints" / "step-00000006.pt")["world_size"] == 1


def test_same_seed_same_model_other_seed_other_model(tmp_path):
    _, a = finetune(tmp_path, "ner", out="a", dev=False)
    _, b = finetune(tmp_path, "ner", out="b", dev=False)
    _, c = finetune(tmp_path, "ner", "--seed", "7", out="c", dev=False)
    wa, wb, wc = _weights(a / "model"), _weights(b / "model"), _weights(c / "model")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)
    assert not (a / "model" / "dev_scores.json").exists()  # no dev file: the last model, no scores


# --- recipes and errors -----------------------------------------------------------------------------------

@pytest.mark.usefixtures("dataset_folders")
def test_finetune_recipes_are_valid_and_epochs_set_the_step_count(tmp_path):
    names = [n for n in list_recipes() if n.startswith("finetune-")]
    assert {"finetune-pd98-cws", "finetune-pd98-pos", "finetune-pd98-ner", "finetune-msr-cws",
            "finetune-ctb5-pos", "finetune-msra-ner", "finetune-weibo-ner", "finetune-resume-ner"} <= set(names)
    for name in names:
        cfg = load_job_recipe(name, expected_job="finetune")
        assert cfg.task.name in task_names()
    from zencli.jobs.finetune import build_config

    cfg = build_config("finetune-pd98-cws", [], {"train.max_steps": 50})
    assert cfg.epochs is None and cfg.train.max_steps == 50  # an explicit step count wins over epochs
    data = write_task_data(tmp_path, "cws")
    r = runner.invoke(app, ["finetune", "--recipe", "finetune-pd98-cws", "--train", str(data), "--dev",
                            str(data), "--test", str(data), "--vocab", str(VOCAB), "--ngram", str(NGRAM),
                            "-o", str(tmp_path / "run"), "--quiet", "--epochs", "2", *_sets(TINY)],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["max_steps"] == 3  # ⌈2 × 6 / 4⌉


@pytest.mark.usefixtures("dataset_folders")
def test_a_typed_step_count_or_warmup_replaces_the_recipes_epochs_or_ratio(tmp_path):
    """--set train.max_steps=N with a recipe that sets epochs trains N steps (it used to train the epochs)."""
    data = write_task_data(tmp_path, "cws")
    r = runner.invoke(app, ["finetune", "--recipe", "finetune-pd98-cws", "--train", str(data), "--dev", str(data),
                            "--test", str(data), "--vocab", str(VOCAB),
                            "--ngram", str(NGRAM), "-o", str(tmp_path / "run"), "--quiet", *_sets(TINY),
                            "--set", "train.max_steps=2", "--set", "train.warmup_steps=1"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert (settings["max_steps"], settings["warmup_steps"]) == (2, 1)  # 3 epochs would be ⌈3 × 6 / 4⌉ = 5
    written = load_job_recipe(tmp_path / "run" / "recipe.yaml")  # the run's recipe reads back the same
    assert (written.epochs, written.train.max_steps, written.warmup_ratio, written.train.warmup_steps) == (
        None, 2, None, 1)


def test_recipe_show_prints_the_step_count_that_will_run():
    shown = runner.invoke(app, ["recipe", "show", "finetune-pd98-cws"])
    assert shown.exit_code == 0, shown.output
    assert "  max_steps: null\n" in shown.output and "epochs: auto\n" in shown.output
    assert "# train.max_steps: null = from epochs: auto" in shown.output
    typed = runner.invoke(app, ["recipe", "show", "finetune-pd98-cws", "--set", "train.max_steps=200"])
    assert "  max_steps: 200\n" in typed.output and "epochs: null\n" in typed.output
    assert "# train.max_steps" not in typed.output
    plain = runner.invoke(app, ["recipe", "show", "finetune-resume-ner"])  # epochs, no warmup_ratio
    assert "  warmup_steps: 0\n" in plain.output and "# train.warmup_steps" not in plain.output


def test_epochs_and_max_steps_together_are_an_error_naming_both(tmp_path):
    from zencli.errors import ZenError
    from zencli.jobs.finetune import build_config

    for overrides, options in ((["epochs=2"], {"train.max_steps": 5}), (["epochs=2", "train.max_steps=5"], {}),
                               ([], {"epochs": 2.0, "train.max_steps": 5})):
        with pytest.raises(ZenError, match="epochs and train.max_steps: both given on the command line"):
            build_config("finetune-pd98-cws", overrides, options)
    recipe = write(tmp_path / "both.yaml", ["job: finetune", "task: {name: cws}", "epochs: 2",
                                            "train: {max_steps: 5}"])
    with pytest.raises(ZenError, match=r"both.yaml: epochs and train.max_steps are both set"):
        build_config(str(recipe), [], {})
    with pytest.raises(ZenError, match=r"both.yaml: epochs and train.max_steps are both set"):
        load_job_recipe(recipe)
    assert build_config(str(recipe), ["epochs=null"], {}).train.max_steps == 5  # typed null: the other one
    assert "warmup_ratio and train.warmup_steps" in error("--recipe", "finetune-pd98-cws", "--set",
                                                          "warmup_ratio=0.2", "--set", "train.warmup_steps=3")


@pytest.mark.usefixtures("dataset_folders")
def test_without_a_recipe_a_model_from_scratch_takes_the_tasks_tiny_recipe(tmp_path):
    """Not ModelSection's 12 × 768 (135 s a step on PD98 NER): the task's from-scratch recipe, with the files given."""
    from zencli.jobs.finetune import build_config

    data = write_task_data(tmp_path, "ner")
    files = {"task.name": "ner", "data.train": data, "model.vocab": VOCAB, "model.ngram": NGRAM}
    cfg = build_config(None, [], files)
    recipe = build_config("finetune-pd98-ner", [], {})
    assert (cfg.model.hidden_size, cfg.model.num_hidden_layers, cfg.model.max_ngrams) == (64, 2, 32)
    assert (cfg.task, cfg.train.lr, cfg.epochs) == (recipe.task, recipe.train.lr, recipe.epochs)
    assert (cfg.data.train, cfg.data.dev, cfg.data.test, cfg.model.vocab, cfg.model.ngram) == (
        data, None, None, VOCAB, NGRAM)  # the recipe's own files are not used
    assert str(cfg.train.output_dir) == "runs/finetune"
    typed = build_config(None, ["model.hidden_size=32", "train.lr=1e-4"], {**files, "train.max_steps": 7})
    assert (typed.model.hidden_size, typed.train.lr, typed.train.max_steps, typed.epochs) == (32, 1e-4, 7, None)
    # a task without a recipe of its own: the sentence-level recipe's encoder, with its own task settings
    dc = build_config(None, [], {**files, "task.name": "dc"})
    assert (dc.task.name, dc.task.decoder, dc.model.hidden_size, dc.data.train) == ("dc", None, 64, data)
    # a pretrained model brings its sizes: the defaults for fine-tuning one are unchanged
    pre = build_config(None, [], {**files, "model.pretrained": tmp_path / "m"})
    assert (pre.train.lr, pre.epochs, pre.task.decoder) == ("auto", None, None)  # the rule: zencli.tasks.transfer
    r, _ = finetune(tmp_path, "ner", steps=1)
    assert "new zen2 encoder (1 × 16, 1 n-gram layer)" in r.output  # TINY's sizes, said up front


def test_errors_are_one_line_and_name_the_key(tmp_path):
    data = str(write_task_data(tmp_path, "cws"))
    base = ["--task", "cws", "--train", data, "-o", str(tmp_path / "x"), *_sets(TINY)]
    assert "model.vocab" in error(*base)
    assert "model.ngram" in error(*base, "--vocab", str(VOCAB))
    assert "no such model directory" in error(*base, "--model", str(tmp_path / "nope"))
    assert "unknown task 'cwz' (did you mean 'cws'?)" in error(*base, "--task", "cwz", "--vocab", str(VOCAB),
                                                               "--ngram", str(NGRAM))
    assert "data.train" in error("--task", "cws", "--vocab", str(VOCAB), "--ngram", str(NGRAM))
    assert "task.name: no task given" in error("--train", data, "--vocab", str(VOCAB), "--ngram", str(NGRAM))
    assert "holds a zen2 encoder" in error(*base, "--model", str(REF), "--encoder", "zen1")
    assert "its own vocab.txt" in error(*base, "--model", str(REF), "--vocab", str(VOCAB))
    assert "model.chte." in error(*base, "--encoder", "chte", "--set", "model.chte.cnn_windows=[2]")
    msg = error(*base, "--vocab", str(VOCAB), "--ngram", str(NGRAM), "--set", "task.max_seq_len=2")
    assert "task.max_seq_len: expected >= 3" in msg


def test_a_bad_data_line_is_a_one_line_error_in_a_real_process(tmp_path):
    bad = write(tmp_path / "bad.tsv", ["北\tB-LOC", "京\tE-LOC", "大\tO\textra", ""])
    p = subprocess.run([sys.executable, "-m", "zencli", "finetune", "--task", "ner", "--train", str(bad),
                        "--vocab", str(VOCAB), "--ngram", str(NGRAM), "-o", str(tmp_path / "run")],
                       cwd=ROOT, capture_output=True, text=True, check=False)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zen: error: ") and f"{bad}:3: expected 2 columns" in lines[0]


# --- end to end on PD98 (slow; ZEN_SLOW=1) -----------------------------------------------------------------

@pytest.mark.slow
@needs_data(PD98)
def test_pd98_cws_from_scratch_learns(tmp_path):
    """The tiny PD98 CWS recipe for a few hundred steps on CPU: dev word F1 well above a trivial segmenter."""
    import time

    from zencli.config.schema import LexiconConfig
    from zencli.lexicon import extract
    from zencli.text.vocab import write_sidecar
    from zencli.text.vocab_build import build_vocab

    pd98 = PD98
    built = build_vocab([pd98 / "raw" / "train.txt"], language="zh")
    built.vocab.save(tmp_path / "vocab.txt")
    write_sidecar(tmp_path / "vocab.txt", built.info)
    extract.build(LexiconConfig(corpus=[pd98 / "raw" / "train.txt"], output=tmp_path / "ngram.txt", language="zh"))
    dev_lines = (pd98 / "cws" / "dev.txt").read_text(encoding="utf-8").splitlines()[:400]
    dev = write(tmp_path / "dev.txt", dev_lines)
    t0 = time.perf_counter()
    r = runner.invoke(app, ["finetune", "--recipe", "finetune-pd98-cws", "--vocab", str(tmp_path / "vocab.txt"),
                            "--ngram", str(tmp_path / "ngram.txt"), "--dev", str(dev), "--set", "data.test=null",
                            "-o", str(tmp_path / "run"), "--max-steps", "600", "--set", "train.eval_every=300",
                            "--set", "train.num_threads=1", "--quiet"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    scores = json.loads((tmp_path / "run" / "model" / "dev_scores.json").read_text(encoding="utf-8"))
    print(f"PD98 CWS dev F1 {scores['f1']:.4f} after 600 steps in {time.perf_counter() - t0:.0f} s")
    assert scores["f1"] > 0.85
