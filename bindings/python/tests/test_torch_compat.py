# SPDX-License-Identifier: MIT
"""kbthreads.torch's private PyTorch names stay in _compat.py, and a
PyTorch without one is an ImportError that names it."""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kbthreads.torch import _compat  # noqa: E402

PACKAGE = Path(_compat.__file__).parent

# (module file, name): names a module defines because torch calls them by
# that name (a backend's methods, a dispatch mode's class hook); _compat
# checks that torch still has them
ALLOWED = {
    ("_gathers.py", "_allgather_base"),
    ("_reductions.py", "_reduce_scatter_base"),
    ("_work.py", "_source_rank"),
    ("_flops.py", "_should_skip_dynamo"),
}

_TORCH_PRIVATE_TEXT = re.compile(r"\btorch(\.\w+)*\._[A-Za-z]")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_torch_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of every private PyTorch name the source uses outside
    comments and docstrings."""
    tree = ast.parse(source)
    torch_names: set[str] = set()  # local names bound to torch modules or objects
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    torch_names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            for a in node.names:
                torch_names.add(a.asname or a.name)
    docs = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _TORCH_PRIVATE_TEXT.search(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            module = node.module or ""
            if any(_private(p) for p in module.split(".")):
                found.append((node.lineno, module))
            found += [(node.lineno, a.name) for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute):
            root: ast.expr = node
            while isinstance(root, ast.Attribute):
                root = root.value
            in_torch = isinstance(root, ast.Name) and root.id in torch_names
            if (in_torch and _private(node.attr)) or node.attr in _compat.PRIVATE_NAMES:
                found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value in _compat.PRIVATE_NAMES or _TORCH_PRIVATE_TEXT.search(node.value):
                found.append((node.lineno, node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _compat.PRIVATE_NAMES:
            found.append((node.lineno, node.name))
    return sorted(set(found))


def test_the_detector_finds_private_names() -> None:
    src = (
        "import torch\nimport torch.distributed.distributed_c10d as c10d\n"
        "from torch.utils.flop_counter import _FlopCounterMode\n"
        "x = torch._C._current_graph_task_id()\ny = c10d._world\nz = f._overloadpacket\n"
        "w = getattr(m, '_global_forward_hooks')\nv = 'torch.distributed.tensor._api'\n"
        "def f():\n    '''docstrings may name torch._C'''\n    return self._mine  # torch._C in a comment\n"
    )
    names = [n for _, n in private_torch_uses(src)]
    assert names == [
        "_FlopCounterMode",
        "_C",
        "_current_graph_task_id",
        "_world",
        "_overloadpacket",
        "_global_forward_hooks",
        "torch.distributed.tensor._api",
    ]


def test_no_private_torch_name_outside_compat() -> None:
    bad = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "_compat.py":
            continue
        for line, name in private_torch_uses(path.read_text()):
            if (path.name, name) not in ALLOWED:
                bad.append(f"{path.name}:{line}: {name}")
    assert not bad, "private PyTorch names outside kbthreads/torch/_compat.py:\n" + "\n".join(bad)


def test_the_torch_bench_uses_private_names_through_compat() -> None:
    bench = Path(__file__).resolve().parents[3] / "bench" / "torch" / "torch_bench.py"
    if not bench.exists():
        pytest.skip("a copy of the tests without the project's bench")
    bad = [f"{line}: {name}" for line, name in private_torch_uses(bench.read_text())]
    assert not bad, "private PyTorch names in bench/torch/torch_bench.py:\n" + "\n".join(bad)


def test_every_required_name_is_in_this_torch() -> None:
    assert _compat.missing() == []


def _fake_torch(drop: str) -> dict[str, object]:
    """The modules _compat checks, real, except that the one holding drop
    (a "module:path" of REQUIRED) lacks its last part."""
    import importlib

    module, path = drop.split(":")
    mods: dict[str, object] = {}
    for name in {m for m, _ in _compat.REQUIRED} | {m for m, *_ in _compat.REQUIRED_IN_CODE}:
        mods[name] = importlib.import_module(name)
    *head, last = path.split(".")
    parent = _compat.resolve(mods[module], ".".join(head)) if head else mods[module]
    fake_parent = types.SimpleNamespace(**{k: getattr(parent, k) for k in dir(parent) if k != last})
    if head:
        # the fake module: the real one with head's last object replaced by fake_parent
        *up, leaf = head
        outer = _compat.resolve(mods[module], ".".join(up)) if up else mods[module]
        fake_outer = types.SimpleNamespace(**{k: getattr(outer, k) for k in dir(outer) if not k.startswith("__")})
        setattr(fake_outer, leaf, fake_parent)
        if up:
            pytest.skip("the fake replaces one level only")
        mods[module] = fake_outer
    else:
        mods[module] = fake_parent
    return mods


@pytest.mark.parametrize(
    "drop",
    [
        "torch.distributed.distributed_c10d:_new_process_group_helper",
        "torch.distributed:Backend._plugins",
        "torch.nn.modules.module:_global_forward_hooks",
    ],
)
def test_a_missing_name_is_an_import_error_naming_it(drop: str) -> None:
    mods = _fake_torch(drop)
    with pytest.raises(ImportError) as e:
        _compat.check(load=mods.__getitem__)
    msg = str(e.value)
    assert drop.replace(":", ".") in msg
    assert f"checked on PyTorch {_compat.TESTED}" in msg
    assert _compat.TESTED == "2.13"


def test_code_names_are_checked() -> None:
    fake = types.SimpleNamespace(Thing=type("Thing", (), {"__init__": lambda self: None}))
    lacking = _compat.missing(names=(), in_code=(("m", "Thing.__init__", ("_thread_id",)),), load=lambda _: fake)
    assert lacking == ["m.Thing.__init__ (its _thread_id)"]
