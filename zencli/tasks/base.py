"""Fine-tuning tasks: the protocol every task implements, and the registry that finds them.

A task is one class in one module of this package. The class says, in one place, how its data is read,
which head sits on the encoder, how a batch is turned into a loss, how predictions are decoded and
written, and which metric scores them; `@register` makes `zen finetune`, `zen predict` and `zen evaluate`
know it, and zencli/tasks/__init__.py imports each task module, so the registry is full whenever the package
is loaded (a new task adds its file and one import line there).

A task object is bound to its task settings (`TaskSection` of the recipe) and to its *state*: what it
learned from the training data and must keep with the model, e.g. the label list. The state is plain
JSON saved in the model directory's `task.json`, so `Task(settings, state)` rebuilds the same task at
prediction time:

    task = TaskClass.from_training_data(settings, train_gold)   # zen finetune
    task = TaskClass(settings, saved_state)                      # zen predict / evaluate

What flows through a task:
- examples: whatever its reader yields (`TaggedSentence` for cws/pos/ner), read by `read` into a
  `GoldData` (zencli.tasks.scoring), or parsed from one input line of `zen predict` by `parse_input`;
- records: feature dicts of 1-D numpy arrays (`InputPipeline.encode` gives the model inputs, the task
  adds its label arrays), padded into batches by `zencli.data.collate.collate`;
- `Encoded`: the encoder's output for a batch (hidden states, pooled vector, token mask), which the
  task's head turns into a loss (`loss`) or into predictions (`predict`);
- predictions: one per example, in the shape `evaluate` scores and `format_prediction` writes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zencli.errors import ZenError, unknown_task
from zencli.tasks.scoring import Evaluation, GoldData, read_gold

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import torch
    from torch import nn

    from zencli.config.finetune import TaskSection
    from zencli.tasks.inputs import InputPipeline

Record = dict[str, "np.ndarray"]


@dataclass
class Encoded:
    """The encoder's view of a batch, what task heads consume (`TaskModel.encode`, zencli.tasks.network)."""

    hidden: torch.Tensor  # [B, L, H] per token (CHTE output when CHTE is on top)
    pooled: torch.Tensor | None  # [B, H] pooled [CLS] of ZEN/BERT; None for CHTE from characters
    mask: torch.Tensor  # [B, L] bool: real tokens, [CLS]/[SEP] included


class Task(ABC):
    """One fine-tuning task. Subclasses set the class attributes and implement the abstract methods."""

    name: ClassVar[str]  # registry key and `task.name` in recipes, e.g. "ner"
    description: ClassVar[str]  # one line for help texts
    main_metric: ClassVar[str]  # key of the score that selects checkpoints, e.g. "f1"
    output_formats: ClassVar[tuple[str, ...]]  # `zen predict --format` choices; the first is the default
    uses_pooled: ClassVar[bool] = True  # False: the head ignores the pooled [CLS] vector (DDP must know)
    supports_chte: ClassVar[bool] = True  # False: CHTE (a character tagging encoder) cannot serve this task
    metrics: ClassVar[tuple[str, ...]] = ()  # `task.metric` choices, the default first; (): one metric, no choice
    word_level: ClassVar[bool] = False  # True: reads word-level data (a label per word): `task.word_labels` applies
    # `task.ngram_bag` when null (a new fine-tuning); None: the task has no n-gram bag. A saved model whose
    # task.json lacks the key has none (it predates the bag)
    ngram_bag_default: ClassVar[bool | None] = None
    # `task.decoder` when null, for token tasks on ZEN/BERT (CHTE: always crf, the paper's)
    decoder_default: ClassVar[str] = "softmax"

    def __init__(self, settings: TaskSection, state: dict[str, Any]):
        self.check_settings(settings)
        self.settings = settings
        self.load_state(state)

    @classmethod
    def check_settings(cls, settings: TaskSection) -> None:
        """ZenError for task settings this task cannot honour (checked before any data is read)."""
        metric = settings.metric
        if metric is not None and metric not in cls.metrics:
            raise ZenError(f"task.metric: {metric!r}: " + (f"task {cls.name} scores with {' or '.join(cls.metrics)}"
                           if cls.metrics else f"task {cls.name} has one metric; remove task.metric"))
        if settings.ngram_bag and cls.ngram_bag_default is None:
            raise ZenError(f"task.ngram_bag: applies to sentence classification (dc, sa, spm, nli), not task "
                           f"{cls.name}; remove it")
        if settings.word_labels is not None and not cls.word_level:
            raise ZenError(f"task.word_labels: applies to word-level tagging data (pos, ner), not task {cls.name}; "
                           f"remove it")

    # --- state kept with the model ------------------------------------------------------------------
    @classmethod
    def from_training_data(cls, settings: TaskSection, train: GoldData) -> Task:
        """The task with the state learned from the training data (e.g. its label set)."""
        return cls(settings, cls.build_state(settings, train))

    @classmethod
    @abstractmethod
    def build_state(cls, settings: TaskSection, train: GoldData) -> dict[str, Any]:
        """Plain JSON data learned from training data (labels, scheme, ...)."""

    @abstractmethod
    def load_state(self, state: dict[str, Any]) -> None:
        """Take the state back (from `build_state` or a model's task.json); ZenError if it is malformed."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The state as plain JSON data, for task.json."""

    # --- data ---------------------------------------------------------------------------------------
    @classmethod
    def read(cls, path: str | Path, fmt: str = "auto") -> GoldData:
        """A labelled file of this task (train, dev or test)."""
        return read_gold(path, cls.name, fmt)

    @abstractmethod
    def parse_input(self, text: str, source: str, line: int) -> Any:
        """One line of `zen predict` input → one example (raise ZenError naming source:line if bad)."""

    def lexicon_units(self, examples: Sequence[Any]) -> Counter[str] | None:
        """The multi-character units the labels of training `examples` mark (words, entities), with their
        counts, for `model.training_ngrams`; None: this task's labels mark none."""
        return None

    def training_texts(self, examples: Sequence[Any]) -> list[str] | None:
        """The raw texts of training `examples`, where `model.training_ngrams` takes the PMI n-grams of
        the training text instead of labelled units; None: no such texts (labelled units, or neither)."""
        return None

    def vocab_units(self, examples: Sequence[Any]) -> tuple[str, Counter[str]] | None:
        """How the text of training `examples` meets the vocabulary, for `model.extend_vocab` and the [UNK]
        warning (zencli.tasks.training_vocab): ("chars", counts) when each char is looked up alone,
        ("words", counts) when each word goes through the tokenizer, ("texts", counts) for running text;
        None: this task cannot say."""
        texts = self.training_texts(examples)
        return None if texts is None else ("texts", Counter(texts))

    def data_notes(self, gold: GoldData) -> list[str]:
        """Things worth telling the user about a file this task will train or evaluate on."""
        return [f"{gold.path}: {n}" for n in gold.info.notes]

    def unseen_labels(self, gold: GoldData) -> dict[str, int]:
        """Gold labels of an evaluation file that the model's label set lacks, with counts (they are
        scored as errors, never a crash)."""
        return {}

    def evaluation_notes(self, gold: GoldData) -> list[str]:
        """`data_notes` plus, when the gold file has labels the model lacks, how many (scored as errors)."""
        notes = self.data_notes(gold)
        unseen = self.unseen_labels(gold)
        if unseen:
            notes.append(f"{sum(unseen.values())} gold labels ({len(unseen)} distinct: "
                         f"{', '.join(list(unseen)[:8])}{' …' if len(unseen) > 8 else ''}) are not in the model's "
                         f"label set; the model never predicts them, so they count as errors")
        return notes

    # --- model --------------------------------------------------------------------------------------
    @abstractmethod
    def build_head(self, hidden_size: int, *, default_decoder: str = "softmax") -> nn.Module:
        """The task head on hidden states of width `hidden_size` (freshly initialised)."""

    @abstractmethod
    def training_records(self, examples: Sequence[Any], inputs: InputPipeline) -> tuple[list[Record], list[str]]:
        """Model inputs + targets for training, and notes (e.g. how many windows long inputs became).
        Nothing may be truncated: inputs longer than a window are cut into several records."""

    @abstractmethod
    def loss(self, model: nn.Module, encoded: Encoded, batch: dict[str, torch.Tensor]
             ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Mean loss of a batch and metrics for the progress display (see `zencli.train.loop`). `model` is
        the `TaskModel` (zencli.tasks.network, which builds on this module): its `head` is `build_head`'s."""

    # The head's outputs for prediction, before decoding (what `TaskModel.outputs` and an exported ONNX graph
    # return, by these names; zencli.tasks.engine).
    output_names: ClassVar[tuple[str, ...]] = ("logits",)

    @abstractmethod
    def head_outputs(self, head: nn.Module, encoded: Encoded, batch: dict[str, torch.Tensor]
                     ) -> tuple[torch.Tensor, ...]:
        """The head's raw scores of a batch, one tensor per `output_names`; decoding stays with `predict`."""

    @abstractmethod
    def predict(self, model: nn.Module, inputs: InputPipeline, examples: Sequence[Any],
                batch_size: int | None = None) -> list[Any]:
        """One prediction per example, in order (the `TaskModel` in eval mode, no gradients)."""

    @abstractmethod
    def evaluate(self, gold: GoldData, predictions: Sequence[Any], *, name: str = "model",
                 train: GoldData | None = None) -> Evaluation:
        """Score predictions against gold data with the task's official metric. `train` (the training
        data, when known) may add figures such as OOV recall."""

    @abstractmethod
    def format_prediction(self, example: Any, prediction: Any, fmt: str) -> str:
        """The text `zen predict` writes for one example in format `fmt` (without a final newline)."""

    def check_format(self, fmt: str | None) -> str:
        """`fmt` or the default output format; ZenError for a format this task cannot write."""
        if fmt is None:
            return self.output_formats[0]
        if fmt not in self.output_formats:
            raise ZenError(f"--format {fmt!r}: task {self.name} writes {', '.join(self.output_formats)}")
        return fmt

    def baseline_predictions(self, train: GoldData, examples: Sequence[Any]) -> tuple[str, list[Any]] | None:
        """What the training data's label counts alone predict for `examples` (the majority baseline a
        fine-tuning must beat), in `predict`'s shape, with a few words saying what it is; None: no such
        baseline for this task."""
        return None

    def scores(self, evaluation: Evaluation) -> dict[str, float]:
        """The numbers the training loop logs and selects on (the main metric among them)."""
        out = {k: v for k, v in evaluation.result.to_dict().items() if isinstance(v, float)}  # not counts
        out[self.main_metric] = float(evaluation.main_score)
        return out


# --- registry ---------------------------------------------------------------------------------------

_TASKS: dict[str, type[Task]] = {}  # filled as zencli/tasks/__init__.py imports the task modules


def register(cls: type[Task]) -> type[Task]:
    """Class decorator: make a task available by its `name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__}: a registered task needs a non-empty `name`")
    if name in _TASKS and _TASKS[name] is not cls:
        raise TypeError(f"task {name!r} is registered twice ({_TASKS[name].__name__}, {cls.__name__})")
    for attr in ("description", "main_metric", "output_formats"):
        if not hasattr(cls, attr):
            raise TypeError(f"{cls.__name__}: a registered task needs `{attr}`")
    _TASKS[name] = cls
    return cls


def task_names() -> list[str]:
    return sorted(_TASKS)


def task_class(name: str) -> type[Task]:
    """The registered task called `name`; ZenError listing the known ones otherwise."""
    if name not in _TASKS:
        raise ZenError(f"task.name: {unknown_task(name, _TASKS)}")
    return _TASKS[name]
