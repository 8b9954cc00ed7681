"""Checks shared by the passes that split one program's loop over a second program axis
(split_k, split_scan): the kernel's calls that rule a split out and its stores, and whether the
launcher's output tensor is a fresh allocation nothing else sees before the launch."""

from __future__ import annotations

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.rows_per_program import Ctx, Launch, assignments, code, walk
from klineage.rewrite.passes.split_k_store import arg

# Tensor queries that neither write the output nor depend on its contents.
READ_ONLY = {"shape", "dtype", "device", "stride", "size", "numel", "dim", "ndim", "is_contiguous"}


def _binds(n: cst.CSTNode, name: str) -> bool:
    """n is an assignment, for or as-clause whose target mentions name."""
    if isinstance(n, cst.Assign):
        found: list[cst.CSTNode] = [t.target for t in n.targets]
    elif isinstance(n, cst.AugAssign | cst.AnnAssign | cst.For):
        found = [n.target]
    elif isinstance(n, cst.AsName):
        found = [n.name]
    else:
        return False
    return any(isinstance(x, cst.Name) and x.value == name for t in found for x in walk(t))


def allocated(func: cst.FunctionDef, name: str, torch: str) -> bool:
    """name is bound once in the launcher func, to an uninitialised dense allocation."""
    if name in {p.name.value for p in func.params.params}:
        return False
    bound = [n for n in walk(func) if _binds(n, name)]
    found = assignments(func).get(name, [])
    if len(found) != 1 or len(bound) != 1 or not isinstance(v := found[0].value, cst.Call):
        return False
    callee = dotted(v.func)
    return callee in {f"{torch}.empty", f"{torch}.empty_like"} or (
        isinstance(v.func, cst.Attribute) and v.func.attr.value == "new_empty"
    )


def kernel_calls(
    kdef: cst.FunctionDef, helpers: set[str], roots: set[str]
) -> tuple[str | None, list[cst.Call]]:
    """Why the kernel's calls rule out a split over a second program axis (a return, a call of
    the file's own jit helpers, whose loads and stores are not followed, a program axis but 0,
    tl.num_programs, atomics), else None with its tl.store calls in source order."""
    stores: list[cst.Call] = []
    for n in walk(kdef.body):
        if isinstance(n, cst.Return):
            return "a return in the kernel", []
        if not isinstance(n, cst.Call):
            continue
        if isinstance(n.func, cst.Name) and n.func.value in helpers:
            return (
                f"a call of the jit helper {n.func.value} (what it loads and stores is not followed)",
                [],
            )
        parts = dotted(n.func).split(".")
        if parts[0] not in roots:
            continue
        last = parts[-1]
        if last == "program_id":
            axis = arg(n, 0, "axis")
            if not (isinstance(axis, cst.Integer) and axis.value == "0"):
                return f"`{code(n)}`: the kernel already reads a program axis other than 0", []
        elif last == "num_programs":
            return f"`{code(n)}`: the kernel reads the grid's size", []
        elif last.startswith("atomic_"):
            return f"{dotted(n.func)}: atomics", []
        elif last == "store":
            stores.append(n)
    return None, stores


def launched_in_loop(la: Launch) -> bool:
    """The launch sits in a loop of its launcher (it may run more than once)."""
    return any(
        isinstance(n, cst.For | cst.While) and any(x is la.call for x in walk(n.body))
        for n in walk(la.func)
    )


def early_use(ctx: Ctx, la: Launch, name: str, passed: cst.Name) -> int | None:
    """The line of a use of the launcher's `name` (bound once, to an allocation) before its
    launch or in the launch's own call but as the argument `passed`, where its contents or an
    alias could reach the kernel; shape, stride and device queries and the allocation itself
    are not uses. None when there is none."""
    queries = {
        id(n.value)
        for n in walk(la.func)
        if isinstance(n, cst.Attribute) and n.attr.value in READ_ONLY
    }
    (alloc,) = assignments(la.func)[name]
    target = alloc.targets[0].target if isinstance(alloc, cst.Assign) else alloc.target
    in_call = {id(n) for n in walk(la.call)}
    for n in walk(la.func):
        if not (isinstance(n, cst.Name) and n.value == name) or n is passed or n is target:
            continue
        if id(n) not in queries and (id(n) in in_call or ctx.line(n) <= la.line):
            return ctx.line(n)
    return None
