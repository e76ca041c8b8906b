"""The workspace: where the no-argument pipeline keeps what each step made, so the next step finds it.

    zen lexicon                →  WORK/lexicon/vocab.txt, ngram.txt (+ .json sidecars), lexicon.json
    zen pretrain               →  WORK/pretrain/          (a `zen pretrain` output dir: model/, results.json)
    zen finetune --task ner    →  WORK/finetune-ner/      (a `zen finetune` output dir: model/, recipe.yaml)
    zen predict < file.txt     ←  the newest WORK/finetune-*/model
    zen quickstart             →  all of the above, then WORK/quickstart/ and WORK/quickstart.json

WORK is `--workdir`, else $ZEN_WORKDIR, else ./zen-work. Each step reads the previous step's output from
here, and a missing one is a one-line error naming the command to run first. A step counts as finished by
the file it writes last (lexicon.json, results.json, model/task.json), so an interrupted step is never
mistaken for a finished one.

The task table says what `zen finetune --task T` trains on without a recipe: the built-in recipe holding the
task's settings and the dataset (found with `zencli.datasets.locate`) whose files it reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from zencli.errors import ZenError, unknown_task

# Imports inside functions are lazy on purpose: `zen --help` imports this module (through zencli.cli.common);
# the recipes' modules, the task registry (torch) and the dataset locator load only where they are used.

DEFAULT_WORKDIR = Path("zen-work")
ENV_WORKDIR = "ZEN_WORKDIR"

LEXICON_SUMMARY = "lexicon.json"
PRETRAIN_RESULTS = "results.json"  # zencli.tasks.pretraining.RESULTS_NAME (not imported: it pulls in torch)
MODEL_DIR = "model"
TASK_FILE = "task.json"  # zencli.tasks.model_dir.TASK_NAME: the last file a fine-tuned model directory gets
PRETRAIN_RECIPE = "pretrain-zh-tiny"  # `zen pretrain` without a recipe: the tiny ZEN 2.0 (4 × 128)
# `zen lexicon` without a subcommand: PMI and frequency (the ZEN 2.0 thresholds) plus the branching-entropy
# filter, which keeps n-grams that follow word boundaries (docs/results.md: better fine-tuned scores)
LEXICON_RECIPE = "lexicon-zh-pd98-entropy"
CORPUS = "pd98"  # the default corpus: its raw/train.txt (lexicon, pretraining) and raw/dev.txt (held-out)


@dataclass(frozen=True)
class TaskDefaults:
    """What `zen finetune --task T` uses without a recipe: the recipe's settings and the dataset's files."""

    recipe: str  # built-in recipe with the task's settings (written for a model from scratch)
    dataset: str  # `zencli.datasets.locate` name
    folder: str  # inside the dataset directory ("" = its top level)
    suffix: str  # of train/dev/test

    def files(self, dataset_dir: Path) -> dict[str, Path]:
        """train/dev/test paths inside the located dataset; a missing one is a one-line error."""
        base = dataset_dir / self.folder if self.folder else dataset_dir
        out = {split: base / f"{split}{self.suffix}" for split in ("train", "dev", "test")}
        for split, path in out.items():
            if not path.is_file():
                raise ZenError(f"{path}: not found; expected the {self.dataset} dataset's {split} file "
                               f"({self.folder + '/' if self.folder else ''}{split}{self.suffix}) in {dataset_dir}")
        return out


TASK_DEFAULTS: dict[str, TaskDefaults] = {
    "ner": TaskDefaults("finetune-pd98-ner", "pd98", "ner", ".tsv"),
    "cws": TaskDefaults("finetune-pd98-cws", "pd98", "cws", ".txt"),
    "pos": TaskDefaults("finetune-pd98-pos", "pd98", "pos", ".tsv"),
    "sa": TaskDefaults("finetune-sentiment-sa", "sentiment", "", ".tsv"),
}

# `zen finetune` without a recipe, training from scratch (no --model), starts from these recipes too, with the
# files of its command line (a task without one takes the sentence-level recipe's encoder and training
# settings): never from ModelSection's 12 × 768 BERT-base sizes, which take minutes a step on a CPU and are
# no use without pretraining.
SCRATCH_RECIPE = "finetune-sentiment-sa"


def scratch_base(task: str | None) -> tuple[str, list[str]] | None:
    """(recipe, `--set` overrides) that a recipe-less from-scratch `zen finetune --task T` starts from: the
    task's recipe with its data files, vocab/lexicon and output directory cleared; None for no task."""
    from zencli.config.finetune import FinetuneTrainSettings

    if task is None:
        return None
    cleared = ["data={}", "model.vocab=null", "model.ngram=null",
               *as_overrides({"train.output_dir": FinetuneTrainSettings.output_dir})]
    if task in TASK_DEFAULTS:
        return TASK_DEFAULTS[task].recipe, cleared
    return SCRATCH_RECIPE, ["task={}", *cleared]


# Time budgets of the pipeline's training steps: the quickstart's split of its `--minutes`, so that
# `zen pretrain` and `zen finetune --task T` run on their own train for what they get inside the default
# `zen quickstart` (--max-minutes changes a budget; --set train.max_minutes=null trains the recipe's length).
QUICKSTART_MINUTES = 15.0
PRETRAIN_SHARE = 0.45  # of the minutes: pretraining's train.max_minutes
FINETUNE_SHARE = 0.25  # of the minutes: fine-tuning's train.max_minutes
# Lexicon extraction speed for the lexicon step's estimate: 1.14 M chars/s on PD98 train with 2 cores
# (`zen bench speed`, docs/results.md); the vocabulary pass adds little.
LEXICON_CHARS_PER_S = 1.1e6


def budget(minutes: float) -> dict[str, float]:
    """How `zen quickstart --minutes` is split: training time (train.max_minutes) of pretraining and
    fine-tuning, and what is left for the other steps."""
    return {"minutes": minutes, "pretrain_minutes": round(PRETRAIN_SHARE * minutes, 4),
            "finetune_minutes": round(FINETUNE_SHARE * minutes, 4),
            "other_minutes": round((1 - PRETRAIN_SHARE - FINETUNE_SHARE) * minutes, 4)}


STEP_MINUTES = budget(QUICKSTART_MINUTES)  # the budgets of `zen pretrain` / `zen finetune --task T` alone


def expected_training(step: str, minutes: float | None, length: str, rest: str) -> str:
    """The line a pipeline step prints before it starts: how long its training is expected to take."""
    if minutes is None:
        return (f"{step}: no time budget (train.max_minutes is null): {length}, as long as that takes; the progress "
                f"bar shows the time left once training runs")
    return (f"{step}: expected about {_duration(60 * minutes)} of training (train.max_minutes {minutes:g}: the "
            f"step count and schedule are fitted to it; --max-minutes M changes it, --set train.max_minutes=null "
            f"trains {length}), plus {rest}")


def expected_lexicon(corpus: Path) -> str:
    """The line the lexicon step prints before it starts: the corpus size and the time it should take."""
    with open(corpus, encoding="utf-8", errors="replace") as f:
        chars = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), ""))
    return (f"lexicon: {chars:,} characters of {corpus}: expected about "
            f"{_duration(chars / LEXICON_CHARS_PER_S)} (n-gram counting at ~{LEXICON_CHARS_PER_S / 1e6:g} M chars/s "
            f"on 2 cores, as `zen bench speed` measured it)")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{seconds / 60:.3g} min"


# The task recipes train a 2 × 64 encoder from scratch; a pretrained encoder brings its own sizes, vocab.txt
# and ngram.txt, and the recipes' `lr: auto` gives it the pretrained rate (zencli.tasks.transfer).
FROM_PRETRAINED = {"model.vocab": None, "model.ngram": None}


def task_defaults(task: str) -> TaskDefaults:
    if task in TASK_DEFAULTS:
        return TASK_DEFAULTS[task]
    from zencli.tasks.base import task_names

    if task not in task_names():  # a mistyped task is an unknown task, not one without default data
        raise ZenError(f"--task: {unknown_task(task, task_names())}")
    raise ZenError(f"--task {task}: no default data for this task (defaults exist for "
                   f"{', '.join(TASK_DEFAULTS)}); give --train (and --dev, --test) or --recipe")


def locate_dataset(name: str, *, console=None) -> Path:
    """The dataset directory (`zencli.datasets.locate`: $ZEN_DATA/<name>, the cache, else a download)."""
    from zencli.datasets import locate

    return Path(locate(name, fetch=True, console=console))


def default_corpus(data: Path | None = None, *, console=None) -> tuple[Path, Path]:
    """(train, held-out) raw text of the default corpus: PD98 raw/train.txt and raw/dev.txt of `data` (its
    dataset directory), else of the located dataset."""
    raw = (Path(data) if data is not None else locate_dataset(CORPUS, console=console)) / "raw"
    files = (raw / "train.txt", raw / "dev.txt")
    for path in files:
        if not path.is_file():
            raise ZenError(f"{path}: not found; expected the {CORPUS} dataset's raw text (raw/train.txt, raw/dev.txt)")
    return files


def as_overrides(values: dict[str, object]) -> list[str]:
    """`--set KEY=VALUE` strings for values of any kind: JSON is YAML, so paths with spaces, colons or
    non-ASCII characters, lists and null all read back exactly."""
    return [f"{k}={json.dumps(str(v) if isinstance(v, Path) else v, ensure_ascii=False, default=str)}"
            for k, v in values.items()]


def overridden(overrides: list[str], *keys: str) -> bool:
    """Whether a `--set` override touches one of `keys` (or a key below it)."""
    from zencli.config.loading import parse_override

    for text in overrides:
        path = ".".join(parse_override(text)[0])
        if any(path == k or path.startswith(k + ".") or k.startswith(path + ".") for k in keys):
            return True
    return False


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def at(cls, workdir: str | Path | None = None) -> Workspace:
        """`workdir`, else $ZEN_WORKDIR, else ./zen-work."""
        if workdir is None:
            workdir = os.environ.get(ENV_WORKDIR) or DEFAULT_WORKDIR
        root = Path(workdir)
        if root.exists() and not root.is_dir():
            raise ZenError(f"{root}: is not a directory; expected the workspace folder (--workdir)")
        return cls(root)

    def flag(self) -> str:
        """` --workdir ROOT` when the workspace is not the default one (for the commands we suggest)."""
        env = os.environ.get(ENV_WORKDIR)
        if (env and Path(env) == self.root) or (not env and self.root == DEFAULT_WORKDIR):
            return ""
        return f" --workdir {self.root}"

    def command(self, text: str) -> str:
        """`zen X` as the user would type it for this workspace."""
        head, _, rest = text.partition(" < ")
        return f"zen {head}{self.flag()}" + (f" < {rest}" if rest else "")

    # --- where each step writes --------------------------------------------------------------------

    @property
    def lexicon_dir(self) -> Path:
        return self.root / "lexicon"

    @property
    def vocab(self) -> Path:
        return self.lexicon_dir / "vocab.txt"

    @property
    def ngram(self) -> Path:
        return self.lexicon_dir / "ngram.txt"

    @property
    def lexicon_summary(self) -> Path:
        return self.lexicon_dir / LEXICON_SUMMARY

    @property
    def pretrain_dir(self) -> Path:
        return self.root / "pretrain"

    @property
    def pretrained_model(self) -> Path:
        return self.pretrain_dir / MODEL_DIR

    def finetune_dir(self, task: str) -> Path:
        return self.root / f"finetune-{task}"

    def finetuned_model(self, task: str) -> Path:
        return self.finetune_dir(task) / MODEL_DIR

    @property
    def quickstart_dir(self) -> Path:
        return self.root / "quickstart"

    @property
    def quickstart_json(self) -> Path:
        return self.root / "quickstart.json"

    # --- which steps are finished (by the file each writes last) ----------------------------------

    def lexicon_done(self) -> bool:
        return self.lexicon_summary.is_file() and self.vocab.is_file() and self.ngram.is_file()

    def pretrain_done(self) -> bool:
        return (self.pretrain_dir / PRETRAIN_RESULTS).is_file() and (self.pretrained_model / "config.json").is_file()

    def finetune_done(self, task: str) -> bool:
        d = self.finetune_dir(task)
        return (d / MODEL_DIR / TASK_FILE).is_file() and (d / "recipe.yaml").is_file()

    # --- what the next step needs, or which command to run first ---------------------------------

    def require_lexicon(self) -> tuple[Path, Path]:
        """(vocab.txt, ngram.txt) made by `zen lexicon`."""
        if not self.lexicon_done():
            raise ZenError(f"{self.lexicon_dir}: no vocabulary and n-gram lexicon yet; run "
                           f"`{self.command('lexicon')}` first (or give --recipe)")
        return self.vocab, self.ngram

    def require_pretrained(self) -> Path:
        """The model directory made by `zen pretrain`."""
        if self.pretrain_done():
            return self.pretrained_model
        if (self.pretrain_dir / "checkpoints").is_dir() or (self.pretrain_dir / "run.json").is_file():
            raise ZenError(f"{self.pretrain_dir}: pretraining has not finished (no {PRETRAIN_RESULTS}); run "
                           f"`{self.command('pretrain')}` first to continue it (or give --model)")
        raise ZenError(f"{self.pretrain_dir}: no pretrained model yet; run `{self.command('pretrain')}` first "
                       f"(or give --model)")

    def finetuned_models(self) -> list[Path]:
        """Every finished WORK/finetune-*/model, newest first."""
        found = [d / MODEL_DIR for d in self.root.glob("finetune-*") if (d / MODEL_DIR / TASK_FILE).is_file()]
        return sorted(found, key=lambda m: ((m / TASK_FILE).stat().st_mtime_ns, str(m)), reverse=True)

    def latest_finetuned(self) -> Path:
        """The most recently written fine-tuned model of this workspace."""
        models = self.finetuned_models()
        if not models:
            raise ZenError(f"{self.root}: no fine-tuned model yet (finetune-*/model); run "
                           f"`{self.command('finetune --task ner')}` first (or give MODEL)")
        return models[0]
