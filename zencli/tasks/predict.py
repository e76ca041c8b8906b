"""Prediction with a fine-tuned model: streaming text through it, and scoring it on gold data.

    loaded = load_task_model("runs/ner/model")                 # zencli.tasks.model_dir
    for chunk in predict_chunks(loaded, read_stream(sys.stdin.buffer), fmt="json"):
        sys.stdout.write("".join(line + "\\n" for line in chunk))

    evaluation = evaluate_model("runs/ner/model", "test.tsv")  # `zen evaluate MODEL --data FILE`

Streaming: input lines are read `chunk_lines` at a time, predicted (the task batches their windows
internally) and written in input order before the next chunk is read, so a pipe sees output as input
arrives and memory stays flat on inputs of any size. Every input line gives exactly one output record
(one line for text/json; for conll one char<TAB>label line per char and a blank line), an empty line
included; a line longer than the model's max_seq_len is read in windows, never truncated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import torch

from zencli.atomic_write import atomic_write_path
from zencli.errors import ZenError
from zencli.tasks.model_dir import LoadedModel, load_task_model
from zencli.tasks.scoring import Evaluation
from zencli.text.reading import decode_lines
from zencli.train.dtype import inference_autocast

STDIN = "<stdin>"


def read_stream(stream: IO[bytes] | IO[str], name: str = STDIN) -> Iterator[tuple[int, str]]:
    """(line number, text) of a stream (binary, or text already decoded), decoded as
    `zencli.text.reading.iter_lines` decodes files; lines are yielded as they arrive."""
    return decode_lines(stream, name, expected="UTF-8 text")


def predict_examples(loaded: LoadedModel, examples: list[Any], batch_size: int | None = None) -> list[Any]:
    """One prediction per example (the task's prediction type), in order, in the model's dtype."""
    with torch.no_grad(), inference_autocast(loaded.dtype, loaded.model.device):
        return loaded.task.predict(loaded.model, loaded.inputs, examples, batch_size)


def predict_chunks(loaded: LoadedModel, lines: Iterable[tuple[int, str]], *, fmt: str | None = None,
                   source: str = STDIN, chunk_lines: int = 256, batch_size: int | None = None
                   ) -> Iterator[list[str]]:
    """Formatted output records, one per input line, yielded a chunk of `chunk_lines` lines at a time."""
    if chunk_lines < 1:
        raise ZenError(f"--chunk-lines: expected >= 1, got {chunk_lines}")
    task = loaded.task
    fmt = task.check_format(fmt)
    chunk: list[Any] = []

    def flush() -> list[str]:
        predictions = predict_examples(loaded, chunk, batch_size)
        return [task.format_prediction(x, p, fmt) for x, p in zip(chunk, predictions)]

    for lineno, text in lines:
        chunk.append(task.parse_input(text, source, lineno))
        if len(chunk) >= chunk_lines:
            yield flush()
            chunk = []
    if chunk:
        yield flush()


def predict_stream(loaded: LoadedModel, lines: Iterable[tuple[int, str]], out: IO[str], *, fmt: str | None = None,
                   source: str = STDIN, chunk_lines: int = 256, batch_size: int | None = None) -> int:
    """Write the output of every input line to `out` (flushed after each chunk); returns the line count."""
    n = 0
    for records in predict_chunks(loaded, lines, fmt=fmt, source=source, chunk_lines=chunk_lines,
                                  batch_size=batch_size):
        out.write("".join(r + "\n" for r in records))
        out.flush()
        n += len(records)
    return n


def predict_to_file(loaded: LoadedModel, lines: Iterable[tuple[int, str]], output: str | Path, *,
                    fmt: str | None = None, source: str = STDIN, chunk_lines: int = 256,
                    batch_size: int | None = None) -> int:
    """`predict_stream` into the file `output`, atomically (zencli.atomic_write): it appears complete or
    not at all — an error, a full disk (a one-line WriteError) or a signal (SIGTERM, Ctrl-C) leaves neither
    it nor a temp file. Returns the line count."""
    output = Path(output)
    if output.is_dir():
        raise ZenError(f"{output}: is a directory; expected the file to write")
    count = 0

    def write(tmp: Path) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            count = predict_stream(loaded, lines, f, fmt=fmt, source=source, chunk_lines=chunk_lines,
                                   batch_size=batch_size)

    atomic_write_path(output, write)
    return count


def predict_file(model: str | Path | LoadedModel, data: str | Path, fmt: str = "auto",
                 batch_size: int | None = None) -> tuple[Any, list[Any]]:
    """Read a labelled file with the model's task reader and predict it in memory:
    (GoldData, one prediction per example)."""
    loaded = model if isinstance(model, LoadedModel) else load_task_model(model)
    gold = loaded.task.read(data, fmt)
    return gold, predict_examples(loaded, gold.examples, batch_size)


def evaluate_model(model: str | Path | LoadedModel, data: str | Path, fmt: str = "auto",
                   batch_size: int | None = None) -> Evaluation:
    """Score a fine-tuned model on a labelled file with the task's metric (`zen evaluate MODEL --data`).
    Gold labels the model never saw are counted in the notes and score as errors."""
    loaded = model if isinstance(model, LoadedModel) else load_task_model(model)
    gold, predictions = predict_file(loaded, data, fmt, batch_size)
    evaluation = loaded.task.evaluate(gold, predictions, name=str(loaded.path))
    evaluation.inference_dtype = loaded.dtype
    return evaluation
