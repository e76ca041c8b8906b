"""`zen bench ablation`: the ZEN 2.0 / ZEN 1.0 and CHTE papers' comparisons on PD98 under one CPU budget —
the plan: which variants, which runs, and the recipe of each run.

Variants (each changes one thing against its reference, so a paired difference isolates that thing):

    pretrained on the dataset's raw train text (same recipe, same steps), then fine-tuned per seed:
      zen2             ZEN 2.0: relative positions, frequency-weighted n-gram fusion, whole n-gram masking
      zen1             ZEN 1.0: absolute positions, 0/1 fusion, char masking
      bert             plain BERT (no n-gram side), absolute positions, char masking
      zen2-unweighted  zen2 with 0/1 n-gram fusion                       (weighted vs unweighted)
      zen2-absolute    zen2 with absolute positions (ZEN 1.0's encoder)   (relative vs absolute)
      zen2-charmask    zen2 pretrained with char masking                  (whole n-gram vs char masking)
      zen2-rtd         zen2 pretrained by replaced-token detection        (ELECTRA's objective vs MLM)
      zen2-pmi         zen2 on a lexicon of PMI and frequency only (the ZEN 2.0 paper's; zen2's also filters
                       by branching entropy)                               (entropy + PMI vs PMI only)
    from scratch on characters + bigrams, CRF decoder:
      transformer-crf  plain Transformer encoder: no CNN heads, x + y residuals, no embedding concat
      chte             CHTE: CNN heads (windows 2..7), gated residuals, embedding concat
      chte-plain-residual  chte with x + y residuals                      (gated vs plain residual)
      chte-no-cnn      chte with every head linear                        (CNN heads on/off)

More: docs/design.md, "Ablation plan".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from zencli.bench.common import need_file
from zencli.errors import ZenError

# Imports inside functions are lazy on purpose: `zen --help` imports this module (for the option names), and
# the recipes' modules (zencli.config, zencli.jobs) and torch (zencli.model) load only for a run.

TASKS = ("ner", "cws", "pos", "sa")
# each task's train/dev/test: (folder of the PD98 dataset, extension); sentiment has its own dataset (the
# located `sentiment` or --task-data), while every task's pretraining reads PD98's raw text
TASK_FILES = {"ner": ("ner", "tsv"), "cws": ("cws", "txt"), "pos": ("pos", "tsv"), "sa": (None, "tsv")}
TASK_DATASETS = {"sa": "sentiment"}  # tasks whose splits come from another dataset than the pretraining text
PRETRAIN_RECIPE = "pretrain-zh-tiny"
FINETUNE_RECIPES = {"ner": "finetune-pd98-ner", "cws": "finetune-pd98-cws", "pos": "finetune-pd98-pos",
                    "sa": "finetune-sentiment-sa"}
# the fingerprint keys that decide a pretraining: another ablation with the same ones can lend its pretrained
# models (--pretrained-from), e.g. one pretraining fine-tuned on all four tasks
PRETRAIN_KEYS = ("data", "pretrain_steps", "pretrain_recipe", "pretrain_sets")
DEFAULT_SEEDS = 3
DEFAULT_PRETRAIN_STEPS = 3000
DEFAULT_FINETUNE_STEPS = 600
EVAL_POINTS = 5  # dev evaluations per fine-tuning run with a step count: the learning curves' points
WARMUP_FRACTION = 0.1  # pretraining warm-up, as pretrain-zh-tiny's 300 of 3,000 steps
PLAN_FORMAT = "zen-ablation-plan/1"
RUN_FORMAT = "zen-ablation-run/1"


@dataclass(frozen=True)
class Variant:
    """One model of the comparison. `pretrain`: the pretraining recipe keys this variant sets (None: no
    pretraining, trained from scratch); `finetune`: the fine-tuning recipe keys; `cnn_heads=False`
    makes every CHTE head linear (n_linear_heads = n_heads, no windows)."""

    name: str
    description: str
    pretrain: dict[str, Any] | None
    finetune: dict[str, Any]
    cnn_heads: bool = True


_CHTE = {"model.encoder": "chte", "task.decoder": "crf"}

VARIANTS: tuple[Variant, ...] = (
    Variant("zen2", "ZEN 2.0: relative positions, frequency-weighted n-gram fusion, whole n-gram masking",
            {"model.encoder": "zen2", "model.ngram_weighting": "frequency", "masking.scheme": "ngram"},
            {"model.encoder": "zen2"}),
    Variant("zen1", "ZEN 1.0: absolute positions, 0/1 n-gram fusion, char masking",
            {"model.encoder": "zen1", "model.ngram_weighting": "binary", "masking.scheme": "char"},
            {"model.encoder": "zen1"}),
    Variant("bert", "BERT: no n-gram side, absolute positions, char masking",
            {"model.encoder": "bert", "masking.scheme": "char"}, {"model.encoder": "bert"}),
    Variant("zen2-unweighted", "zen2 with 0/1 (unweighted) n-gram fusion",
            {"model.encoder": "zen2", "model.ngram_weighting": "binary", "masking.scheme": "ngram"},
            {"model.encoder": "zen2"}),
    Variant("zen2-absolute", "zen2 with absolute positions (ZEN 1.0's char encoder), frequency weights",
            {"model.encoder": "zen1", "model.ngram_weighting": "frequency", "masking.scheme": "ngram"},
            {"model.encoder": "zen1"}),
    Variant("zen2-charmask", "zen2 pretrained with char masking instead of whole n-gram masking",
            {"model.encoder": "zen2", "model.ngram_weighting": "frequency", "masking.scheme": "char"},
            {"model.encoder": "zen2"}),
    Variant("zen2-rtd", "zen2 pretrained by replaced-token detection (ELECTRA: a small generator's samples, "
            "a discriminator over every token) instead of masked LM",
            {"model.encoder": "zen2", "model.ngram_weighting": "frequency", "masking.scheme": "ngram",
             "objective": "rtd"}, {"model.encoder": "zen2"}),
    Variant("zen2-pmi", "zen2 on a lexicon of PMI and frequency only (freq 15, PMI 3: recipe lexicon-zh-pd98, "
            "the ZEN 2.0 paper's thresholds) instead of one also filtered by branching entropy",
            {"model.encoder": "zen2", "model.ngram_weighting": "frequency", "masking.scheme": "ngram",
             "data.ngram": None, "data.build_missing": True, "data.ngram_min_freq": 15,
             "data.ngram_min_entropy": None}, {"model.encoder": "zen2"}),
    Variant("transformer-crf", "plain Transformer encoder + CRF from characters and bigrams (no CNN heads, "
            "x + y residuals, no embedding concat)", None,
            {**_CHTE, "model.chte.gated_residual": False, "model.chte.concat_embeddings": False}, cnn_heads=False),
    Variant("chte", "CHTE + CRF from characters and bigrams: CNN heads (windows 2..7), gated residuals, "
            "embedding concat", None, dict(_CHTE)),
    Variant("chte-plain-residual", "chte with plain x + y residuals", None,
            {**_CHTE, "model.chte.gated_residual": False}),
    Variant("chte-no-cnn", "chte with every attention head linear (no CNN heads)", None, dict(_CHTE),
            cnn_heads=False),
)
VARIANT_NAMES = tuple(v.name for v in VARIANTS)


@dataclass(frozen=True)
class Claim:
    """A paper's claim as a paired comparison: `better` should score higher than `worse`."""

    better: str
    worse: str
    claim: str
    source: str


CLAIMS: tuple[Claim, ...] = (
    Claim("zen2", "zen1", "ZEN 2.0 beats ZEN 1.0", "ZEN 2.0 paper, main results"),
    Claim("zen1", "bert", "ZEN 1.0 beats BERT (n-grams help)", "ZEN 1.0 paper, main results"),
    Claim("zen2", "bert", "ZEN 2.0 beats BERT", "ZEN 2.0 paper, main results"),
    Claim("zen2", "zen2-unweighted", "frequency-weighted n-gram fusion beats unweighted",
          "ZEN 2.0 paper §2.1 (refined n-gram representations)"),
    Claim("zen2", "zen2-absolute", "relative positions beat absolute", "ZEN 2.0 paper, Fig. 6 (+RPE vs −RPE)"),
    Claim("zen2", "zen2-charmask", "whole n-gram masking beats char masking",
          "ZEN 2.0 paper, Table 4 (WNM vs char masking)"),
    Claim("zen2-rtd", "zen2", "replaced-token detection beats masked LM at equal steps",
          "ELECTRA paper (Clark et al. 2020), small models"),
    Claim("zen2", "zen2-pmi", "a lexicon that follows word boundaries beats plain PMI",
          "zen lexicon stats: 16.6% of matches cut a gold word vs 39.4% (docs/results.md)"),
    Claim("chte", "transformer-crf", "CHTE beats a plain Transformer encoder",
          "CHTE paper, Table 2 (vs TENER, Transformer-based)"),
    Claim("chte", "chte-plain-residual", "gated residuals beat x + y (+0.64 F1 on Weibo)", "CHTE paper, Table 3"),
    Claim("chte", "chte-no-cnn", "CNN heads help (+2.32 F1 on Weibo)", "CHTE paper, Table 3"),
)


def variant(name: str) -> Variant:
    for v in VARIANTS:
        if v.name == name:
            return v
    raise ZenError(f"--only: unknown variant {name!r}; expected names from {', '.join(VARIANT_NAMES)}")


@dataclass(frozen=True)
class Run:
    """One unit of work: the shared lexicon, a pretraining, or a fine-tuning with one seed."""

    kind: Literal["lexicon", "pretrain", "finetune"]
    dir: Path
    variant: str | None = None
    seed: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "lexicon":
            return "lexicon (vocab + n-grams)"
        return f"{self.kind} {self.variant}" + (f" seed {self.seed}" if self.seed is not None else "")


@dataclass
class AblationSettings:
    """Everything a `zen bench ablation` run is made of (the options of the command)."""

    task: str
    data: Path
    out: Path
    seeds: int = DEFAULT_SEEDS
    pretrain_steps: int = DEFAULT_PRETRAIN_STEPS
    finetune_steps: int | None = DEFAULT_FINETUNE_STEPS
    finetune_epochs: float | None = None
    scratch_steps: int | None = None  # None: pretrain_steps + finetune_steps (see `from_scratch_steps`)
    only: list[str] | None = None
    pretrain_recipe: str = PRETRAIN_RECIPE
    finetune_recipe: str | None = None  # None: FINETUNE_RECIPES[task]
    task_data: Path | None = None  # the task's train/dev/test folder; None: DATA/<task folder>
    pretrained_from: Path | None = None  # another ablation's OUT whose lexicon and pretrainings this one uses
    pretrain_sets: list[str] = field(default_factory=list)
    finetune_sets: list[str] = field(default_factory=list)

    def validate(self) -> None:
        if self.task not in TASKS:
            raise ZenError(f"--task: expected one of {', '.join(TASKS)}, got {self.task!r}")
        if self.pretrained_from is not None and Path(self.pretrained_from).resolve() == Path(self.out).resolve():
            raise ZenError("--pretrained-from: names this ablation's own --out; give another ablation's")
        if self.seeds < 1:
            raise ZenError(f"--seeds: expected an integer >= 1, got {self.seeds}")
        if self.pretrain_steps < 1:
            raise ZenError(f"--pretrain-steps: expected an integer >= 1, got {self.pretrain_steps}")
        if self.finetune_steps is not None and self.finetune_epochs is not None:
            raise ZenError("--finetune-steps and --finetune-epochs: give one of them, not both")
        if self.finetune_steps is None and self.finetune_epochs is None:
            raise ZenError("--finetune-steps / --finetune-epochs: give one of them")
        if self.finetune_steps is not None and self.finetune_steps < 1:
            raise ZenError(f"--finetune-steps: expected an integer >= 1, got {self.finetune_steps}")
        if self.scratch_steps is not None and self.finetune_steps is None:
            raise ZenError("--scratch-steps: goes with --finetune-steps (with --finetune-epochs every run trains "
                           "the same epochs)")
        if self.scratch_steps is not None and self.scratch_steps < 1:
            raise ZenError(f"--scratch-steps: expected an integer >= 1, got {self.scratch_steps}")
        if self.finetune_epochs is not None and self.finetune_epochs <= 0:
            raise ZenError(f"--finetune-epochs: expected a number > 0, got {self.finetune_epochs}")
        for name in self.only or []:
            variant(name)
        if self.only is not None and not self.only:
            raise ZenError("--only: expected at least one variant name")

    @property
    def from_scratch_steps(self) -> int | None:
        """Training steps of the variants without pretraining (CHTE, Transformer-CRF): by default as many
        updates as a pretrained variant gets in pretraining and fine-tuning together — a few hundred steps
        leave a model trained from scratch at the start of learning (CHTE: ~31 entity F1 after 300)."""
        if self.finetune_steps is None:
            return None
        return self.scratch_steps if self.scratch_steps is not None else self.pretrain_steps + self.finetune_steps

    @property
    def finetune_recipe_name(self) -> str:
        return self.finetune_recipe or FINETUNE_RECIPES[self.task]

    # -- files --------------------------------------------------------------------------------------
    def raw(self, split: str) -> Path:
        return Path(self.data) / "raw" / f"{split}.txt"

    def task_file(self, split: str) -> Path:
        folder, ext = TASK_FILES[self.task]
        if folder is None and self.task_data is None:
            raise ZenError(f"--task-data: the {self.task} splits are not part of the pretraining dataset; give "
                           f"the folder that holds train.{ext}, dev.{ext} and test.{ext}")
        where = Path(self.task_data) if self.task_data is not None else Path(self.data) / str(folder)
        return where / f"{split}.{ext}"

    def check_data(self, pretraining: bool) -> None:
        """One-line errors for missing files (the raw text only when a pretrained variant is planned)."""
        for split in ("train", "dev", "test"):
            need_file(self.task_file(split), f"the {self.task} {split} split of the dataset ({self.data})")
        if pretraining:
            need_file(self.raw("train"), f"the raw training text of the dataset ({self.data}): pretraining corpus")
            need_file(self.raw("dev"), f"the raw dev text of the dataset ({self.data}): held-out pretraining text")

    def fingerprint(self) -> dict[str, Any]:
        """What decides the results (a rerun with other values must not mix with these runs); seeds,
        --only and the budget only choose how much of the plan runs."""
        from zencli.config.loading import resolve_recipe_path

        def recipe(name: str) -> dict[str, str]:
            path = resolve_recipe_path(name)
            return {"name": name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}

        fp: dict[str, Any] = {
            "task": self.task, "data": str(Path(self.data).resolve()),
            "pretrain_steps": self.pretrain_steps, "finetune_steps": self.finetune_steps,
            "finetune_epochs": self.finetune_epochs, "scratch_steps": self.from_scratch_steps,
            "pretrain_recipe": recipe(self.pretrain_recipe), "finetune_recipe": recipe(self.finetune_recipe_name),
            "pretrain_sets": list(self.pretrain_sets), "finetune_sets": list(self.finetune_sets),
        }
        if self.task_data is not None:  # only when given: the plans written before the option stay valid
            fp["task_data"] = str(Path(self.task_data).resolve())
        return fp


class Plan:
    """The variants and seeds of one ablation, the runs they need, and each run's recipe."""

    def __init__(self, settings: AblationSettings):
        settings.validate()
        self.settings = settings
        names = settings.only or list(VARIANT_NAMES)
        self.variants = [v for v in VARIANTS if v.name in names]  # the plan's order, whatever --only's
        self.seeds = list(range(1, settings.seeds + 1))
        self.out = Path(settings.out)

    @property
    def pretraining(self) -> bool:
        return any(v.pretrain is not None for v in self.variants)

    # -- directories --------------------------------------------------------------------------------
    @property
    def pretrain_root(self) -> Path:
        """Where the lexicon and the pretrainings live: this ablation's OUT, or the one it borrows them from."""
        return Path(self.settings.pretrained_from) if self.settings.pretrained_from is not None else self.out

    @property
    def lexicon_dir(self) -> Path:
        return self.pretrain_root / "lexicon"

    def pretrain_dir(self, name: str) -> Path:
        return self.pretrain_root / "pretrain" / name

    def finetune_dir(self, name: str, seed: int) -> Path:
        return self.out / "finetune" / name / f"seed-{seed}"

    def runs(self) -> list[Run]:
        """Variant-major order: a variant's pretraining, then all its seeds, then the next variant. A
        pretrained model is only needed until its variant's seeds are done, so an ablation continued
        elsewhere (a fresh clone with the finished runs' records, see `ablation_runner`) never has to
        pretrain a finished variant again, and every seed of a variant starts from the same model."""
        runs: list[Run] = []
        if self.pretraining:
            runs.append(Run("lexicon", self.lexicon_dir))
        for v in self.variants:
            if v.pretrain is not None:
                runs.append(Run("pretrain", self.pretrain_dir(v.name), v.name))
            runs += [Run("finetune", self.finetune_dir(v.name, seed), v.name, seed) for seed in self.seeds]
        return runs

    # -- recipes ------------------------------------------------------------------------------------
    def lexicon_config(self):
        """The base pretraining recipe with the corpus set: its data.* keys say how the shared vocab and
        lexicon are built (thresholds, vocabulary size, case)."""
        from zencli.jobs.pretrain import build_config

        s = self.settings
        return build_config(s.pretrain_recipe, s.pretrain_sets, {
            "data.corpus": [str(s.raw("train"))], "data.heldout": [str(s.raw("dev"))],
            "train.output_dir": str(self.lexicon_dir)})

    def pretrain_config(self, v: Variant):
        from zencli.jobs.pretrain import build_config

        if v.pretrain is None:
            raise ValueError(f"variant {v.name} is not pretrained")
        s = self.settings
        options = {
            "data.corpus": [str(s.raw("train"))], "data.heldout": [str(s.raw("dev"))],
            "data.vocab": str(self.lexicon_dir / "vocab.txt"), "data.ngram": str(self.lexicon_dir / "ngram.txt"),
            "data.build_missing": False, "train.output_dir": str(self.pretrain_dir(v.name)),
            "train.max_steps": s.pretrain_steps, "train.warmup_steps": round(WARMUP_FRACTION * s.pretrain_steps),
            **v.pretrain,
        }
        return build_config(s.pretrain_recipe, s.pretrain_sets, options)

    def finetune_config(self, v: Variant, seed: int):
        from zencli.jobs.finetune import build_config

        s = self.settings
        options: dict[str, Any] = {
            "task.name": s.task, "data.train": str(s.task_file("train")), "data.dev": str(s.task_file("dev")),
            "data.test": str(s.task_file("test")), "train.output_dir": str(self.finetune_dir(v.name, seed)),
            "train.seed": seed, **v.finetune,
        }
        if v.pretrain is not None:
            options["model.pretrained"] = str(self.pretrain_dir(v.name) / "model")
        if s.finetune_steps is not None:
            steps = s.finetune_steps if v.pretrain is not None else s.from_scratch_steps
            options["train.max_steps"] = steps
            options["train.eval_every"] = max(1, steps // EVAL_POINTS)
            options["train.patience"] = 0  # the learning curves keep all their points (as 5 evaluations did)
        else:
            options["epochs"] = s.finetune_epochs
        # the pretrained model brings its vocab.txt / ngram.txt; CHTE builds its char table from training
        overrides = [*s.finetune_sets, "model.vocab=null", "model.ngram=null"]
        cfg = build_config(s.finetune_recipe_name, overrides, options)
        if not v.cnn_heads:
            chte = cfg.model.chte
            chte.n_linear_heads = _chte_heads(chte)
            chte.cnn_windows = []
        return cfg

    def check_recipes(self) -> None:
        """Build every recipe of the plan once (no file is read): a bad key or value is a one-line error
        before anything runs."""
        if self.pretraining:
            self.lexicon_config()
        for v in self.variants:
            if v.pretrain is not None:
                self.pretrain_config(v)
            self.finetune_config(v, self.seeds[0])

    def describe(self) -> dict[str, Any]:
        """The plan as JSON: settings, variants with their recipe keys, claims, runs."""
        s = self.settings
        return {
            "task": s.task, "data": str(s.data), "task_data": str(s.task_file("train").parent),
            "pretrained_from": None if s.pretrained_from is None else str(s.pretrained_from),
            "out": str(s.out), "seeds": self.seeds,
            "pretrain_steps": s.pretrain_steps, "finetune_steps": s.finetune_steps,
            "finetune_epochs": s.finetune_epochs, "scratch_steps": s.from_scratch_steps,
            "pretrain_recipe": s.pretrain_recipe,
            "finetune_recipe": s.finetune_recipe_name, "pretrain_sets": list(s.pretrain_sets),
            "finetune_sets": list(s.finetune_sets),
            "variants": [{"name": v.name, "description": v.description, "pretrain": v.pretrain,
                          "finetune": v.finetune, "cnn_heads": v.cnn_heads} for v in self.variants],
            "runs": [{"kind": r.kind, "variant": r.variant, "seed": r.seed, "dir": str(r.dir)} for r in self.runs()],
        }


def _chte_heads(chte) -> int:
    """The number of heads the CHTE encoder will have (the recipe's, its paper setting's, or the default)."""
    from zencli.model.chte import ChteConfig

    if chte.n_heads is not None:
        return chte.n_heads
    return (ChteConfig.paper(chte.setting) if chte.setting else ChteConfig()).n_heads
