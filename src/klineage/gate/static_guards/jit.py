"""The jit guard: plain Python called or read from a @triton.jit body (it runs on the host
under the interpreter)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from klineage.gate.static_guards.analysis import (
    _COMPREHENSIONS,
    Violation,
    _analyse,
    _function_locals,
    _is_kernel_library,
    _is_triton,
    _Module,
    _value_root,
)
from klineage.gate.static_guards.tables import JIT_BUILTINS, MATH_CONSTANTS


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
