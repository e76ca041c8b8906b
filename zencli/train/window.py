"""What the training loop sums between two log lines, without host syncs: losses, metrics, token counts and
gradient norms stay where they are (device tensors on the device, Python numbers on the host) until a
log step reads them, once, for all processes together."""

from __future__ import annotations

import time
from typing import Any

import torch

from zencli.train import distributed as D


class RunningSum:
    """A running sum kept where its values are: tensors on their device (adding one is a kernel launch,
    not a host sync), Python numbers on the host (no copy to the device per micro-batch)."""

    __slots__ = ("device_sum", "host_sum")

    def __init__(self) -> None:
        self.device_sum: torch.Tensor | None = None
        self.host_sum = 0.0

    def add(self, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if self.device_sum is None:
                self.device_sum = torch.zeros((), dtype=torch.float64, device=value.device)
            self.device_sum.add_(value.detach().to(self.device_sum.device))  # add_ casts to float64 itself
        else:
            self.host_sum += float(value)

    def tensor(self, device: torch.device) -> torch.Tensor:
        total = torch.tensor(self.host_sum, dtype=torch.float64, device=device)
        return total if self.device_sum is None else total + self.device_sum.to(device)

    def value(self) -> float:
        """The sum as a number (a host sync when part of it is on a GPU)."""
        return self.host_sum + (self.device_sum.item() if self.device_sum is not None else 0.0)


class LogWindow:
    """Sums over the micro-batches and steps since the last log line (read only when logging)."""

    def __init__(self, first_step: int):
        self.reset(first_step)

    def reset(self, first_step: int) -> None:
        self.first_step = first_step  # the window's first optimizer step (1-based)
        self.loss, self.tokens, self.grad_norm = RunningSum(), RunningSum(), RunningSum()
        self.micro = 0
        self.steps = 0
        self.metrics: dict[str, tuple[RunningSum, RunningSum]] = {}
        self.start = time.perf_counter()

    def add_micro(self, loss: torch.Tensor, metrics: dict[str, Any], n_tokens: Any) -> None:
        self.loss.add(loss)
        self.micro += 1
        self.tokens.add(n_tokens)
        for key, value in metrics.items():
            num, den = value if isinstance(value, (tuple, list)) else (value, 1.0)
            acc = self.metrics.get(key)
            if acc is None:
                acc = self.metrics[key] = (RunningSum(), RunningSum())
            acc[0].add(num)
            acc[1].add(den)

    def totals(self, ctx: D.DistContext) -> tuple[float, float, dict[str, float]]:
        """(mean loss, tokens, metrics) over this window and all processes."""
        keys = sorted(self.metrics)
        sums = [self.loss, self.tokens, *(part for key in keys for part in self.metrics[key])]
        parts = [torch.tensor(float(self.micro), dtype=torch.float64, device=ctx.device)]
        parts += [acc.tensor(ctx.device) for acc in sums]
        micro, loss, tokens, *rest = D.all_reduce_sum(torch.stack(parts), ctx).tolist()
        metrics = {}
        for key, num, den in zip(keys, rest[0::2], rest[1::2]):
            metrics[key] = num / den if den else float("nan")
        return loss / max(micro, 1.0), tokens, metrics
