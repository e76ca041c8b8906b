"""`model:DIR` segmenter for whole n-gram masking: a zen CWS model fine-tuned by `zen finetune --task cws`
(the role WMSeg plays in the ZEN 2.0 paper; see zencli.data.segmenters for the other segmenters). It lives
in the tasks layer because it runs a task model; pretraining hands `load_model_segmenter` to the shard
generator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zencli.data.readers import TaggedSentence
from zencli.data.segmenters import Segmenter, Span
from zencli.errors import ZenError
from zencli.tasks.model_dir import TASK_NAME, load_task_model
from zencli.text.tokenizer import CONTINUATION
from zencli.text.vocab import SPECIAL_TOKENS


def load_model_segmenter(directory: str | Path) -> Segmenter:
    """`model:DIR`: a zen CWS model made by `zen finetune --task cws` (DIR or its `model/` folder)."""
    d = Path(directory)
    if not d.is_dir():
        raise _no_cws_model(d, "no such directory")
    if not (d / TASK_NAME).is_file() and not (d / "model" / TASK_NAME).is_file():
        raise _no_cws_model(d, f"no {TASK_NAME}: not a fine-tuned task model")
    loaded = load_task_model(d)
    if loaded.task.name != "cws":
        raise _no_cws_model(d, f"its task is {loaded.task.name!r}, not 'cws'")
    return ModelSegmenter(loaded)


class ModelSegmenter:
    """Pieces = words predicted by a zen CWS model over the tokens' surface characters."""

    name = "model"

    def __init__(self, loaded):
        self.loaded = loaded

    def segment(self, tokens: Sequence[str]) -> list[Span]:
        # Runs of ordinary tokens between special tokens; each run is segmented as its own sentence.
        runs: list[tuple[int, int]] = []
        start = None
        for i, tok in enumerate(tokens):
            if tok in SPECIAL_TOKENS:
                if start is not None:
                    runs.append((start, i))
                start = None
            elif start is None:
                start = i
        if start is not None:
            runs.append((start, len(tokens)))
        sentences, owners = [], []
        for s, e in runs:
            chars: list[str] = []
            owner: list[int] = []  # token index of each character
            for t in range(s, e):
                tok = tokens[t]
                surface = tok[len(CONTINUATION):] if tok.startswith(CONTINUATION) else tok
                chars.extend(surface)
                owner.extend([t] * len(surface))
            sentences.append(TaggedSentence(chars, None, "<segmenter>", 0))
            owners.append(owner)
        labels = self.loaded.task.predict(self.loaded.model, self.loaded.inputs, sentences) if sentences else []
        ends = {owner[c] for owner, labs in zip(owners, labels) for c, lab in enumerate(labs) if lab[:1] in ("E", "S")}
        spans: list[Span] = [(i, i + 1) for i, tok in enumerate(tokens) if tok in SPECIAL_TOKENS]
        for s, e in runs:
            piece_start = s
            for t in range(s, e):
                if t in ends or t == e - 1:
                    spans.append((piece_start, t + 1))
                    piece_start = t + 1
        return sorted(spans)

    def describe(self) -> str:
        """Changes whenever the model's output may change (part of the shards' fingerprint)."""
        weights = Path(self.loaded.path) / "model.safetensors"
        return f"model {self.loaded.path} {weights.stat().st_size} {weights.stat().st_mtime_ns}"


def _no_cws_model(d: Path, why: str) -> ZenError:
    return ZenError(
        f"model:DIR segmenter needs a CWS model made by `zen finetune --task cws`; {d} has no such model ({why})"
    )
