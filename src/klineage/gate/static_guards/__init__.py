"""Guards read from the candidate's source, before any of it runs.

Each guard is a small function returning violations; each carries a one-line rationale.
Text can be fooled, so the harness (gate/harness.py) also checks what actually ran. One module
per guard family: tables.py (what is allowed and why), analysis.py (the source read once),
fallbacks.py, forward.py, imports.py, introspection.py, jit.py.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from klineage.gate.static_guards.analysis import Violation
from klineage.gate.static_guards.fallbacks import guard_launches_triton, guard_no_try_except
from klineage.gate.static_guards.forward import (
    guard_no_reference_model,
    guard_no_side_streams_or_compile,
    guard_no_torch_compute_in_forward,
)
from klineage.gate.static_guards.imports import guard_imports
from klineage.gate.static_guards.introspection import guard_no_introspection
from klineage.gate.static_guards.jit import guard_no_python_in_jit

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


__all__ = ["GUARDS", "Violation", "check_static"]


def check_static(tree: ast.Module) -> list[Violation]:
    """Every violation every guard finds, in source order."""
    found = [v for guard in GUARDS for v in guard(tree)]
    return sorted(found, key=lambda v: v.line or 0)
