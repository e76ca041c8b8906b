"""Training checkpoints: atomic files, keep-last-k, RNG capture, and the run fingerprint.

Layout under a run's output directory:

    checkpoints/step-00001000.pt   training state after optimizer step 1000 (the last `keep_last` kept)
    checkpoints/best.pt            model weights at the best evaluation (fine-tuning)

A checkpoint is one `torch.save`d dict (loaded with `weights_only=True`, so it holds tensors and plain
data only): format, step, fingerprint (+ the values it hashes), model, optimizers, scaler, rng (one
entry per process), data (one position per process), eval state. Writes are atomic: the bytes go to a
hidden temp file in the same directory, which is fsynced and then renamed over the final name with
`os.replace` (atomic on POSIX and Windows), and the directory entry is fsynced. A crash at any moment
leaves either the previous set of checkpoints or the new one complete — never a torn file under a
`step-*.pt` name. Temp files left by a killed writer are removed at the next start. A write that fails
(a full disk) is a one-line `WriteError` saying how large the checkpoint is and how much space is free;
the earlier checkpoints are kept (old ones are pruned only after the new one is in place).

Resuming reads the newest checkpoint; one that cannot be read (truncated, damaged) is named in a note and
the next older one is used (`CheckpointDir.newest_readable`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zencli.atomic_write import atomic_write
from zencli.errors import WriteError, ZenError
from zencli.model.names import zen_state
from zencli.train.settings import TrainSettings

FORMAT = "zen-train-checkpoint/1"
_STEP_RE = re.compile(r"^step-(\d{8,})\.pt$")
DAMAGED_SUFFIX = ".damaged"
_TMP_RE = re.compile(r"^\..+\.tmp-\d+$")


def tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in `obj` (nested dicts, lists, tuples): about the size of its torch.save file."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def atomic_save(obj: Any, path: Path) -> None:
    """`torch.save(obj)` to `path` so that `path` is either the old file or the complete new one; a failed
    write is a WriteError that says how much space the file needs and how much is free."""
    try:
        atomic_write(path, lambda f: torch.save(obj, f))
    except WriteError as e:
        try:
            free = f"; {_megabytes(shutil.disk_usage(Path(path).parent).free)} free there"
        except OSError:
            free = ""
        raise WriteError(path, e.error, f"the checkpoint needs about {_megabytes(tensor_bytes(obj))}{free}") from None


def load_checkpoint(path: Path) -> dict:
    """Load a checkpoint written by `atomic_save` (tensors to CPU); ZenError if it is not one."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ZenError(f"{path}: no such checkpoint file") from None
    except Exception as e:  # truncated, not a torch file, or holding objects weights_only refuses
        reason = str(e).splitlines()[0].split(". ")[0] if str(e) else ""  # torch adds sentences of advice
        raise ZenError(f"{path}: not a readable zen training checkpoint ({type(e).__name__}: {reason})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ZenError(f"{path}: not a zen training checkpoint (expected format {FORMAT})")
    return _with_current_names(state)


def _with_current_names(state: dict) -> dict:
    """A checkpoint written before zen's own module names holds the released ones (`zencli.model.names`):
    its weights, its average and its fingerprint are renamed, so it loads and resumes as it was (so is a
    fingerprint recorded before a settings key's rename: `with_current_names`). The optimizer state is by
    position, and the parameters kept their order."""
    for key in ("model", "ema"):
        if isinstance(state.get(key), dict):
            state[key] = zen_state(state[key])
    if isinstance(state.get("fingerprint_values"), dict):
        state["fingerprint"], state["fingerprint_values"] = with_current_names(state["fingerprint"],
                                                                               state["fingerprint_values"])
    return state


# --- random number generators ------------------------------------------------------------------------

def rng_state() -> dict:
    """The state of every RNG training may draw from: python, numpy (global), torch CPU, CUDA."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        # This process's GPU only (the current device: distributed.setup() selects GPU LOCAL_RANK). All
        # devices' states would not restore on a machine with fewer GPUs, nor map to the right GPU when
        # the ranks are spread over machines differently.
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"],
                         npy["has_gauss"], npy["gauss"]))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if isinstance(cuda, list):  # written before: every device's state, indexed by device
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        cuda = cuda[index] if index < len(cuda) else None
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(cuda)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# --- fingerprint -------------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def fingerprint(values: dict[str, Any]) -> str:
    """Short stable hash of the settings that decide a run's trajectory."""
    text = json.dumps(_plain(values), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def with_current_names(fp: str, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(fingerprint, values) of a run recorded under older names, as the same run records them now: the
    parameter names before zen's own module names (`zencli.model.names`) and the settings keys renamed since
    (`TrainSettings.RENAMED`: `precision` is `dtype`) under today's names, and the hash taken again. A run
    recorded since comes back as it is."""
    if not isinstance(values, dict):
        return fp, values
    keys = {old: new for old, new in TrainSettings.RENAMED.items() if old in values and new not in values}
    params = values.get("parameters")
    zen_params = zen_state(params) if isinstance(params, dict) else None
    if not keys and (zen_params is None or list(zen_params) == list(params)):
        return fp, values
    values = {keys.get(k, k): v for k, v in values.items()}
    if zen_params is not None:
        values["parameters"] = zen_params
    return fingerprint(values), values


def fingerprint_diff(saved: dict[str, Any], current: dict[str, Any], limit: int = 4) -> str:
    """`lr 0.001 → 0.002, seed 1 → 2` for the keys whose values differ."""
    saved, current = _plain(saved), _plain(current)
    diffs = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key, "(absent)"), current.get(key, "(absent)")
        if a != b:
            if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
                diffs.append(f"{key} differs")
            else:
                diffs.append(f"{key} {a} → {b}")
    more = f" and {len(diffs) - limit} more" if len(diffs) > limit else ""
    return ", ".join(diffs[:limit]) + more


# --- the checkpoints folder of a run -----------------------------------------------------------------

class CheckpointDir:
    """The `checkpoints/` folder of a run: numbered training checkpoints plus `best.pt`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.damaged: list[Path] = []  # unreadable checkpoints newest_readable passed over

    def set_damaged_aside(self) -> None:
        """Rename the checkpoints `newest_readable` could not read to NAME.damaged: kept for a look, no
        longer the newest ones (nor counted by keep_last)."""
        for path in self.damaged:
            if path.is_file():
                path.replace(path.with_name(path.name + DAMAGED_SUFFIX))
        self.damaged = []

    @property
    def best_path(self) -> Path:
        return self.path / "best.pt"

    def step_path(self, step: int) -> Path:
        return self.path / f"step-{step:08d}.pt"

    def steps(self) -> list[tuple[int, Path]]:
        """(step, file) of every complete training checkpoint, oldest first."""
        if not self.path.is_dir():
            return []
        found = []
        for p in self.path.iterdir():
            m = _STEP_RE.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), p))
        return sorted(found)

    def latest(self) -> Path | None:
        steps = self.steps()
        return steps[-1][1] if steps else None

    def newest_readable(self, note: Callable[[str], None]) -> dict | None:
        """The newest training checkpoint that loads (None: there is none). One that does not (truncated by
        a full disk or a failing copy, damaged) is named through `note` and the next older one is tried;
        when none loads, the newest one's error is raised."""
        steps = self.steps()
        first_error: ZenError | None = None
        self.damaged = []
        for i, (_, path) in enumerate(reversed(steps)):
            try:
                return load_checkpoint(path)
            except ZenError as e:
                first_error = first_error or e
                self.damaged.append(path)
                if i + 1 < len(steps):
                    note(f"note: {e}; resuming from the next older checkpoint, {steps[-2 - i][1].name} "
                         f"(the damaged file is kept as {path.name}{DAMAGED_SUFFIX})")
        if first_error is not None:
            raise first_error
        return None

    def remove_stale_temp_files(self) -> list[Path]:
        """Delete temp files of writers that died mid-write (only names this module creates)."""
        removed = []
        if self.path.is_dir():
            for p in self.path.iterdir():
                if _TMP_RE.match(p.name) and p.is_file():
                    p.unlink(missing_ok=True)
                    removed.append(p)
        return removed

    def save(self, state: dict, step: int, keep_last: int) -> Path:
        """Write the checkpoint of `step` atomically, then delete all but the newest `keep_last`."""
        path = self.step_path(step)
        atomic_save(state, path)
        for _, old in self.steps()[:-keep_last]:
            old.unlink(missing_ok=True)
        return path

    def save_best(self, state: dict) -> Path:
        atomic_save(state, self.best_path)
        return self.best_path

    def clear(self) -> None:
        """Delete this module's files (checkpoints, best.pt, temp files); nothing else."""
        for _, p in self.steps():
            p.unlink(missing_ok=True)
        self.best_path.unlink(missing_ok=True)
        self.remove_stale_temp_files()
