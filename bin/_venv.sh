# Sourced by bin/zen and bin/test: creates .venv on first use and keeps it in step with
# pyproject.toml + constraints.txt. The constraints pin torch to the CPU wheel that pip takes
# from local disk here, so set-up never pulls a multi-GB CUDA build on a CPU-only machine.
ZEN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ZEN_VENV="${ZEN_VENV:-$ZEN_ROOT/.venv}"
_zen_stamp="$ZEN_VENV/.zen-installed"
_zen_want="$(cat "$ZEN_ROOT/pyproject.toml" "$ZEN_ROOT/constraints.txt" | sha256sum | cut -c1-16)"
_zen_ready() { [ -x "$ZEN_VENV/bin/python" ] && [ "$(cat "$_zen_stamp" 2>/dev/null)" = "$_zen_want" ]; }
if ! _zen_ready; then
  # One set-up at a time: commands started together (bin/accuracy-runs' two lanes) would otherwise both
  # install into the same venv and one would fail; the second waits, then finds the venv ready.
  exec 9>"$ZEN_VENV.lock"
  command -v flock >/dev/null 2>&1 && flock 9
  if ! _zen_ready; then
    echo "zen: setting up $ZEN_VENV (first use or dependencies changed) ..." >&2
    PY="${PYTHON:-python3}"
    [ -x "$ZEN_VENV/bin/python" ] || "$PY" -m venv "$ZEN_VENV" || exit 1
    "$ZEN_VENV/bin/python" -m pip install -q --upgrade pip >&2 2>/dev/null || true
    "$ZEN_VENV/bin/python" -m pip install -q -c "$ZEN_ROOT/constraints.txt" -e "$ZEN_ROOT[test]" >&2 || {
      echo "zen: dependency installation failed" >&2; exit 1; }
    echo "$_zen_want" > "$_zen_stamp"
  fi
  exec 9>&-
fi
