"""What the training jobs (`zen pretrain`, `zen finetune`) share to run: starting `--nproc` processes, and
which process reports."""

from __future__ import annotations

import os
import signal

from zencli.errors import ZenError
from zencli.signals import Interrupted


def launch(args: list[str], nproc: int) -> None:
    """Run `zen <args>` as `nproc` cooperating processes on this machine (`zencli.train.distributed`)."""
    # lazy: torch; jobs.finetune / jobs.pretrain import this module before a recipe is checked
    from zencli.train.distributed import launch_local, python_module_command

    code = launch_local(nproc, python_module_command(*args))
    if code in (130, 143):  # stopped by a signal: rank 0 said where its checkpoint is
        raise Interrupted("", signal.SIGINT if code == 130 else signal.SIGTERM, announce=False)
    if code:
        raise ZenError(f"{args[0]}: a training process exited with status {code}")


def reports() -> bool:
    """Whether this process reports the results: the only one, or rank 0 of a distributed run."""
    return int(os.environ.get("RANK", "0") or 0) == 0
