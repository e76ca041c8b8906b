"""The shape of the package, read from the source: every import (those inside functions too) points down the
layers, no import circle, and the command modules only parse, call the library and print.

Imports are read from the ASTs, not from sys.modules, so an import that runs only on some path (inside a
function, under a condition) counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "zencli"

# The top-level parts of zencli, lowest first: a module may import from its own part and from parts before it.
LAYERS = [
    "zencli",  # zencli/__init__.py: the version
    "errors", "cpus", "signals", "atomic_write", "progress", "plain_data", "formatting", "diffs",
    "text", "lexicon", "data", "model", "train", "metrics", "datasets", "config",
    "tasks", "jobs", "bench", "cli", "__main__",
]


def module_names() -> dict[str, Path]:
    """{dotted module name: file} of every module of the package."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported zencli module, line) of each import in `path`, wherever it sits. `from a import b` names
    module a.b when b is a module, else a; a name that is not a module names its closest module parent."""

    def closest(dotted: str) -> str:
        while dotted not in modules and "." in dotted:
            dotted = dotted.rpartition(".")[0]
        return dotted

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "zencli":
                    yield closest(alias.name), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] != "zencli":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in modules else closest(base)), node.lineno
        elif isinstance(node, ast.Attribute) and node.attr == "import_module":
            dynamic = True
    if dynamic:  # importlib.import_module: a string naming a module of the package is an import
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules:
                yield node.value, node.lineno


def graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: {target for target, _ in imports(name, path, modules) if target != name}
            for name, path in modules.items()}


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path):
    modules = {"zencli.a": tmp_path / "a.py", "zencli.a.b": tmp_path / "b.py", "zencli.c": tmp_path / "c.py"}
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from zencli.a import b, thing\n    import zencli.c.sub\n"
                   "from . import c\n", encoding="utf-8")
    assert sorted(t for t, _ in imports("zencli.x", src, modules)) == ["zencli.a", "zencli.a.b", "zencli.c",
                                                                       "zencli.c"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert cycles(graph()) == []


def test_every_import_points_down_the_layers():
    edges = graph()
    assert {part(m) for m in edges} == set(LAYERS), "a new top-level part: place it in LAYERS"
    rank = {p: i for i, p in enumerate(LAYERS)}
    upward = sorted(f"{m} → {t}" for m, targets in edges.items() for t in targets if rank[part(t)] > rank[part(m)])
    assert upward == []


# cli/*.py parse, call the library and print: torch, writing files by hand and starting processes belong in
# the library.


def cli_offences(path: Path) -> set[str]:
    """The rules `path` breaks, read from its AST (imports inside functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            top = name.split(".")[0]
            if top == "torch":
                found.add("imports torch")
            elif top == "tempfile":
                found.add("writes a file by hand (tempfile)")
            elif top == "subprocess" or name == "zencli.train.distributed":
                found.add("starts processes (" + ("subprocess" if top == "subprocess" else name) + ")")
        if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            found.add(f"writes a file by hand (os.{node.attr})")
    return found


def test_the_cli_rule_catches_each_form(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text("import torch.nn\nimport os\ndef f():\n    from torch import cuda\n    import tempfile\n"
                   "    from zencli.train import distributed\n    os.replace('a', 'b')\n", encoding="utf-8")
    assert cli_offences(src) == {"imports torch", "writes a file by hand (tempfile)",
                                 "starts processes (zencli.train.distributed)", "writes a file by hand (os.replace)"}


def test_commands_only_parse_call_and_print():
    found = {(p.name, offence) for p in sorted((PACKAGE / "cli").glob("*.py")) for offence in cli_offences(p)}
    assert sorted(found) == []
