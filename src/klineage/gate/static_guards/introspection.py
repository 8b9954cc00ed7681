"""The introspection guard: builtins, dunders, private and banned torch APIs, host reads of
tensor memory."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from klineage.gate.static_guards.analysis import (
    Violation,
    _analyse,
    _chain_root,
    _dotted,
    _inside_jit,
    _is_torch,
    _is_triton,
    _Module,
    _unbound_loads,
    _under,
)
from klineage.gate.static_guards.tables import (
    ALLOWED_TORCH_DUNDERS,
    BANNED_BUILTINS,
    BANNED_TORCH_APIS,
    DUNDER_ESCAPES,
    HOST_MEMORY_READS,
    SMUGGLED_MODULES,
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
