# SPDX-License-Identifier: MIT
"""PyTorch's private names, in one place.

kbthreads.torch reaches below PyTorch's public API where no public way
exists: the process-group registry it makes per rank, the methods torch
calls on a backend, FlopCounterMode's internals, autograd's per-backward
callbacks, and the process-wide caches and hook tables it keeps per rank.
Every such name is used through this module and nowhere else (a test,
tests/test_torch_compat.py, reads the package's other modules for private
torch names). Each entry says what it is for and the PyTorch versions it
was checked on. docs/torch.md lists them ("PyTorch's private names").

Two kinds:

- REQUIRED: the package does not work without them. ``check()`` runs at
  import of kbthreads.torch (this module calls it before it touches any of
  them), and a missing one is an ImportError naming it and the version it
  was checked on, instead of an AttributeError deep inside a collective.
- OPTIONAL: each has a fallback that keeps the behaviour (a fast path torch
  may lack, or a table in a module torch imports only when a program uses
  DTensor, whose import is slow: it is never imported for a check).
  A missing one is skipped where it is used, as before.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

TESTED = "2.13"  # the PyTorch versions every name below was checked on

# (module, attribute path): looked up with getattr from the module, part by part
Name = tuple[str, str]

_C10D = "torch.distributed.distributed_c10d"
_MODULE_HOOKS = "torch.nn.modules.module"
_OPTIM_HOOKS = "torch.optim.optimizer"

# nn.Module's and the optimizers' process-wide global hook tables, which
# _rank_hooks.py makes per rank (checked on 2.13). Each is a dict torch reads
# by name at every use.
GLOBAL_HOOK_TABLES: tuple[Name, ...] = (
    (_MODULE_HOOKS, "_global_forward_pre_hooks"),
    (_MODULE_HOOKS, "_global_forward_hooks"),
    (_MODULE_HOOKS, "_global_backward_pre_hooks"),
    (_MODULE_HOOKS, "_global_backward_hooks"),
    (_MODULE_HOOKS, "_global_module_registration_hooks"),
    (_MODULE_HOOKS, "_global_parameter_registration_hooks"),
    (_MODULE_HOOKS, "_global_buffer_registration_hooks"),
    (_OPTIM_HOOKS, "_global_optimizer_pre_hooks"),
    (_OPTIM_HOOKS, "_global_optimizer_post_hooks"),
)
# side tables of the forward hooks, keyed by the same hook id (checked on 2.13)
FORWARD_HOOK_EXTRAS = ("_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs")

# the attributes of distributed_c10d that _world.py replaces while spawns run
# (checked on 2.13): the process-wide group registry, and the helper every
# group is made by
WORLD_ATTR = "_world"
NEW_GROUP_HELPER_ATTR = "_new_process_group_helper"

# the methods torch calls on a backend's ProcessGroup and Work by these
# private names (all_gather_into_tensor, reduce_scatter_tensor,
# recv's source): _gathers.py, _reductions.py and _work.py define them (checked on 2.13)
BACKEND_METHODS = ("_allgather_base", "_reduce_scatter_base", "_source_rank")

REQUIRED: tuple[Name, ...] = (
    (_C10D, "_World"),
    (_C10D, WORLD_ATTR),
    (_C10D, NEW_GROUP_HELPER_ATTR),
    ("torch.distributed", "Backend._plugins"),
    ("torch", "_C._distributed_c10d._set_thread_isolation_mode"),
    ("torch", "_C._distributed_c10d._unregister_all_process_groups"),
    ("torch.distributed", "ProcessGroup._allgather_base"),
    ("torch.distributed", "ProcessGroup._reduce_scatter_base"),
    ("torch.distributed", "Work._source_rank"),
    ("torch.distributed", "ReduceOp.op"),
    ("torch.distributed", "ReduceOp.__getstate__"),
    ("torch.utils.flop_counter", "_FlopCounterMode"),
    ("torch.utils.flop_counter", "shape_wrapper"),
    ("torch.utils.flop_counter", "FlopCounterMode._count_flops"),
    ("torch", "_ops.OpOverload"),
    ("torch", "_C.DispatchKey.CompositeImplicitAutograd"),
    ("torch", "_C._current_graph_task_id"),
    ("torch", "_C._distributed_c10d._resolve_process_group"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
    ("torch.utils._python_dispatch", "_get_current_dispatch_mode_stack"),
    ("torch", "autograd.Variable._execution_engine.queue_callback"),
    *GLOBAL_HOOK_TABLES,
    *((_MODULE_HOOKS, extra) for extra in FORWARD_HOOK_EXTRAS),
)

# (module, function, names its code must store or read): attributes set on
# an instance, which only the code that sets them shows without making one
# (checked on 2.13)
REQUIRED_IN_CODE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("torch.utils.flop_counter", "FlopCounterMode.__enter__", ("mod_tracker", "mode", "flop_counts")),
    ("torch", "_ops.OpOverload.__init__", ("_overloadpacket",)),
    ("torch.distributed.device_mesh", "DeviceMesh.__init__", ("_thread_id",)),
    ("torch.distributed.device_mesh", "DeviceMesh.__hash__", ("_hash",)),
)

# DTensor's module that makes DTensor and its op dispatcher, and the
# dispatcher's table of custom op handlers (checked on 2.13; optional: the
# module is imported only by programs that use DTensor)
DTENSOR_API_MODULE = "torch.distributed.tensor._api"
OP_HANDLERS_ATTR = "_custom_op_handlers"

# process-wide caches keyed by objects that hold a DeviceMesh, emptied when
# the last spawn ends (_rank_caches.py; checked on 2.13; optional, in modules
# imported only with DTensor): each has cache_clear() or is a dict
DTENSOR_PROCESS_CACHES: tuple[Name, ...] = (
    ("torch.distributed.tensor._redistribute", "_gen_transform_infos"),
    ("torch.distributed.tensor._redistribute", "_planner_cache"),
    ("torch.distributed.tensor._sharding_prop", "ShardingPropagator._propagate_tensor_meta_cached"),
    ("torch.distributed.tensor._collective_utils", "MeshTopoInfo.build_from_mesh"),
)

# DTensor's sharding propagation runs inside this context manager, which
# threaded programs may replace (_dtensor_ops.py; checked on 2.13; optional,
# in a module imported only with DTensor)
SHARDING_PROP_MODULE = "torch.distributed.tensor._sharding_prop"
PROPAGATION_LOCK = "ShardingPropagator._fake_mode_lock"

# PyTorch's own threaded test backend, which bench/torch/torch_bench.py measures
# against (checked on 2.13; optional: only the bench imports it)
THREADED_TEST_GROUP_MODULE = "torch.testing._internal.distributed.multi_threaded_pg"

# A FakeTensorMode's known values: a fake tensor's ``constant`` (the value of
# a tensor of at most one element made from Python numbers, which the mode
# computes on and answers ``.item()`` from), its ``fake_mode``, and the
# mode's converter's bookkeeping of constants (_p2p.py gives a receiver the
# sender's; checked on 2.13; optional: without them nothing travels, as with
# PyTorch's own fake process group). Public-looking names of a private module.
_FAKE_TENSOR = "torch._subclasses.fake_tensor"

OPTIONAL: tuple[Name, ...] = (
    (_FAKE_TENSOR, "FakeTensorConverter.add_constant_storage_mapping"),
    (_FAKE_TENSOR, "FakeTensorConverter.invalidate_constant_aliases"),
    (THREADED_TEST_GROUP_MODULE, "_install_threaded_pg"),
    ("torch", "_C._dynamo.eval_frame._FrameAction.SKIP"),
    ("torch", "_C._dynamo.eval_frame._FrameExecStrategy"),
    ("torch", "_C._dynamo.eval_frame.set_code_exec_strategy"),
    ("torch.utils.flop_counter", "_FlopCounterMode._should_skip_dynamo"),
    (DTENSOR_API_MODULE, "DTensor._op_dispatcher." + OP_HANDLERS_ATTR),
    *DTENSOR_PROCESS_CACHES,
    (SHARDING_PROP_MODULE, PROPAGATION_LOCK),
)


def _parts(names: Sequence[Name]) -> set[str]:
    return {p for _, path in names for p in path.split(".") if p.startswith("_") and not p.startswith("__")}


# every private name above, bare: what the test looks for in the other modules
PRIVATE_NAMES: frozenset[str] = frozenset(
    _parts(REQUIRED) | _parts(OPTIONAL) | {n for *_, ns in REQUIRED_IN_CODE for n in ns if n.startswith("_")}
)


# ---- the check ---------------------------------------------------------------------------------
def resolve(module: Any, path: str) -> Any:
    """module's attribute path, part by part (AttributeError where one is missing)."""
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def missing(
    names: Sequence[Name] = REQUIRED,
    in_code: Sequence[tuple[str, str, tuple[str, ...]]] = REQUIRED_IN_CODE,
    load: Callable[[str], Any] = importlib.import_module,
) -> list[str]:
    """The dotted names among names (and the names in_code's functions must
    use) this PyTorch lacks; load(module name) gives a module."""
    out: list[str] = []
    for module, path in names:
        try:
            resolve(load(module), path)
        except (ImportError, AttributeError):
            out.append(f"{module}.{path}")
    for module, path, used in in_code:
        try:
            code = resolve(load(module), path).__code__
        except (ImportError, AttributeError):
            out.append(f"{module}.{path}")
            continue
        out.extend(f"{module}.{path} (its {n})" for n in used if n not in code.co_names)
    return out


def check(load: Callable[[str], Any] = importlib.import_module) -> None:
    """Raise ImportError naming every REQUIRED name this PyTorch lacks."""
    lacking = missing(load=load)
    if lacking:
        version = getattr(load("torch"), "__version__", "?")
        raise ImportError(
            f"kbthreads.torch uses PyTorch internals that PyTorch {version} lacks: {', '.join(lacking)} "
            f"(checked on PyTorch {TESTED}; install that version)"
        )


check()  # once, at import, before any of them is touched below

import torch.distributed.distributed_c10d as _c10d  # noqa: E402  # (after the check)
import torch.utils._python_dispatch as _python_dispatch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import _FlopCounterMode, shape_wrapper  # noqa: E402

# ---- torch.distributed's group registry (_world.py; checked on 2.13) --------------------------
World = _c10d._World  # the registry's class: _world.py's per-rank world subclasses it


def backend_registered(name: str) -> bool:
    """Whether a backend name is registered with torch.distributed."""
    return name.upper() in dist.Backend._plugins


def set_thread_isolation_mode(on: bool) -> None:
    """C++'s registry of groups by name: per thread (on) or process wide."""
    torch._C._distributed_c10d._set_thread_isolation_mode(on)  # type: ignore[attr-defined]  # not in torch's stub


def unregister_all_process_groups() -> None:
    """Empty the calling thread's part of C++'s registry of groups by name."""
    torch._C._distributed_c10d._unregister_all_process_groups()


def init_process_group_base(pg: dist.ProcessGroup, rank: int, size: int) -> None:
    """ProcessGroup's (rank, size) constructor of the C++ binding, which
    torch's stub leaves out (checked on 2.13)."""
    dist.ProcessGroup.__init__(pg, rank, size)  # type: ignore[call-arg]


# ---- reduce ops (_ops.py; checked on 2.13) -----------------------------------------------------
def reduce_op_kind(op: dist.ReduceOp) -> Any:
    """A ReduceOp's RedOpType: the binding's ``op``, not in torch's stub."""
    return op.op  # type: ignore[attr-defined]


def premul_factor(op: dist.ReduceOp) -> Any:
    """PREMUL_SUM's factor: the second item of the op's pickled state."""
    return op.__getstate__()[1]  # type: ignore[attr-defined]


# ---- FLOP counting (_flops.py; checked on 2.13) -------------------------------------------------
FlopCounterDispatchMode = _FlopCounterMode  # the dispatch mode a FlopCounterMode enters
OpOverload = torch._ops.OpOverload
COMPOSITE_IMPLICIT_AUTOGRAD = torch._C.DispatchKey.CompositeImplicitAutograd
# the code of the wrapper torch's FLOP registry puts around a formula of shapes
SHAPE_WRAPPER_CODE = shape_wrapper(lambda: None).__code__  # type: ignore[no-untyped-call]  # torch's is untyped


def overload_packet(func: Any) -> Any:
    """An OpOverload's packet: the key of torch's FLOP registry."""
    return func._overloadpacket


def count_flops(counter: Any, packet: Any, out: Any, args: Any, kwargs: Any) -> None:
    """FlopCounterMode's own counting of one op (its tree of shapes)."""
    counter._count_flops(packet, out, args, kwargs)


def start_flop_counter(counter: Any, tracker: Any, mode: Callable[[Any], Any]) -> None:
    """What FlopCounterMode.__enter__ does, with tracker in place of its
    module tracker and mode(counter) in place of its dispatch mode."""
    counter.mod_tracker = tracker
    counter.flop_counts.clear()
    counter.mode = m = mode(counter)
    m.__enter__()


def stop_flop_counter(counter: Any) -> None:
    counter.mode.__exit__(None, None, None)


def run_without_dynamo(code: Any) -> bool:
    """Mark code (and everything it calls) to run without torch.compile, as
    torch._dynamo.disable(recursive=True) does per call. False where this
    torch has no such switch (OPTIONAL: the caller keeps torch's wrapper)."""
    try:
        from torch._C._dynamo import eval_frame

        skip = eval_frame._FrameAction.SKIP
        eval_frame.set_code_exec_strategy(code, eval_frame._FrameExecStrategy(skip, skip))
    except (ImportError, AttributeError, TypeError, RuntimeError):
        return False
    return True


# ---- dispatch modes (_memory.py; checked on 2.13) ---------------------------------------------
DispatchMode = _TorchDispatchMode  # the base of a mode on a thread's dispatch mode stack


# ---- autograd (_simtime.py; checked on 2.13) ---------------------------------------------------
def current_graph_task_id() -> int:
    """The running backward pass's id, -1 outside one."""
    return int(torch._C._current_graph_task_id())


def queue_backward_callback(fn: Callable[[], None]) -> None:
    """Run fn when the running backward pass ends."""
    torch.autograd.Variable._execution_engine.queue_callback(fn)


# ---- DeviceMesh (_rank_caches.py; checked on 2.13) ---------------------------------------------
def mesh_unkeyed(mesh: Any) -> bool:
    """Whether torch left the mesh without a creating thread's key."""
    return getattr(mesh, "_thread_id", None) is None


def key_mesh(mesh: Any, key: int) -> None:
    """Make the mesh differ from every other rank's, as PyTorch's threaded
    backend does with the creating thread's id; its hash is recomputed."""
    mesh._thread_id = key
    mesh._hash = None


# ---- DTensor's op dispatcher (_rank_hooks.py; checked on 2.13; optional) ----------------------
def dtensor_dispatcher(api: ModuleType | None) -> Any:
    """DTensor's op dispatcher, from its module (None without either)."""
    return getattr(getattr(api, "DTensor", None), "_op_dispatcher", None)


# ---- DTensor's sharding propagation (_dtensor_ops.py; checked on 2.13; optional) --------------
def propagation_lock() -> Any:
    """The context manager DTensor's sharding propagation runs in (None
    before DTensor is imported, or where this PyTorch has none)."""
    propagator = getattr(sys.modules.get(SHARDING_PROP_MODULE), "ShardingPropagator", None)
    return getattr(propagator, "_fake_mode_lock", None)


def set_propagation_lock(lock: Any) -> None:
    sys.modules[SHARDING_PROP_MODULE].ShardingPropagator._fake_mode_lock = lock


def dispatch_mode_stack() -> list[Any]:
    """The calling thread's dispatch modes, bottom first."""
    return _python_dispatch._get_current_dispatch_mode_stack()


# ---- PyTorch's threaded test backend (bench/torch/torch_bench.py; checked on 2.13; optional) ----------
def install_threaded_test_group() -> Callable[[BaseException], None]:
    """Register PyTorch's own threaded test backend ("threaded") and keep
    C++'s registry of groups per thread, as PyTorch's tests do; returns the
    handler a failing rank thread calls, which releases the others."""
    mtpg = importlib.import_module(THREADED_TEST_GROUP_MODULE)
    mtpg._install_threaded_pg()
    set_thread_isolation_mode(True)
    handler: Callable[[BaseException], None] = mtpg.ProcessLocalGroup.exception_handle
    return handler


# ---- functional collectives (_funcol.py; checked on 2.13) -------------------------------------
FUNCTIONAL_COLLECTIVES_MODULE = "torch.distributed._functional_collectives"


def load_functional_collectives() -> None:
    """Import the module that registers PyTorch's functional collectives'
    shape functions (meta kernels), which DTensor imports too."""
    importlib.import_module(FUNCTIONAL_COLLECTIVES_MODULE)


def resolve_process_group(name: str) -> dist.ProcessGroup:
    """The calling thread's process group registered under name (C++'s
    registry, per rank thread here), as a functional collective finds it."""
    pg: dist.ProcessGroup = torch._C._distributed_c10d._resolve_process_group(name)  # type: ignore[arg-type]
    return pg


def fake_constant(t: torch.Tensor) -> torch.Tensor | None:
    """The value t's FakeTensorMode knows for it (None for none, or for a
    tensor that is not fake)."""
    value: torch.Tensor | None = getattr(t, "constant", None)
    return value


def set_fake_constant(t: torch.Tensor, value: torch.Tensor | None) -> None:
    """t (and its views) forget their known value; t takes value unless it
    is None. Nothing where t is not fake or this torch lacks the names."""
    converter = getattr(getattr(t, "fake_mode", None), "fake_tensor_converter", None)
    if converter is None or not hasattr(converter, "invalidate_constant_aliases"):
        return
    old = fake_constant(t)
    if old is not None:
        converter.invalidate_constant_aliases(old)
        t.constant = None  # type: ignore[attr-defined]
    if value is not None:
        t.constant = value  # type: ignore[attr-defined]
        converter.add_constant_storage_mapping(t)
