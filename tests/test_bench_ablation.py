"""`zen bench ablation` on a made-up PD98-layout corpus with 1-layer micro models: the plan, running
variants × seeds, skipping finished runs, resuming an interrupted run, stopping at the budget, the
report's statistics and tables (with and without matplotlib), and one-line errors."""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zencli.bench.ablation import CLAIMS, VARIANT_NAMES, AblationSettings, Plan
from zencli.bench.ablation_report import collect, mean_std, render_markdown, write_report
from zencli.bench.ablation_runner import RESULTS, is_finished, run_plan
from zencli.cli.app import app
from zencli.errors import ZenError

runner = CliRunner()

# -- a made-up corpus in the shared PD98 layout -------------------------------------------------------

_CHARS = [chr(c) for c in range(0x4E00 + 500, 0x4E00 + 590)]


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_CHARS) for _ in range(n))


def make_corpus(root: Path, seed: int = 3) -> Path:
    """raw/, cws/, ner/, pos/ (and sentiment/ for sa) train/dev/test of invented sentences: a word-level
    Markov chain over 50 plain words with person, place and organisation names mixed in (BMES entity
    labels), as PD98 lays them out."""
    rng = random.Random(seed)
    plain = [_word(rng, rng.choice([1, 2, 2, 3])) for _ in range(50)]
    names = {"PER": [_word(rng, rng.choice([2, 3])) for _ in range(8)],
             "LOC": [_word(rng, rng.choice([1, 2])) for _ in range(6)],
             "ORG": [_word(rng, 4) for _ in range(4)]}

    def sentence() -> list[tuple[str, str]]:
        words, i = [], rng.randrange(50)
        for _ in range(rng.randint(5, 11)):
            if rng.random() < 0.25:
                kind = rng.choice(list(names))
                words.append((rng.choice(names[kind]), kind))
            else:
                i = (i * 7 + rng.choice([1, 2, 3])) % 50
                words.append((plain[i], "O"))
        return words

    counts = {"train": 160, "dev": 24, "test": 24}
    for split, n in counts.items():
        sents = [sentence() for _ in range(n)]
        raw = ["".join(w for w, _ in s) for s in sents]
        cws = [" ".join(w for w, _ in s) for s in sents]
        ner_blocks = []
        for s in sents:
            rows = []
            for w, kind in s:
                if kind == "O":
                    rows += [f"{c}\tO" for c in w]
                elif len(w) == 1:
                    rows.append(f"{w}\tS-{kind}")
                else:
                    rows += [f"{w[0]}\tB-{kind}"] + [f"{c}\tM-{kind}" for c in w[1:-1]] + [f"{w[-1]}\tE-{kind}"]
            ner_blocks.append("\n".join(rows) + "\n")
        tags = {"O": "n", "PER": "nr", "LOC": "ns", "ORG": "nt"}
        pos_blocks = ["".join(f"{c}\t{p}-{tags[kind]}\n" for w, kind in s
                              for c, p in zip(w, ["S"] if len(w) == 1 else ["B"] + ["M"] * (len(w) - 2) + ["E"]))
                      for s in sents]
        # sentiment: "positive" when the sentence names a person (a rule the encoder can learn)
        sa = [f"{int(any(k == 'PER' for _, k in s))}\t{x}\n" for s, x in zip(sents, raw)]
        for folder, ext, text in (("raw", "txt", "".join(x + "\n" for x in raw)),
                                  ("cws", "txt", "".join(x + "\n" for x in cws)),
                                  ("ner", "tsv", "\n".join(ner_blocks) + "\n"),
                                  ("pos", "tsv", "\n".join(pos_blocks) + "\n"),
                                  ("sentiment", "tsv", "".join(sa))):
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / f"{split}.{ext}").write_text(text, encoding="utf-8")
    return root


MICRO_PRETRAIN = ["model.hidden_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2",
                  "model.intermediate_size=64", "model.num_hidden_word_layers=1", "data.max_seq_len=32",
                  "data.workers=1", "data.examples_per_shard=500", "data.heldout_examples=16",
                  "data.ngram_min_freq=5", "train.batch_size=8", "train.log_every=1", "train.eval_every=2",
                  "train.save_every=2", "train.tensorboard=false"]
MICRO_FINETUNE = ["train.batch_size=8", "task.max_seq_len=32", "train.log_every=1", "train.save_every=2",
                  "train.tensorboard=false", "model.chte.n_heads=4", "model.chte.n_linear_heads=2",
                  "model.chte.cnn_windows=[2,3]", "model.chte.head_dim=8", "model.chte.ffn_size=32"]


def micro_settings(data: Path, out: Path, **kw) -> AblationSettings:
    base = dict(task="ner", data=data, out=out, seeds=2, pretrain_steps=4, finetune_steps=4, scratch_steps=4,
                only=["zen2", "chte"], pretrain_sets=list(MICRO_PRETRAIN), finetune_sets=list(MICRO_FINETUNE))
    base.update(kw)
    return AblationSettings(**base)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("pd98"))


def _sets(flag: str, sets: list[str]) -> list[str]:
    return [x for s in sets for x in (flag, s)]


def cli(data: Path, out: Path, *args: str, seeds: int = 2, only: str = "zen2,chte", task: str = "ner"):
    """`zen bench ablation` in process with the micro settings; returns the CliRunner result."""
    cmd = ["bench", "ablation", "--task", task, "--data", str(data), "--out", str(out), "--seeds", str(seeds),
           "--pretrain-steps", "4", "--finetune-steps", "4", "--scratch-steps", "4", "--only", only, "--quiet",
           *_sets("--set-pretrain", MICRO_PRETRAIN), *_sets("--set-finetune", MICRO_FINETUNE), *args]
    return runner.invoke(app, cmd)


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory) -> tuple[Path, object]:
    """The micro ablation (zen2-absolute + chte, 2 seeds) run once through the CLI: (out dir, CLI result)."""
    out = tmp_path_factory.mktemp("ablation") / "out"
    r = cli(corpus, out, only="zen2-absolute,chte")
    assert r.exit_code == 0, r.output
    return out, r


# -- the plan -------------------------------------------------------------------------------------------

def test_the_default_plan_has_every_variant_and_seed_in_variant_major_order(tmp_path):
    plan = Plan(AblationSettings(task="ner", data=tmp_path, out=tmp_path / "out"))
    assert [v.name for v in plan.variants] == list(VARIANT_NAMES) and plan.seeds == [1, 2, 3]
    runs = plan.runs()
    pretrained = [v.name for v in plan.variants if v.pretrain is not None]
    assert pretrained == ["zen2", "zen1", "bert", "zen2-unweighted", "zen2-absolute", "zen2-charmask", "zen2-rtd",
                          "zen2-pmi"]
    assert [r.kind for r in runs].count("lexicon") == 1 and runs[0].kind == "lexicon"
    assert [r.variant for r in runs if r.kind == "pretrain"] == pretrained
    fine = [(r.variant, r.seed) for r in runs if r.kind == "finetune"]
    assert len(fine) == 12 * 3 and len(set(fine)) == 36
    assert fine == [(v, s) for v in VARIANT_NAMES for s in (1, 2, 3)]  # all seeds of a variant, then the next
    for v in pretrained:  # a variant's pretraining comes right before its seeds
        i = runs.index(next(p for p in runs if p.kind == "pretrain" and p.variant == v))
        assert [(r.kind, r.variant, r.seed) for r in runs[i + 1:i + 4]] == [("finetune", v, s) for s in (1, 2, 3)]
    assert len({r.dir for r in runs}) == len(runs)
    assert runs[-1].dir == tmp_path / "out" / "finetune" / "chte-no-cnn" / "seed-3"
    # only CHTE variants: nothing to pretrain, no lexicon
    scratch = Plan(AblationSettings(task="cws", data=tmp_path, out=tmp_path, only=["chte-no-cnn", "chte"], seeds=1))
    assert [r.label for r in scratch.runs()] == ["finetune chte seed 1", "finetune chte-no-cnn seed 1"]
    assert {c.better for c in CLAIMS} | {c.worse for c in CLAIMS} == set(VARIANT_NAMES)


def test_each_variant_changes_one_thing_in_its_recipes(corpus, tmp_path):
    from zencli.tasks.network_build import chte_config

    plan = Plan(AblationSettings(task="ner", data=corpus, out=tmp_path, pretrain_steps=50, finetune_steps=30))
    pre = {v.name: plan.pretrain_config(v) for v in plan.variants if v.pretrain is not None}
    facts = {n: (c.model.encoder, c.model.ngram_weighting, c.masking.scheme) for n, c in pre.items()}
    assert facts == {"zen2": ("zen2", "frequency", "ngram"), "zen1": ("zen1", "binary", "char"),
                     "bert": ("bert", None, "char"), "zen2-unweighted": ("zen2", "binary", "ngram"),
                     "zen2-absolute": ("zen1", "frequency", "ngram"), "zen2-charmask": ("zen2", "frequency", "char"),
                     "zen2-rtd": ("zen2", "frequency", "ngram"), "zen2-pmi": ("zen2", "frequency", "ngram")}
    assert pre["zen2-rtd"].objective == "rtd" and {c.objective for n, c in pre.items() if n != "zen2-rtd"} == {"mlm"}
    assert pre["zen2-pmi"].data.ngram is None and pre["zen2-pmi"].data.ngram_min_entropy == 1.5
    from zencli.jobs.pretrain import build_config  # the recipe key the weighting ablation needs

    with pytest.raises(ZenError, match=r"model\.ngram_weighting: expected one of 'frequency', 'binary' or null"):
        build_config("pretrain-zh-tiny", ["model.ngram_weighting=int_cast"], {})
    for name, c in pre.items():  # same corpus, lexicon, sizes and steps for every pretrained variant
        assert c.data.corpus == [corpus / "raw" / "train.txt"] and c.data.heldout == [corpus / "raw" / "dev.txt"]
        assert c.data.vocab == tmp_path / "lexicon" / "vocab.txt"
        assert c.data.ngram == (None if name == "zen2-pmi" else tmp_path / "lexicon" / "ngram.txt")
        assert (c.train.max_steps, c.train.warmup_steps, c.model.hidden_size) == (50, 5, 128)
        assert c.train.output_dir == tmp_path / "pretrain" / name
    fine = {v.name: plan.finetune_config(v, 2) for v in plan.variants}
    for name, c in fine.items():  # from scratch: as many updates as pretraining + fine-tuning (50 + 30)
        steps = 30 if name in pre else 80
        assert (c.train.seed, c.train.max_steps, c.train.eval_every, c.epochs) == (2, steps, steps // 5, None)
        assert c.data.test == corpus / "ner" / "test.tsv" and c.model.vocab is None and c.model.ngram is None
        assert c.train.output_dir == tmp_path / "finetune" / name / "seed-2"
    assert fine["zen2-absolute"].model.pretrained == tmp_path / "pretrain" / "zen2-absolute" / "model"
    assert fine["zen2-absolute"].model.encoder == "zen1" and fine["bert"].model.encoder == "bert"

    def arch(name: str):
        c = fine[name]
        assert c.model.encoder == "chte" and c.model.pretrained is None and c.task.decoder == "crf"
        a = chte_config(c.model, feature_size=None, char_vocab_size=20, bigram_vocab_size=20)
        return a.n_cnn_heads, tuple(a.cnn_windows), a.gated_residual, a.concat_embeddings

    assert arch("chte") == (6, (2, 3, 4, 5, 6, 7), True, True)
    assert arch("chte-plain-residual") == (6, (2, 3, 4, 5, 6, 7), False, True)
    assert arch("chte-no-cnn") == (0, (), True, True)
    assert arch("transformer-crf") == (0, (), False, False)
    chosen = Plan(AblationSettings(task="ner", data=corpus, out=tmp_path, pretrain_steps=50, finetune_steps=30,
                                   scratch_steps=200, only=["chte"]))
    assert chosen.finetune_config(chosen.variants[0], 1).train.max_steps == 200
    assert chosen.settings.fingerprint()["scratch_steps"] == 200
    epochs = Plan(AblationSettings(task="cws", data=corpus, out=tmp_path, finetune_steps=None, finetune_epochs=1.5))
    c = epochs.finetune_config(epochs.variants[0], 1)
    assert c.epochs == 1.5 and c.data.train == corpus / "cws" / "train.txt" and c.train.eval_every == "auto"


@pytest.mark.parametrize("args,needle", [
    (["--only", "zen3"], "unknown variant 'zen3'"),
    (["--seeds", "0"], "--seeds: expected an integer >= 1"),
    (["--finetune-epochs", "1"], "give one of them, not both"),
    (["--scratch-steps", "0"], "--scratch-steps: expected an integer >= 1"),
    (["--budget", "0"], "--budget: expected minutes > 0"),
])
def test_bad_options_are_one_line_errors(corpus, tmp_path, args, needle):
    r = cli(corpus, tmp_path / "out", *args)
    assert r.exit_code != 0 and isinstance(r.exception, ZenError), r.output
    assert needle in str(r.exception) and "\n" not in str(r.exception)


def test_a_bad_recipe_key_fails_once_before_anything_runs(corpus, tmp_path):
    r = cli(corpus, tmp_path / "out", "--set-finetune", "train.lrr=1e-3")
    assert isinstance(r.exception, ZenError) and "unknown key 'train.lrr'" in str(r.exception)
    r = cli(corpus, tmp_path / "out", "--set-pretrain", "masking.scheme=words")
    assert isinstance(r.exception, ZenError) and "masking.scheme" in str(r.exception)
    assert not (tmp_path / "out").exists()


def test_a_failed_run_is_reported_and_the_others_go_on(corpus, tmp_path, monkeypatch):
    from zencli.bench import ablation_runner

    real = ablation_runner.run_finetune

    def diverge_chte(cfg, **kw):
        if "/chte/" in str(cfg.train.output_dir):
            raise ZenError("step 3: the loss is nan — training diverged; lower lr")
        return real(cfg, **kw)

    monkeypatch.setattr(ablation_runner, "run_finetune", diverge_chte)
    r = cli(corpus, tmp_path / "out", seeds=1, only="chte,transformer-crf")
    assert r.exit_code == 1, r.output
    assert "failed: finetune chte seed 1" in r.output and "training diverged" in r.output
    assert "1 run(s) failed: 1 of 2 runs finished, 1 left" in r.output
    assert (tmp_path / "out" / "finetune" / "transformer-crf" / "seed-1" / RESULTS).is_file()
    assert "- finetune chte seed 1" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    monkeypatch.setattr(ablation_runner, "run_finetune", real)  # the next invocation retries it
    r = cli(corpus, tmp_path / "out", seeds=1, only="chte,transformer-crf")
    assert r.exit_code == 0 and "all 2 runs finished (1 in this invocation" in r.output


def test_a_missing_split_or_another_task_is_a_one_line_error(corpus, tmp_path):
    r = runner.invoke(app, ["bench", "ablation", "--task", "dc", "--data", str(corpus)])
    assert isinstance(r.exception, ZenError) and "--task: expected one of ner, cws, pos, sa" in str(r.exception)
    with pytest.raises(ZenError, match=r"--task-data: the sa splits are not part of the pretraining dataset"):
        AblationSettings(task="sa", data=corpus, out=tmp_path / "sa").task_file("train")
    broken = make_corpus(tmp_path / "broken")
    (broken / "raw" / "dev.txt").unlink()
    r = cli(broken, tmp_path / "out")
    assert isinstance(r.exception, ZenError) and "raw/dev.txt: no such file" in str(r.exception)
    assert not (tmp_path / "out").exists()  # checked before anything is written


# -- running ------------------------------------------------------------------------------------------

def test_two_variants_two_seeds_run_and_report(finished):
    out, r = finished
    assert (out / "lexicon" / "ngram.txt").is_file() and not (out / "pretrain" / "chte").exists()
    # the variant's one change reaches the models: ZEN 1.0's absolute positions with ZEN 2.0's frequency weights
    for model in (out / "pretrain" / "zen2-absolute" / "model",
                  out / "finetune" / "zen2-absolute" / "seed-2" / "model"):
        config = json.loads((model / "config.json").read_text(encoding="utf-8"))
        assert (config["encoder"], config["ngram_weighting"]) == ("zen1", "frequency")
    for name in ("zen2-absolute", "chte"):
        for seed in (1, 2):
            rec = json.loads((out / "finetune" / name / f"seed-{seed}" / RESULTS).read_text(encoding="utf-8"))
            assert (rec["variant"], rec["seed"], rec["steps"], rec["resumed_from_step"]) == (name, seed, 4, 0)
            assert 0 <= rec["test"]["main_score"] <= 1 and rec["wall_s"] > 0 and rec["main_metric"] == "f1"
            assert rec["pretrained"] == (str(out / "pretrain" / name / "model") if name != "chte" else None)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    by = {v["name"]: v for v in report["variants"]}
    for name in ("zen2-absolute", "chte"):
        tests = [100 * json.loads((out / "finetune" / name / f"seed-{s}" / RESULTS).read_text())["test"]["main_score"]
                 for s in (1, 2)]
        assert by[name]["test_mean"] == pytest.approx(statistics.fmean(tests))
        assert by[name]["test_std"] == pytest.approx(statistics.stdev(tests))
        assert by[name]["seeds"] == [1, 2]
        assert len(by[name]["runs"]["1"]["dev_curve"]) == 4  # 4 steps: dev scored every max(1, 4 // 5) step
    assert by["zen2"]["runs"] == {} and report["finished_runs"] == report["planned_runs"] == 6
    assert report["machine"]["cpu_count"] and report["machine"]["torch"]
    commit = report["machine"]["commit"]  # this checkout's, when the tests run from one
    md = (out / "report.md").read_text(encoding="utf-8")
    assert commit is None or (len(commit) == 40 and f"commit `{commit[:12]}`" in md)
    assert "zen bench ablation --task ner" in md and "--pretrain-steps 4 --finetune-steps 4 --scratch-steps 4" in md
    assert "4 steps for the pretrained variants and 4 steps for those trained from scratch" in md
    assert "| relative positions beat absolute |" not in md  # zen2 is not in this ablation
    assert "| CNN heads help" not in md and "| gated residuals" not in md
    z = by["zen2-absolute"]
    assert f"| zen2-absolute | yes | {z['test_mean']:.2f} ± {z['test_std']:.2f} |" in md
    assert f"| chte | no (from scratch) | {by['chte']['test_mean']:.2f} ± {by['chte']['test_std']:.2f} |" in md
    assert "| pretrain zen2-absolute | 4 |" in md and "| finetune chte seed 2 | 4 |" in md
    assert "all 6 runs finished" in r.output and "report:" in r.output


def test_a_second_invocation_skips_finished_runs(finished, corpus, monkeypatch):
    out, _ = finished
    from zencli.bench import ablation_runner

    def boom(*a, **k):
        raise AssertionError("a finished run was started again")

    monkeypatch.setattr(ablation_runner, "run_finetune", boom)
    monkeypatch.setattr(ablation_runner, "run_pretrain", boom)
    before = {p: p.stat().st_mtime_ns for p in out.rglob(RESULTS)}
    r = cli(corpus, out, only="zen2-absolute,chte")
    assert r.exit_code == 0, r.output
    assert "6 of 6 runs already finished" in r.output and "all 6 runs finished (0 in this invocation" in r.output
    assert {p: p.stat().st_mtime_ns for p in out.rglob(RESULTS)} == before
    assert len(json.loads((out / "plan.json").read_text())["invocations"]) == 2


RECORDS = ("plan.json", RESULTS, "timing.json", "metrics.jsonl")


def test_an_ablation_continues_from_its_records_alone(finished, corpus, tmp_path, monkeypatch):
    """Another machine gets only the small records of finished variants (no models, shards, lexicon or
    checkpoints): nothing is redone and the report is the same; a variant with a seed left still needs
    its pretraining, and that needs the lexicon."""
    import shutil

    out, _ = finished
    copy = tmp_path / "copy"
    for p in out.rglob("*"):
        if p.is_file() and p.name in RECORDS and "checkpoints" not in p.parts and "model" not in p.parts:
            (copy / p.relative_to(out)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, copy / p.relative_to(out))
    assert not list(copy.rglob("*.safetensors")) and not (copy / "lexicon" / "vocab.txt").exists()
    plan = Plan(micro_settings(corpus, copy, only=["zen2-absolute", "chte"]))
    runs = plan.runs()
    assert all(is_finished(r, runs) for r in runs)
    assert [v["test_mean"] for v in collect(copy)["variants"]] == [v["test_mean"] for v in collect(out)["variants"]]
    shutil.rmtree(copy / "finetune" / "zen2-absolute" / "seed-2")
    assert [r.label for r in runs if not is_finished(r, runs)] == [
        "lexicon (vocab + n-grams)", "pretrain zen2-absolute", "finetune zen2-absolute seed 2"]


def test_another_setting_in_the_same_out_dir_is_refused(finished, corpus):
    out, _ = finished
    plan = Plan(micro_settings(corpus, out, pretrain_steps=5))
    with pytest.raises(ZenError, match=r"other settings \(pretrain_steps: 4 there, 5 now\)"):
        run_plan(plan, command="test", show_progress=False)


def test_an_interrupted_run_resumes_from_its_checkpoint(corpus, tmp_path, monkeypatch):
    from zencli.train import loop

    settings = micro_settings(corpus, tmp_path / "out", only=["chte"], seeds=1)
    save = loop._Trainer._save
    calls = []

    def save_then_die(self, step):  # killed right after the step-2 checkpoint is on disk
        save(self, step)
        calls.append(step)
        if step == 2 and len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop._Trainer, "_save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_plan(Plan(settings), command="test", show_progress=False)
    run_dir = tmp_path / "out" / "finetune" / "chte" / "seed-1"
    assert not (run_dir / RESULTS).exists() and (run_dir / "checkpoints").is_dir()
    timing = json.loads((run_dir / "timing.json").read_text())
    assert [i["completed"] for i in timing["invocations"]] == [False]

    summary = run_plan(Plan(settings), command="test", show_progress=False)
    assert [r.label for r in summary.completed] == ["finetune chte seed 1"]
    rec = json.loads((run_dir / RESULTS).read_text())
    assert (rec["resumed_from_step"], rec["steps"]) == (2, 4)
    timing = json.loads((run_dir / "timing.json").read_text())
    assert [i["completed"] for i in timing["invocations"]] == [False, True]
    assert rec["wall_s"] == pytest.approx(sum(i["wall_s"] for i in timing["invocations"]))
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()
             if json.loads(x)["kind"] == "train"]
    assert steps == [1, 2, 3, 4]  # logged once each: the resumed run continued, it did not start over


def test_the_budget_stops_starting_new_runs(corpus, tmp_path):
    ticks = iter(range(0, 10_000, 30))  # every clock reading is 30 s later

    settings = micro_settings(corpus, tmp_path / "out", only=["chte", "chte-no-cnn"])
    summary = run_plan(Plan(settings), command="test", budget_min=1.0, show_progress=False,
                       clock=lambda: float(next(ticks)))
    assert summary.stopped_by_budget and [r.label for r in summary.completed] == ["finetune chte seed 1"]
    assert [r.label for r in summary.left] == ["finetune chte seed 2", "finetune chte-no-cnn seed 1",
                                               "finetune chte-no-cnn seed 2"]
    assert summary.estimate_left_s == pytest.approx(3 * 30.0)  # the left runs at the measured pace
    # through the CLI: at least one run per invocation, then what is left and how to continue
    r = cli(corpus, tmp_path / "out", "--budget", "0.0001", only="chte,chte-no-cnn")
    assert r.exit_code == 0, r.output
    assert "2 of 4 runs finished, 2 left" in r.output and "the budget of 0.0001 min is used" in r.output
    assert "continue with: zen bench ablation --task ner" in r.output and "--budget 0.0001" in r.output
    assert "finetune chte-no-cnn seed 1" in r.output
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Not finished yet" in md and "- finetune chte-no-cnn seed 2" in md


# -- the report -----------------------------------------------------------------------------------------

def _fake_run(out: Path, name: str, seed: int, test: float, dev: float, curve: list[float]) -> None:
    d = out / "finetune" / name / f"seed-{seed}"
    d.mkdir(parents=True)
    rec = {"kind": "finetune", "variant": name, "seed": seed, "test": {"main_score": test / 100},
           "dev": {"main_score": dev / 100}, "steps": 10 * len(curve), "best_step": 10, "resumed_from_step": 0,
           "wall_s": 120.0, "finished": "2026-11-29T12:00:00+00:00"}
    (d / RESULTS).write_text(json.dumps(rec), encoding="utf-8")
    lines = [{"kind": "train", "step": 10 * (i + 1), "loss": 2.0 - 0.1 * i} for i in range(len(curve))]
    lines += [{"kind": "eval", "step": 10 * (i + 1), "f1": c / 100, "precision": 0.5} for i, c in enumerate(curve)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


@pytest.fixture
def fake_out(tmp_path, corpus) -> Path:
    """An ablation directory with hand-written results (no training): zen2 and zen1 with 3 seeds, bert with 1."""
    from zencli.bench.ablation_runner import open_plan_dir

    out = tmp_path / "out"
    open_plan_dir(Plan(AblationSettings(task="ner", data=corpus, out=out)), "zen bench ablation --task ner",
                  {"cpu_count": 2, "cpu_model": "Test CPU", "torch": "2.x", "torch_threads": 2, "python": "3.11",
                   "platform": "test"})
    for seed, (a, b) in enumerate([(85.0, 84.0), (86.0, 84.5), (87.0, 86.5)], start=1):
        _fake_run(out, "zen2", seed, a, a + 1, [50.0, 70.0 + seed])
        _fake_run(out, "zen1", seed, b, b + 1, [40.0, 60.0 + seed])
    _fake_run(out, "bert", 1, 80.0, 81.0, [30.0, 50.0])
    return out


def test_the_report_computes_mean_std_and_paired_differences(fake_out, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    path, plots, data = write_report(fake_out)
    by = {v["name"]: v for v in data["variants"]}
    assert (by["zen2"]["test_mean"], by["zen2"]["test_std"]) == (pytest.approx(86.0), pytest.approx(1.0))
    assert by["zen1"]["test_mean"] == pytest.approx(85.0)
    assert by["zen1"]["test_std"] == pytest.approx(statistics.stdev([84.0, 84.5, 86.5]))
    assert (by["bert"]["test_mean"], by["bert"]["test_std"]) == (pytest.approx(80.0), None)
    assert mean_std([]) == (None, None) and mean_std([3.0]) == (3.0, None)
    claims = {(c["better"], c["worse"]): c for c in data["comparisons"]}
    c = claims[("zen2", "zen1")]
    assert c["test_diffs"] == pytest.approx([1.0, 1.5, 0.5]) and c["test_diff_mean"] == pytest.approx(1.0)
    assert c["test_diff_std"] == pytest.approx(0.5) and c["wins"] == 3 and c["agrees"] is True
    c = claims[("zen1", "bert")]  # only seed 1 in common
    assert c["seeds"] == [1] and c["test_diff_mean"] == pytest.approx(4.0) and c["test_diff_std"] is None
    assert claims[("chte", "chte-no-cnn")]["agrees"] is None
    assert by["zen2"]["runs"][1]["dev_curve"] == [{"step": 10, "score": pytest.approx(50.0)},
                                                  {"step": 20, "score": pytest.approx(71.0)}]
    md = path.read_text(encoding="utf-8")
    assert "| zen2 | yes | 86.00 ± 1.00 | 87.00 ± 1.00 | 3 | 1: 85.00 · 2: 86.00 · 3: 87.00 | 2.0 min |" in md
    assert "| bert | yes | 80.00 (1 seed) | 81.00 (1 seed) | 1 | 1: 80.00 | 2.0 min |" in md
    assert "| ZEN 2.0 beats ZEN 1.0 | zen2 | zen1 | +1.00 ± 0.50 | +1.00 | 3/3 | yes |" in md
    assert "| ZEN 1.0 beats BERT (n-grams help) | zen1 | bert | +4.00 (1 seed) | +4.00 | 1/1 | yes |" in md
    assert "2 CPU(s) (Test CPU), torch 2.x" in md and "`zen bench ablation --task ner`" in md
    assert "matplotlib is not installed" in md and isinstance(plots, str) and not (fake_out / "plots").exists()
    assert "- finetune chte seed 1" in md and "- pretrain zen2" in md  # the plan's unfinished runs
    saved = json.loads((fake_out / "report.json").read_text(encoding="utf-8"))
    assert saved["plots"] == [] and "matplotlib" in saved["plots_note"]


def test_plots_when_matplotlib_is_installed(fake_out):
    pytest.importorskip("matplotlib")
    path, plots, _ = write_report(fake_out)
    assert plots == ["test_scores.png", "dev_curves.png", "train_loss.png"]
    for name in plots:
        png = fake_out / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert f"](plots/{name})" in path.read_text(encoding="utf-8")


def test_report_only_rebuilds_from_finished_runs_without_training(fake_out, monkeypatch):
    from zencli.bench import ablation_runner

    monkeypatch.setattr(ablation_runner, "run_finetune", lambda *a, **k: pytest.fail("trained"))
    r = runner.invoke(app, ["bench", "ablation", "--task", "ner", "--out", str(fake_out), "--report-only"])
    assert r.exit_code == 0, r.output
    assert (fake_out / "report.md").is_file() and "zen2" in r.output and "+1.00 ± 0.50" in r.output
    r = runner.invoke(app, ["bench", "ablation", "--task", "ner", "--out", str(fake_out / "none"), "--report-only"])
    assert isinstance(r.exception, ZenError) and "no ablation here" in str(r.exception)


def test_render_markdown_marks_variants_without_runs(fake_out):
    md = render_markdown(collect(fake_out), "no plots")
    assert "| chte | no (from scratch) | — | — | 0 | not run yet | — |" in md


def test_the_rtd_and_pmi_lexicon_variants_run_end_to_end(corpus, tmp_path):
    """zen2-rtd pretrains by replaced-token detection and zen2-pmi builds its own lexicon; both fine-tune."""
    r = cli(corpus, tmp_path / "out", seeds=1, only="zen2-rtd,zen2-pmi")
    assert r.exit_code == 0, r.output
    pre = tmp_path / "out" / "pretrain"
    assert json.loads((pre / "zen2-rtd" / "results.json").read_text(encoding="utf-8"))["objective"] == "rtd"
    assert (pre / "zen2-pmi" / "model" / "ngram.txt").is_file()
    for v in ("zen2-rtd", "zen2-pmi"):
        assert (tmp_path / "out" / "finetune" / v / "seed-1" / RESULTS).is_file()


def test_other_tasks_fine_tune_an_earlier_ablations_pretraining(finished, corpus, tmp_path):
    """--pretrained-from: POS and sentiment fine-tune the models `finished` pretrained (nothing is pretrained
    again), and a plan whose pretraining would differ cannot borrow them."""
    first, _ = finished
    before = {p: p.stat().st_mtime_ns for p in (first / "pretrain").rglob("*") if p.is_file()}
    r = cli(corpus, tmp_path / "pos", "--pretrained-from", str(first), task="pos", seeds=1, only="zen2-absolute")
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "pos" / "pretrain").exists() and not (tmp_path / "pos" / "lexicon").exists()
    res = json.loads((tmp_path / "pos" / "finetune" / "zen2-absolute" / "seed-1" / RESULTS).read_text("utf-8"))
    assert res["test"]["metric"] == "pos"
    r = cli(corpus, tmp_path / "sa", "--pretrained-from", str(first), "--task-data", str(corpus / "sentiment"),
            task="sa", seeds=1, only="zen2-absolute")
    assert r.exit_code == 0, r.output
    md = (tmp_path / "sa" / "report.md").read_text(encoding="utf-8")
    assert f"those of the ablation in `{first}`" in md and f"`{(corpus / 'sentiment').resolve()}`/train" in md
    assert "## Not finished yet" not in md  # its pretraining is found in the other ablation
    assert {p: p.stat().st_mtime_ns for p in (first / "pretrain").rglob("*") if p.is_file()} == before
    r = cli(corpus, tmp_path / "other", "--pretrained-from", str(first), "--pretrain-steps", "5", task="pos",
            seeds=1, only="zen2-absolute")  # the last --pretrain-steps wins
    assert isinstance(r.exception, ZenError)
    assert "--pretrained-from:" in str(r.exception) and "pretrain_steps" in str(r.exception)
