"""zen's module names against the released ones (`zencli.model.names`): the map, and zen's own files written
before the rename (with the released names) loading and resuming as they did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tests.test_finetune_cli import finetune
from tests.test_pretrain_cli import assert_resumed_at_3_like, micro_recipe, records, zen
from zencli.model.checkpoint import load_zen_model, save_zen_model
from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.model.names import released_state, to_released, to_zen, zen_state
from zencli.model.pretraining import ZenForPreTraining
from zencli.tasks.model_dir import load_task_model
from zencli.train.checkpoint import fingerprint, load_checkpoint, with_current_names
from zencli.train.run_dir import refuse_another_run


def tiny(encoder: str = "zen2") -> ZenConfig:
    return ZenConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, word_size=9, num_hidden_word_layers=1,
                     encoder=encoder)


def test_the_map_gives_the_released_keys_and_back() -> None:
    names = list(ZenForPreTraining(tiny()).state_dict())
    released = [to_released(k) for k in names]
    assert {"bert.embeddings.word_embeddings.weight", "bert.word_embeddings.word_embeddings.weight",
            "bert.word_embeddings.token_type_embeddings.weight", "bert.word_embeddings.LayerNorm.bias",
            "bert.encoder.word_layers.0.output.dense.weight", "bert.encoder.layer.1.output.dense.weight",
            "cls.predictions.decoder.weight"} <= set(released)
    assert not any("word_" in k for k in names)  # zen's names say char or n-gram
    assert [to_zen(k) for k in released] == names
    assert [to_zen(k) for k in names] == names  # zen's names pass unchanged
    # any prefix: a task model's encoder, an average's `module.`
    assert to_zen("module.encoder.encoder.word_layers.0.output.dense.bias") == \
        "module.encoder.encoder.ngram_layers.0.output.dense.bias"
    assert to_zen("encoder.word_embeddings.word_embeddings.weight") == "encoder.ngram_embeddings.table.weight"


def test_a_zen_model_directory_written_before_the_rename_loads(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ZenForPreTraining(tiny()).eval()
    out = save_zen_model(model, tmp_path / "m")
    weights = out / "model.safetensors"
    with safe_open(str(weights), framework="pt") as f:  # rename the keys back, as an older zen wrote them
        old = released_state({k: f.get_tensor(k) for k in f.keys()})  # noqa: SIM118 (safe_open is not a dict)
        tied = {to_released(a): to_released(k) for a, k in json.loads(f.metadata()["tied"]).items()}
    assert "bert.word_embeddings.word_embeddings.weight" in old
    save_file(old, str(weights), metadata={"zen_format": "1", "architecture": "ZenForPreTraining",
                                           "tied": json.dumps(tied)})
    loaded = load_zen_model(out)
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.char_embeddings.weight


def test_a_fine_tuned_model_written_before_the_rename_loads(tmp_path: Path) -> None:
    _, out = finetune(tmp_path, "cws", steps=2, dev=False)
    want = load_task_model(out).model.state_dict()
    weights = out / "model" / "model.safetensors"
    with safe_open(str(weights), framework="pt") as f:
        old = released_state({k: f.get_tensor(k) for k in f.keys()})  # noqa: SIM118 (safe_open is not a dict)
        metadata = f.metadata()
    assert "encoder.encoder.word_layers.0.output.dense.weight" in old
    save_file(old, str(weights), metadata=metadata)
    got = load_task_model(out).model.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_an_old_fingerprint_compares_equal_after_the_map(tmp_path: Path) -> None:
    params = {n: list(p.shape) for n, p in ZenModel(tiny()).named_parameters()}
    new = {"lr": 0.001, "parameters": params}
    old = {"lr": 0.001, "parameters": released_state(params)}
    assert fingerprint(old) != fingerprint(new)
    assert with_current_names(fingerprint(old), old) == (fingerprint(new), new)
    assert with_current_names(fingerprint(new), new) == (fingerprint(new), new)  # recorded since: unchanged
    (tmp_path / "run.json").write_text(json.dumps({"fingerprint": fingerprint(old), "fingerprint_values": old}))
    refuse_another_run(tmp_path, fingerprint(new), new)  # the same run: not refused


def _as_before_the_rename(path: Path) -> None:
    """Rewrite a training checkpoint with the names (and so the fingerprint) an older zen recorded."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    state["model"] = released_state(state["model"])
    if state.get("ema"):
        state["ema"] = released_state(state["ema"])
    values = state["fingerprint_values"]
    values["parameters"] = released_state(values["parameters"])
    state["fingerprint"] = fingerprint(values)
    torch.save(state, path)


def test_a_run_started_before_the_rename_resumes_exactly(tmp_path: Path) -> None:
    recipe = micro_recipe(tmp_path)
    out = tmp_path / "run"
    zen("pretrain", "-r", str(recipe), "--quiet")
    first = records(out, "train")
    # As if an older zen had written the step-3 checkpoint and run.json, and was killed after it.
    ckpt = out / "checkpoints" / "step-00000003.pt"
    _as_before_the_rename(ckpt)
    assert "bert.encoder.word_layers.0.output.dense.weight" in torch.load(ckpt, weights_only=True)["model"]
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    run["fingerprint_values"]["parameters"] = released_state(run["fingerprint_values"]["parameters"])
    run["fingerprint"] = fingerprint(run["fingerprint_values"])
    (out / "run.json").write_text(json.dumps(run), encoding="utf-8")
    assert load_checkpoint(ckpt)["model"].keys() == zen_state(torch.load(ckpt, weights_only=True)["model"]).keys()
    (out / "checkpoints" / "step-00000006.pt").unlink()
    shutil.rmtree(out / "model")

    zen("pretrain", "-r", str(recipe), "--quiet")
    assert_resumed_at_3_like(out, first)


def test_a_model_of_an_unknown_format_version_is_a_one_line_error(tmp_path):
    import json

    from zencli.errors import ZenError
    from zencli.model.checkpoint import READABLE_VERSIONS, read_zen_config

    assert 1 in READABLE_VERSIONS  # models saved under the released names still load (mapped)
    (tmp_path / "config.json").write_text(json.dumps({"zen_format": 99, "architecture": "ZenModel"}))
    with pytest.raises(ZenError, match=r"zen_format 99 is not supported \(this zen reads 1, 2; a newer zen"):
        read_zen_config(tmp_path)
