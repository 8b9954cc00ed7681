"""Guards read from the candidate's source, before any of it runs.

Each guard is a small function returning violations; each carries a one-line rationale.
Text can be fooled, so the runtime guards (runtime_guards.py) also check what actually ran.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

# torch.* calls a forward may make: allocation, views/reshapes, layout and dtype plumbing,
# and queries. Everything else computes, and computing is the Triton kernels' job.
ALLOWED_TORCH_CALLS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "arange",
        "tensor",
        "as_strided",
        "broadcast_shapes",
        "Size",
        "device",
        "dtype",
        "finfo",
        "iinfo",
        "is_tensor",
        "is_floating_point",
        "get_device",
        "reshape",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "t",
        "narrow",
        "select",
        "chunk",
        "split",
        "unbind",
        "movedim",
        "view_as_real",
        "view_as_complex",
        "promote_types",
        "result_type",
        "set_grad_enabled",
        "no_grad",
        "inference_mode",
    }
)


# Installed Triton kernel libraries a candidate may import (and call into from a kernel).
KERNEL_LIBRARIES = ("liger_kernel",)

# Top-level modules a candidate may import: the two it is written in, plus pure-Python stdlib
# helpers that reach neither the process, the interpreter's internals nor tensor memory.
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "triton",
        "math",
        "typing",
        "typing_extensions",
        "functools",
        "itertools",
        "operator",
        "collections",
        "dataclasses",
        "enum",
        "abc",
        "numbers",
        "__future__",
        "warnings",
    }
)

# torch modules that register ops, compile other code, load pickles or start processes
# (torch._* and every other private module are refused too).
DENIED_TORCH_MODULES = (
    "torch.library",
    "torch.multiprocessing",
    "torch.utils.cpp_extension",
    "torch.jit",
    "torch.compiler",
    "torch.hub",
    "torch.package",
    "torch.serialization",
    "torch.utils.dlpack",
    "torch.cuda.jiterator",
)

# `import os` is allowed for exactly one thing: os.environ.get(<one of these>, <constant>).
# src/klineage/kernels/matmul/expert.py and tests/interp/unseen/tma_descriptors_softmax.py need
# it to keep the TMA path off under the CPU interpreter.
ALLOWED_ENV_READS = frozenset({"TRITON_INTERPRET"})

# Builtins that hand out code execution, frames, files or dynamic attribute access.
BANNED_BUILTINS = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "open",
        "input",
        "memoryview",
        "exit",
        "quit",
    }
)

# Attribute or name uses that escape to interpreter internals (class graphs, frames, globals,
# builtins, pickling hooks, tensor-subclass and mode hooks).
DUNDER_ESCAPES = frozenset(
    {
        "__class__",
        "__subclasses__",
        "__bases__",
        "__base__",
        "__mro__",
        "__globals__",
        "__builtins__",
        "__dict__",
        "__code__",
        "__closure__",
        "__getattribute__",
        "__getattr__",
        "__setattr__",
        "__delattr__",
        "__reduce__",
        "__reduce_ex__",
        "__torch_dispatch__",
        "__torch_function__",
        "__self__",
        "__func__",
        "__wrapped__",
        "__defaults__",
        "__kwdefaults__",
        "__loader__",
        "__spec__",
        "__traceback__",
        "__del__",
        "f_back",
        "f_globals",
        "f_locals",
        "f_code",
        "f_builtins",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "tb_frame",
        "tb_next",
    }
)

# Harmless dunders that may be read on torch/triton objects (nn.Module.__init__(self), versions).
ALLOWED_TORCH_DUNDERS = frozenset(
    {"__init__", "__version__", "__name__", "__qualname__", "__doc__"}
)

# Host-side reads of tensor memory that bypass the dispatch monitor (outside @triton.jit only).
# `data_ptr` is deliberately NOT here: src/klineage/kernels/matmul/expert.py (_use_tma) reads
# t.data_ptr() % 16 for the TMA alignment check. An address is an int, not the tensor's data,
# and nothing left importable (ctypes is refused) can dereference it.
HOST_MEMORY_READS = frozenset(
    {
        "numpy",
        "tolist",
        "__array__",
        "__array_interface__",
        "__cuda_array_interface__",
        "__dlpack__",
        "to_dlpack",
        "untyped_storage",
        "typed_storage",
        "storage",
    }
)

# torch APIs that are not the candidate's Triton kernel (another compiler, registered ops,
# pickles, processes) or that change state the reference and the gate share (RNG, defaults).
BANNED_TORCH_APIS = frozenset(
    {
        "torch.library",
        "torch.ops",
        "torch.classes",
        "torch.compile",
        "torch.compiler",
        "torch.jit",
        "torch.multiprocessing",
        "torch.utils.cpp_extension",
        "torch.utils.dlpack",
        "torch.cuda.jiterator",
        "torch.cuda.cudart",
        "torch.hub",
        "torch.package",
        "torch.load",
        "torch.save",
        "torch.serialization",
        "torch.random",
        "torch.seed",
        "torch.manual_seed",
        "torch.set_rng_state",
        "torch.get_rng_state",
        "torch.cuda.seed",
        "torch.cuda.seed_all",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.cuda.set_rng_state",
        "torch.cuda.set_rng_state_all",
        "torch.cuda.get_rng_state",
        "torch.cuda.get_rng_state_all",
        "torch.set_default_dtype",
        "torch.set_default_device",
        "torch.set_default_tensor_type",
        "torch.set_float32_matmul_precision",
        "torch.use_deterministic_algorithms",
        "torch.set_flush_denormal",
    }
)

# Attribute names that smuggle a refused module in through an allowed one (torch.os, torch.sys,
# typing.sys and warnings.sys are the real modules: they import them at top level).
SMUGGLED_MODULES = frozenset(
    {
        "os",
        "sys",
        "ctypes",
        "builtins",
        "importlib",
        "inspect",
        "threading",
        "subprocess",
        "gc",
        "platform",
        "pickle",
        "marshal",
        "types",
        "socket",
        "signal",
        "traceback",
        "weakref",
        "atexit",
        "copyreg",
        "runpy",
        "mmap",
        "shutil",
        "tempfile",
        "pathlib",
        "linecache",
        "contextlib",
        "asyncio",
        "concurrent",
        "np",
    }
)

# Builtins a @triton.jit body may call (the Triton frontend understands these).
JIT_BUILTINS = frozenset(
    {
        "range",
        "min",
        "max",
        "len",
        "int",
        "float",
        "bool",
        "isinstance",
        "print",
        "tuple",
        "list",
        "zip",
        "enumerate",
        "abs",
    }
)

# math constants a @triton.jit body may read (plain floats; math *functions* run on the host).
MATH_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})

# What `from torch... import X` / `from triton... import X` binds to a submodule rather than an
# object (a module may be used only through its attributes, so an alias cannot hide its reach).
FROM_IMPORTED_MODULES = frozenset(
    {
        "torch.nn",
        "torch.nn.functional",
        "torch.cuda",
        "torch.utils",
        "torch.autograd",
        "torch.backends",
        "torch.overrides",
        "torch.distributed",
        "torch.special",
        "torch.linalg",
        "torch.fft",
        "triton.language",
        "triton.runtime",
        "triton.compiler",
        "triton.testing",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
        "triton.language.math",
        "triton.language.core",
    }
)


@dataclass(frozen=True)
class Violation:
    guard: str
    line: int | None
    message: str

    def render(self, path: str) -> str:
        where = f"{path}:{self.line}" if self.line else path
        return f"{where}: [{self.guard}] {self.message}"


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = _dotted(target) or ""
    return name in ("triton.jit", "jit") or name.endswith(".jit")


def _find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _chain_root(node: ast.AST) -> ast.AST:
    """The innermost value of a.b(c)[d].e: walks attributes, calls and subscripts."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _value_root(node: ast.AST) -> ast.AST:
    """The innermost value of a.b[c].d, stopping at a call (whose result is a computed value)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".")


def _is_triton(path: str | None) -> bool:
    return path is not None and _under(path, "triton")


def _is_torch(path: str | None) -> bool:
    return path is not None and _under(path, "torch")


def _is_kernel_library(path: str | None) -> bool:
    return path is not None and path.split(".")[0] in KERNEL_LIBRARIES


def _bound_by_import(alias: ast.alias, from_module: str | None) -> tuple[str, str]:
    """(local name, dotted path it stands for) for one imported name."""
    if from_module is not None:
        return alias.asname or alias.name, f"{from_module}.{alias.name}"
    if alias.asname:
        return alias.asname, alias.name
    head = alias.name.split(".")[0]
    return head, head


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a scope's body that belong to it, not to a nested function, class or comprehension
    (a nested scope node itself is yielded, since its name is bound here)."""
    body = scope.body if isinstance(scope.body, list) else [scope.body]  # type: ignore[attr-defined]
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*_FUNCTION_SCOPES, ast.ClassDef, *_COMPREHENSIONS)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _function_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names local to a function: its parameters and what its own body binds (minus globals)."""
    a = fn.args
    names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}
    declared_global: set[str] = set()
    for node in _own_nodes(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
    return names - declared_global


def _unbound_loads(
    node: ast.AST, watched: frozenset[str], bound: frozenset[str] = frozenset()
) -> Iterator[ast.Name]:
    """Loads of a watched name that no enclosing function binds, so they reach the builtin.
    Module- and class-level bindings do not count: a conditional one falls back to builtins."""
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id in watched and node.id not in bound:
            yield node
        return
    if isinstance(node, _FUNCTION_SCOPES):
        a = node.args
        outer: list[ast.AST] = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            outer += [*node.decorator_list, *([node.returns] if node.returns else [])]
            outer += [
                x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation
            ]
        for e in outer:
            yield from _unbound_loads(e, watched, bound)
        inner = bound | _function_locals(node)
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            yield from _unbound_loads(stmt, watched, inner)
        return
    if isinstance(node, _COMPREHENSIONS):
        targets = {
            n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
        }
        bound = bound | targets
    for child in ast.iter_child_nodes(node):
        yield from _unbound_loads(child, watched, bound)


@dataclass
class _Module:
    """What the guards need to know about a candidate's names, computed once per guard call."""

    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted import path
    module_names: set[str] = field(default_factory=set)  # names bound to a module by import
    ambiguous: set[str] = field(default_factory=set)  # imported names bound to something else too
    jit_defs: list[ast.FunctionDef] = field(default_factory=list)
    plain_defs: set[str] = field(default_factory=set)  # module-level non-jit functions, classes
    globals: set[str] = field(default_factory=set)  # every name bound at module level
    const_globals: set[str] = field(default_factory=set)  # ... bound only to constants

    @property
    def jit_names(self) -> set[str]:
        return {fn.name for fn in self.jit_defs}

    def resolve(self, node: ast.AST, *, strict: bool = False) -> str | None:
        """The dotted path an imported name or attribute chain stands for (None: not imported).
        strict: None also for a name that is rebound elsewhere (tl = math would fool a kernel
        check; the bans still see the imported path)."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head not in self.aliases or (strict and head in self.ambiguous):
            return None
        return f"{self.aliases[head]}.{rest}" if rest else self.aliases[head]

    def is_jit_decorator(self, decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        path = self.resolve(target, strict=True)
        return _is_triton(path) and (path or "").rsplit(".", 1)[-1] == "jit"

    def const_expr(self, e: ast.AST) -> bool:
        """True for values a kernel may read as a global: literals, tl.constexpr(...), triton
        attributes and math on those."""
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return e.id in self.const_globals or _is_triton(self.resolve(e, strict=True))
        if isinstance(e, ast.Attribute):
            path = self.resolve(e, strict=True)
            return _is_triton(path) or (path or "").split(".")[0] == "math"
        if isinstance(e, ast.Call):
            path = self.resolve(e.func, strict=True)
            pure = _is_triton(path) or (path or "").split(".")[0] == "math"
            return pure and all(
                self.const_expr(x) for x in (*e.args, *(k.value for k in e.keywords))
            )
        if isinstance(
            e, ast.UnaryOp | ast.BinOp | ast.BoolOp | ast.Compare | ast.IfExp | ast.Tuple
        ):
            return all(
                self.const_expr(c) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)
            )
        return False


def _kind(path: str) -> str:
    """Bindings of one name that the kernel check may treat alike."""
    if _is_triton(path):
        return "triton"
    return path.split(".")[0] if _is_kernel_library(path) else path


def _module_level_nodes(stmts: Iterable[ast.stmt]) -> Iterator[ast.AST]:
    """Nodes of module-level statements outside any function, class or comprehension body."""
    stack: list[ast.AST] = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*_FUNCTION_SCOPES, ast.ClassDef, *_COMPREHENSIONS)):
            stack.extend(ast.iter_child_nodes(node))


def _analyse(tree: ast.Module) -> _Module:
    m = _Module(tree)
    bindings: dict[str, set[str]] = {}  # name -> the import paths and "=value" bound to it
    declared_global: set[str] = set()
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            m.parents[child] = node
        if isinstance(node, ast.Import):
            for a in node.names:
                name, path = _bound_by_import(a, None)
                bindings.setdefault(name, set()).add(path)
                m.module_names.add(name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                if a.name != "*":
                    name, path = _bound_by_import(a, node.module)
                    bindings.setdefault(name, set()).add(path)
                    if path in FROM_IMPORTED_MODULES:
                        m.module_names.add(name)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
    m.aliases = {name: sorted(paths)[0] for name, paths in bindings.items()}
    # Module-level bindings: `tl = triton.language` is one more alias; anything else is a value.
    assigned: dict[str, list[ast.expr | None]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        assigned.setdefault(n.id, []).append(
                            stmt.value if t is n and len(targets) == 1 else None
                        )
            rest: list[ast.AST] = [stmt.value]
        else:
            rest = [stmt]
        for node in _module_level_nodes(rest):  # type: ignore[arg-type]
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                assigned.setdefault(node.id, []).append(None)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                assigned.setdefault(node.name, []).append(None)
    for name in declared_global:
        assigned.setdefault(name, []).append(None)
    m.globals = set(assigned)
    for name, values in assigned.items():
        for value in values:
            to = m.resolve(value) if isinstance(value, ast.Attribute | ast.Name) else None
            if to is not None and (_is_triton(to) or _is_kernel_library(to)):
                bindings.setdefault(name, set()).add(to)
                m.aliases.setdefault(name, to)
            else:
                bindings.setdefault(name, set()).add("=value")
    m.ambiguous = {
        name
        for name, paths in bindings.items()
        if name in m.aliases and len({_kind(p) for p in paths}) > 1
    }
    while True:  # to a fixed point: D = C * 2 is a constant once C is
        consts = {
            name
            for name, values in assigned.items()
            if name not in m.aliases and all(v is not None and m.const_expr(v) for v in values)
        }
        if consts == m.const_globals:
            break
        m.const_globals = consts
    jit_by_call = {
        a.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and m.is_jit_decorator(node.func)
        for a in node.args
        if isinstance(a, ast.Name)
    }  # k = triton.jit(fn)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (
            any(m.is_jit_decorator(d) for d in node.decorator_list) or node.name in jit_by_call
        ):
            m.jit_defs.append(node)
    jit = {id(fn) for fn in m.jit_defs}
    m.plain_defs = {
        s.name
        for s in tree.body
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and id(s) not in jit
    }
    return m


def _inside_jit(m: _Module) -> set[int]:
    """ids of every node in the body of a @triton.jit function."""
    return {id(n) for fn in m.jit_defs for stmt in fn.body for n in ast.walk(stmt)}


def guard_launches_triton(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: a candidate with no @triton.jit kernel is not a Triton kernel at all."""
    if not _analyse(tree).jit_defs:
        yield Violation("launches_triton", None, "no @triton.jit kernel is defined in this file")


def _catches_only_import_errors(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    names = t.elts if isinstance(t, ast.Tuple) else [t] if t is not None else []
    return bool(names) and all(isinstance(n, ast.Name) and n.id in IMPORT_ERRORS for n in names)


def _harmless_fallback(stmt: ast.stmt) -> bool:
    """An import, a pass, or NAME = <constant> (Liger's `except ImportError: pass`)."""
    if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass):
        return True
    return (
        isinstance(stmt, ast.Assign)
        and all(isinstance(t, ast.Name) for t in stmt.targets)
        and (
            isinstance(stmt.value, ast.Constant)
            or (isinstance(stmt.value, ast.Tuple) and not stmt.value.elts)
        )
    )


def _imported_names(stmts: Iterable[ast.stmt]) -> set[str]:
    return {
        (a.asname or a.name).split(".")[0]
        for s in stmts
        if isinstance(s, ast.Import | ast.ImportFrom)
        for a in s.names
    }


def _is_import_default(handler: ast.ExceptHandler, imported: set[str]) -> bool:
    """except Exception: NAME = <constant> for every name the try imports, and nothing else.

    Liger-Kernel's rms_norm.py: `try: from torch.distributed.tensor import DTensor as _DTensor`
    / `except Exception: _DTensor = ()`. The handler only gives the imported names a constant
    default; a handler that binds nothing (`except Exception: pass`) swallows, and stays refused.
    """
    bound: set[str] = set()
    for s in handler.body:
        if not (isinstance(s, ast.Assign) and _harmless_fallback(s)):
            return False
        bound |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    return (
        isinstance(handler.type, ast.Name)
        and handler.type.id == "Exception"
        and handler.name is None
        and bool(handler.body)
        and bound == imported
    )


def _is_optional_import(node: ast.Try, rebound: set[str], module_level: bool) -> bool:
    """try: <imports only> except ImportError/ModuleNotFoundError: <imports, pass, constants>.

    At module level (import time) `except Exception` is also one when it only gives the imported
    names constant defaults (_is_import_default). Nothing computes in either: the body is imports.
    """
    imported = _imported_names(node.body)
    return (
        bool(node.body)
        and all(isinstance(s, ast.Import | ast.ImportFrom) for s in node.body)
        and bool(node.handlers)
        and not node.finalbody
        and all(_harmless_fallback(s) for s in node.orelse)
        and not (IMPORT_ERRORS & rebound)
        and all(
            (_catches_only_import_errors(h) and all(_harmless_fallback(s) for s in h.body))
            or (module_level and "Exception" not in rebound and _is_import_default(h, imported))
            for h in node.handlers
        )
    )


def guard_no_try_except(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: a try/except can fall back to eager PyTorch when the kernel fails."""
    # `ImportError = Exception` would turn an optional import into a catch-all.
    rebound = (
        {
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        | {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names
        }
        | {
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
    )
    module_level = {id(n) for n in _module_level_nodes(tree.body)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _is_optional_import(
            node, rebound, id(node) in module_level
        ):
            continue  # an optional import (Liger's libdevice path); guard_imports still applies
        if isinstance(node, ast.Try | ast.TryStar):
            yield Violation(
                "no_try_except",
                node.lineno,
                "try/except block (a fallback path hides a failing kernel)",
            )
        elif isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("suppress"):
            yield Violation(
                "no_try_except", node.lineno, "contextlib.suppress (swallows kernel errors)"
            )
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
            "__exit__",
            "__aexit__",
        ):
            yield Violation(
                "no_try_except",
                node.lineno,
                f"defines {node.name} (a context manager that returns True swallows kernel errors)",
            )


def guard_no_reference_model(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: calling or inheriting the reference Model makes the reference the answer."""
    model_new = _find_class(tree, "ModelNew")
    if model_new is not None:
        for base in model_new.bases:
            if (_dotted(base) or "").split(".")[-1] == "Model":
                yield Violation(
                    "no_reference_model", model_new.lineno, "ModelNew inherits the reference Model"
                )
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
            yield Violation("no_reference_model", node.lineno, "refers to the reference Model")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "Model" for a in node.names):
            yield Violation("no_reference_model", node.lineno, "imports the reference Model")


def guard_no_torch_compute_in_forward(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: torch compute in forward means PyTorch, not the kernel, does the work."""
    model_new = _find_class(tree, "ModelNew")
    if model_new is None:
        return
    for fn in model_new.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "forward"):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func) or ""
            head, _, attr = name.rpartition(".")
            if head in (
                "torch",
                "torch.nn.functional",
                "F",
                "torch.special",
                "torch.linalg",
                "torch.fft",
            ):
                if head == "torch" and attr in ALLOWED_TORCH_CALLS:
                    continue
                yield Violation(
                    "no_torch_compute",
                    node.lineno,
                    f"{name}() computes in PyTorch inside ModelNew.forward (only allocation, views and casts are allowed)",
                )


def guard_no_side_streams_or_compile(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: side streams escape the timing; torch.compile/jit substitute another compiler."""
    banned = {
        "torch.cuda.Stream": "work on a side stream escapes the timed stream",
        "torch.cuda.stream": "work on a side stream escapes the timed stream",
        "torch.compile": "torch.compile is not the candidate's kernel",
        "torch.jit.script": "TorchScript is not the candidate's kernel",
        "torch.jit.trace": "TorchScript is not the candidate's kernel",
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name):
            name = _dotted(node)
            if name in banned:
                yield Violation("no_side_effects", node.lineno, f"{name}: {banned[name]}")


def _module_problem(module: str) -> str | None:
    """Why a candidate may not import `module` (None: it may)."""
    parts = module.split(".")
    if parts[0] in KERNEL_LIBRARIES:
        return None
    if parts[0] not in ALLOWED_MODULES:
        return (
            f"imports {module} (a candidate may import only torch, triton, "
            f"{', '.join(KERNEL_LIBRARIES)} and pure-Python helpers such as math and functools)"
        )
    if parts[0] in ("torch", "triton") and any(p.startswith("_") for p in parts[1:]):
        return f"imports the private module {module}"
    for denied in DENIED_TORCH_MODULES:
        if _under(module, denied):
            return f"imports {module} (registers ops, compiles other code, loads pickles or forks)"
    return None


def _env_read(m: _Module, name: ast.Name) -> bool:
    """True for os.environ.get("<allowed>") / os.environ.get("<allowed>", <constant>)."""
    environ = m.parents.get(name)
    get = m.parents.get(environ) if environ is not None else None
    call = m.parents.get(get) if get is not None else None
    return (
        isinstance(environ, ast.Attribute)
        and environ.attr == "environ"
        and isinstance(get, ast.Attribute)
        and get.attr == "get"
        and isinstance(call, ast.Call)
        and call.func is get
        and not call.keywords
        and 1 <= len(call.args) <= 2
        and all(isinstance(a, ast.Constant) for a in call.args)
        and call.args[0].value in ALLOWED_ENV_READS  # type: ignore[attr-defined]
    )


def guard_imports(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: every module beyond torch/triton/pure helpers is a door out of the sandbox."""
    m = _analyse(tree)
    os_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield Violation(
                "imports",
                node.lineno,
                f"relative import from {'.' * node.level}{node.module or ''} (a candidate is one file)",
            )
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "os":
                    os_names.add(a.asname or "os")  # checked at each use, below
                    continue
                problem = _module_problem(a.name)
                if problem:
                    yield Violation("imports", node.lineno, problem)
        elif isinstance(node, ast.ImportFrom) and node.module:
            problem = _module_problem(node.module)
            if problem:
                yield Violation("imports", node.lineno, problem)
                continue
            for a in node.names:
                if a.name == "*":
                    yield Violation(
                        "imports",
                        node.lineno,
                        f"from {node.module} import * (hides which names the candidate uses)",
                    )
                elif node.module.split(".")[0] in ("torch", "triton"):
                    path = f"{node.module}.{a.name}"
                    problem = _module_problem(path)
                    if problem is None and any(_under(path, b) for b in BANNED_TORCH_APIS):
                        problem = f"imports {path} (not the candidate's Triton kernel)"
                    if problem:
                        yield Violation("imports", node.lineno, problem)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in os_names and not _env_read(m, node):
            parent = m.parents.get(node)
            what = _dotted(parent) if isinstance(parent, ast.Attribute) else node.id
            yield Violation(
                "imports",
                node.lineno,
                f"uses {what}: os may only be read as os.environ.get(...) of "
                f"{', '.join(sorted(ALLOWED_ENV_READS))}",
            )


def _banned_builtins(m: _Module) -> Iterator[Violation]:
    for node in _unbound_loads(m.tree, BANNED_BUILTINS):
        yield Violation(
            "no_introspection",
            node.lineno,
            f"uses {node.id} (code execution, files or dynamic attribute access)",
        )
    for node in _unbound_loads(m.tree, frozenset({"type"})):
        call = m.parents.get(node)
        if isinstance(call, ast.Call) and call.func is node and len(call.args) == 3:
            yield Violation(
                "no_introspection", node.lineno, "type(name, bases, dict) builds a class at runtime"
            )


def _dunder_escapes(m: _Module) -> Iterator[Violation]:
    for node in ast.walk(m.tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
        if name in DUNDER_ESCAPES:
            yield Violation(
                "no_introspection",
                node.lineno,  # type: ignore[attr-defined]
                f"uses {name} (an escape hatch into interpreter or dispatch internals)",
            )
        elif isinstance(node, ast.Attribute) and node.attr in SMUGGLED_MODULES:
            yield Violation(
                "no_introspection",
                node.lineno,
                f"reaches the {node.attr} module through an attribute ({ast.unparse(node)})",
            )


def _is_private(attr: str) -> bool:
    return attr.startswith("_") and attr not in ALLOWED_TORCH_DUNDERS


def _private_and_banned_torch(m: _Module) -> Iterator[Violation]:
    # The old side-streams guard already reports these exact spellings.
    reported = {
        id(n)
        for node in ast.walk(m.tree)
        if isinstance(node, ast.Attribute)
        and _dotted(node) in ("torch.compile", "torch.jit.script", "torch.jit.trace")
        for n in ast.walk(node)
    }
    for node in ast.walk(m.tree):
        if id(node) in reported or not isinstance(node, ast.Attribute | ast.Name):
            continue
        path = m.resolve(node)
        inner = m.resolve(node.value) if isinstance(node, ast.Attribute) else None
        if _is_torch(path) and any(_under(path or "", b) for b in BANNED_TORCH_APIS):
            if not (_is_torch(inner) and any(_under(inner or "", b) for b in BANNED_TORCH_APIS)):
                yield Violation(
                    "no_introspection",
                    node.lineno,
                    f"uses {path} (not the candidate's Triton kernel, or state the reference shares)",
                )
            continue
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        if isinstance(node.value, ast.Attribute) and _is_private(node.value.attr):
            continue  # reported at the first private attribute of the chain
        root = _chain_root(node)
        root_path = m.resolve(root) if isinstance(root, ast.Name) else None
        if _is_torch(root_path) or _is_triton(root_path):
            yield Violation(
                "no_introspection",
                node.lineno,
                f"uses the private {ast.unparse(node)} (torch/triton internals)",
            )
        elif (
            not node.attr.startswith("__")
            and isinstance(root, ast.Name)
            and root.id not in ("self", "cls")
            and root.id not in m.plain_defs  # its own module-level functions and classes
            and root.id not in m.aliases  # another module: guard_imports decides about it
        ):
            yield Violation(
                "no_introspection",
                node.lineno,
                f"uses the private attribute {ast.unparse(node)} of an object it did not define",
            )


def _host_memory_reads(m: _Module) -> Iterator[Violation]:
    in_jit = _inside_jit(m)
    for node in ast.walk(m.tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in HOST_MEMORY_READS
            and id(node) not in in_jit
        ):
            yield Violation(
                "no_introspection",
                node.lineno,
                f"uses .{node.attr} (a host-side read of tensor memory the dispatch monitor cannot see)",
            )


def _library_hooks(m: _Module) -> Iterator[Violation]:
    for node in ast.walk(m.tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                path = m.resolve(base) or _dotted(base) or ""
                last = path.rsplit(".", 1)[-1]
                if (path == "Tensor" or _is_torch(path)) and (
                    last.endswith("Tensor")
                    or last in ("Parameter", "Buffer", "TorchFunctionMode", "TorchDispatchMode")
                ):
                    yield Violation(
                        "no_introspection",
                        node.lineno,
                        f"class {node.name} subclasses {path} (a tensor subclass or mode "
                        "intercepts torch calls)",
                    )
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            root = _chain_root(node)
            if isinstance(root, ast.Name) and root.id in m.aliases:
                yield Violation(
                    "no_introspection",
                    node.lineno,
                    f"assigns {ast.unparse(node)} (monkeypatching a library also changes the "
                    "reference and the gate)",
                )
        elif isinstance(node, ast.Call) and m.resolve(node.func) in (
            "operator.attrgetter",
            "operator.methodcaller",
        ):
            yield Violation(
                "no_introspection",
                node.lineno,
                f"{m.resolve(node.func)}() is getattr by another name",
            )


def _modules_as_values(m: _Module) -> Iterator[Violation]:
    for node in _unbound_loads(m.tree, frozenset(m.module_names)):
        parent = m.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            continue  # torch.empty, tl.load: the ordinary use
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "hasattr"
            and parent.args[:1] == [node]
        ):
            continue  # hasattr(tl, "make_tensor_descriptor"): a feature test
        yield Violation(
            "no_introspection",
            node.lineno,
            f"uses the module {node.id} as a value (an alias hides what it reaches)",
        )


def guard_no_introspection(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: reflection, private internals and host memory reads sidestep every other guard."""
    m = _analyse(tree)
    yield from _banned_builtins(m)
    yield from _dunder_escapes(m)
    yield from _private_and_banned_torch(m)
    yield from _host_memory_reads(m)
    yield from _library_hooks(m)
    yield from _modules_as_values(m)


def _jit_locals(fn: ast.FunctionDef) -> set[str]:
    names = _function_locals(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Lambda):
            names |= _function_locals(node)
        elif isinstance(node, _COMPREHENSIONS):
            for g in node.generators:
                names.update(n.id for n in ast.walk(g.target) if isinstance(n, ast.Name))
    return names


def _jit_callee_problem(m: _Module, func: ast.expr, local: set[str]) -> str | None:
    """The spelling of a callee a @triton.jit body may not call (None: it may)."""
    if isinstance(func, ast.Name):
        path = m.resolve(func, strict=True)
        if func.id in local:
            return func.id  # a value the launch passed in (a constexpr could be any object)
        if func.id in m.jit_names or _is_triton(path) or _is_kernel_library(path):
            return None
        if func.id in JIT_BUILTINS and func.id not in m.globals:
            return None
        return func.id
    root = _value_root(func)
    if isinstance(root, ast.Name):
        path = m.resolve(root, strict=True)
        if _is_triton(path) or _is_kernel_library(path):
            return None
        if root.id in local and isinstance(func, ast.Attribute):
            return None  # a method of a value the kernel computed (x.to(...), desc.load(...))
        return ast.unparse(func)
    # A method of a computed value (tl.load(p).to(...), (a + b).to(...)) is fine: the inner call
    # is checked on its own. Calling a computed value is not.
    return None if isinstance(func, ast.Attribute) else ast.unparse(func)


def _jit_name_problem(m: _Module, node: ast.Name, local: set[str]) -> str | None:
    """What a name read in a @triton.jit body reaches on the host (None: nothing)."""
    name = node.id
    if name in local or name in m.jit_names or name in m.const_globals:
        return None
    if name in m.ambiguous:
        return f"{name}, which is both imported and bound to another value"
    path = m.aliases.get(name)
    if path is not None:
        if _is_triton(path) or _is_kernel_library(path):
            return None
        parent = m.parents.get(node)
        if (
            path == "math"
            and isinstance(parent, ast.Attribute)
            and parent.attr in MATH_CONSTANTS
            and not isinstance(m.parents.get(parent), ast.Call | ast.Attribute)
        ):
            return None
        return f"the host module {path}"
    if name in m.plain_defs:
        return f"the plain Python {name}"
    if name in m.globals:
        return f"the host global {name} (not a constant)"
    if name in JIT_BUILTINS:
        return None
    return f"the Python name {name}"


def guard_no_python_in_jit(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: plain Python called from a kernel runs on the host under the interpreter."""
    m = _analyse(tree)
    for fn in m.jit_defs:
        local = _jit_locals(fn)
        reported: set[int] = set()
        nodes = [n for stmt in fn.body for n in ast.walk(stmt)]
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            callee = _jit_callee_problem(m, node.func, local)
            if callee is not None:
                reported.add(id(_value_root(node.func)))
                yield Violation(
                    "no_python_in_jit",
                    node.lineno,
                    f"calls plain Python {callee}() from the @triton.jit body of {fn.name} "
                    "(runs on the host under the interpreter)",
                )
        for node in nodes:
            if isinstance(node, ast.Name) and id(node) not in reported:
                what = _jit_name_problem(m, node, local)
                if what is not None:
                    yield Violation(
                        "no_python_in_jit",
                        node.lineno,
                        f"uses {what} in the @triton.jit body of {fn.name} "
                        "(runs on the host under the interpreter)",
                    )


GUARDS: tuple[Callable[[ast.Module], Iterator[Violation]], ...] = (
    guard_launches_triton,
    guard_no_try_except,
    guard_no_reference_model,
    guard_no_torch_compute_in_forward,
    guard_no_side_streams_or_compile,
    guard_imports,
    guard_no_introspection,
    guard_no_python_in_jit,
)


def check_static(tree: ast.Module) -> list[Violation]:
    """Every violation every guard finds, in source order."""
    found = [v for guard in GUARDS for v in guard(tree)]
    return sorted(found, key=lambda v: v.line or 0)
