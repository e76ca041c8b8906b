"""Progress text, metrics.jsonl maintenance and the optional TensorBoard writer."""

import json
import sys
import types

from zencli.train.progress import MetricsLog, format_eta, summary


def test_summary_orders_loss_and_metrics_before_rate_and_hides_bookkeeping():
    text = summary({"kind": "train", "step": 5, "loss": 2.5, "mlm_acc": 0.25, "nsp_acc": None, "lr": 1e-4,
                    "grad_norm": 3.0, "tokens_per_s": 12345.6, "elapsed_s": 1.0})
    assert text == "loss 2.5000 · mlm_acc 0.2500 · nsp_acc n/a · lr 1.00e-04 · 12,346 tok/s"
    assert format_eta(3725) == "1:02:05" and format_eta(float("nan")) == "?"


def test_truncate_after_drops_later_records_and_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"kind": "train", "step": s, "loss": 1.0}) for s in range(1, 8)]
    path.write_text("\n".join(lines) + '\n{"kind": "train", "st')  # killed mid-write
    MetricsLog.truncate_after(tmp_path, 5)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3, 4, 5]
    MetricsLog.truncate_after(tmp_path, 0)
    assert path.read_text() == ""


def test_tensorboard_scalars_when_the_package_is_installed(tmp_path, monkeypatch):
    calls = []

    class FakeWriter:
        def __init__(self, log_dir):
            calls.append(("dir", log_dir))

        def add_scalar(self, tag, value, step):
            calls.append((tag, value, step))

        def close(self):
            calls.append(("close",))

    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = FakeWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    log = MetricsLog(tmp_path, tensorboard=True)
    log.write({"kind": "train", "step": 3, "loss": 1.5, "acc": None, "lr": 0.1})
    log.write({"kind": "eval", "step": 3, "f1": 0.5})
    log.close()
    assert calls == [("dir", str(tmp_path / "tensorboard")), ("train/loss", 1.5, 3), ("train/lr", 0.1, 3),
                     ("eval/f1", 0.5, 3), ("close",)]
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2


def test_without_tensorboard_only_jsonl(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails like when not installed
    log = MetricsLog(tmp_path, tensorboard=True)
    log.write({"kind": "train", "step": 1, "loss": 1.0})
    log.close()
    assert not (tmp_path / "tensorboard").exists()
