"""What a model directory holds, whichever kind it is (`zen model info`).

    info = describe_model("runs/ner")      # a fine-tuned model, a zen encoder, released ZEN or BERT
    info["kind"], info["task"], info["encoder"], info["scores"]

Kinds: a fine-tuned task model (task.json: the task, its labels and decoder, the encoder, and the dev/test
scores `zen finetune` wrote beside it); a zen encoder, pretrained or bare (with the held-out scores of the
`zen pretrain` run whose model/ it is); a released ZEN 1.0/2.0 directory; a BERT checkpoint. The output
directory of `zen finetune` or `zen pretrain` stands for its model/ folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

from zencli.errors import ZenError
from zencli.model.checkpoint import CONFIG_NAME, NGRAM_NAME, VOCAB_NAME, load_zen_model
from zencli.model.config import ZenConfig
from zencli.model.pretraining import ZenForPreTraining
from zencli.model.sources import checkpoint_kind, load_pretrained
from zencli.tasks.model_dir import TASK_NAME, load_task_model, resolve_model_dir

KINDS = {"released": "released ZEN", "bert": "BERT checkpoint"}
PRETRAIN_RESULTS = "results.json"  # zencli.tasks.pretraining.RESULTS_NAME, beside the run's model/


def describe_model(path: str | Path) -> dict[str, Any]:
    """A JSON-able description: path, kind, task (fine-tuned models), encoder sizes, parameters, text
    files, where the encoder came from and the scores found beside the model."""
    p = Path(path)
    if (p / TASK_NAME).is_file() or (p / "model" / TASK_NAME).is_file():
        return _task_model(resolve_model_dir(p))
    if not (p / CONFIG_NAME).is_file() and (p / "model" / CONFIG_NAME).is_file():
        p = p / "model"  # a `zen pretrain` output directory
    kind = checkpoint_kind(p)
    if kind == "zen":
        model = load_zen_model(p)
        name = "zen pretrained model" if isinstance(model, ZenForPreTraining) else "zen encoder"
        out = _base(p, name, model.config, model, p / VOCAB_NAME, p / NGRAM_NAME)
        out["scores"] = _pretrain_scores(p)
        return out
    pre = load_pretrained(p)
    return _base(p, KINDS[kind], pre.model.config, pre.model, pre.vocab, pre.ngram)


def _base(d: Path, kind: str, config: ZenConfig | None, model: nn.Module, vocab: Path | None,
          ngram: Path | None) -> dict[str, Any]:
    return {"path": str(d), "kind": kind, "encoder": None if config is None else _encoder(config),
            "parameters": sum(x.numel() for x in model.parameters()),
            "files": {"vocab.txt": _file(vocab), "ngram.txt": _file(ngram)}}


def _encoder(c: ZenConfig) -> dict[str, Any]:
    ngrams = c.encoder != "bert"
    return {"type": c.encoder, "layers": c.num_hidden_layers, "hidden_size": c.hidden_size,
            "heads": c.num_attention_heads, "intermediate_size": c.intermediate_size,
            "ngram_layers": c.num_hidden_word_layers if ngrams else None, "vocab_rows": c.vocab_size,
            "ngram_rows": c.word_size if ngrams else None}


def _file(path: Path | None) -> str | None:
    return str(path) if path is not None and Path(path).is_file() else None


def _task_model(d: Path) -> dict[str, Any]:
    loaded = load_task_model(d)
    task, spec, settings = loaded.task, loaded.spec, loaded.task.settings
    encoder = loaded.model.encoder
    out = _base(d, "fine-tuned model", None if encoder is None else encoder.config, loaded.model,
                d / VOCAB_NAME, d / NGRAM_NAME)
    state = task.state()
    out["task"] = {"name": task.name, "description": task.description, "labels": state.get("labels"),
                   "scheme": state.get("scheme"), "level": state.get("level"), "decoder": settings.decoder,
                   "max_seq_len": settings.max_seq_len, "main_metric": task.main_metric}
    out["chte"] = spec.chte
    out["source"] = spec.source
    out["scores"] = {split: _scores(d / f"{split}_scores.json") for split in ("dev", "test")
                     if (d / f"{split}_scores.json").is_file()}
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ZenError(f"{path}: cannot read it as JSON ({e})") from None
    if not isinstance(data, dict):
        raise ZenError(f"{path}: expected a JSON object")
    return data


def _scores(path: Path) -> dict[str, Any]:
    """The main score of a `zen finetune` / `zen evaluate` scores file, with its data and step."""
    s = _read(path)
    return {"metric": s.get("main"), "value": s.get("main_score"), "gold": s.get("gold_file"),
            "step": s.get("step"), "file": str(path)}


def _pretrain_scores(model_dir: Path) -> dict[str, Any]:
    """Held-out scores of the `zen pretrain` run whose model/ this is (its results.json), if any."""
    path = model_dir.parent / PRETRAIN_RESULTS
    if model_dir.name != "model" or not path.is_file():
        return {}
    r = _read(path)
    final = (r.get("heldout") or {}).get("final") or {}
    # An RTD run saves its discriminator: its own scores are replaced-token detection; masked_acc and
    # mlm_loss are then the generator's, which is not saved.
    objective = r.get("objective", "mlm")
    rtd = {k: final.get(k) for k in ("rtd_acc", "rtd_auc")} if objective == "rtd" else {}
    return {"heldout": {"objective": objective, **rtd, "masked_acc": final.get("masked_acc"),
                        "mlm_loss": final.get("mlm_loss"), "nsp_acc": final.get("nsp_acc"), "step": r.get("steps"),
                        "file": str(path)}}
