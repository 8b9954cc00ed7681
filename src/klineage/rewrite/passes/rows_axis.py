"""Which axis of a kernel's tiles a size spans: rows_per_program's check that a launcher size
the grid divides a count by is a tile's rows (setting it to 1 is one row a program), not a
column block's width or a walk's step, which grids divide counts by too (the colsum expert's
BLOCK_N, the cumsum expert's chunk)."""

from __future__ import annotations

import libcst as cst

from klineage.rewrite.base import dotted, is_call_to
from klineage.rewrite.passes.rows_per_program import names_in, walk


def tiles_rows(kdef: cst.FunctionDef, param: str) -> bool:
    """The kernel shapes a tile's rows with the parameter: a tl.arange(0, param), or an index
    computed from one (not through a load), not only ever on a 2-D tile's last axis (`[None,
    :]`): the grid divides a count by a column block too (the colsum expert's BLOCK_N)."""

    def ranged(n: cst.CSTNode) -> bool:
        return isinstance(n, cst.Call) and is_call_to(n, "tl.arange") and param in names_in(n)

    def index_nodes(e: cst.CSTNode) -> list[cst.CSTNode]:  # e's nodes outside loads
        out = []

        class _Outside(cst.CSTVisitor):
            def on_visit(self, n: cst.CSTNode) -> bool:
                out.append(n)
                return not (isinstance(n, cst.Call) and is_call_to(n, "tl.load"))

        e.visit(_Outside())
        return out

    def derived(e: cst.CSTNode) -> bool:
        return any(
            ranged(n) or (isinstance(n, cst.Name) and n.value in names) for n in index_nodes(e)
        )

    steps = [
        n.args[2].value
        for n in walk(kdef)
        if isinstance(n, cst.Call)
        and dotted(n.func).split(".")[-1] in ("range", "static_range")
        and len(n.args) >= 3
    ]
    if any(param in names_in(s) for s in steps):
        return False  # a loop steps by it: a walk's chunk, its rows or columns
    names: set[str] = set()
    assigns = [
        (t.target.value, n.value)
        for n in walk(kdef)
        if isinstance(n, cst.Assign)
        for t in n.targets
        if isinstance(t.target, cst.Name)
    ]
    while new := {t for t, v in assigns if t not in names and derived(v)}:
        names |= new
    axes = [
        [isinstance(e.slice, cst.Slice) for e in n.slice]
        for n in walk(kdef)
        if isinstance(n, cst.Subscript) and len(n.slice) == 2 and derived(n.value)
    ]
    return any(map(ranged, walk(kdef))) and not (axes and all(a == [False, True] for a in axes))
