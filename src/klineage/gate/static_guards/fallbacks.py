"""Guards on the shape of the candidate: it launches Triton, and computes nothing in a fallback
(try/except around computation; an optional import is not a fallback)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from klineage.gate.static_guards.analysis import Violation, _analyse, _dotted, _module_level_nodes
from klineage.gate.static_guards.tables import IMPORT_ERRORS


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
