"""column_tiling's analysis (not a pass): a file's one-column-per-program launches and whether
each kernel can take BLOCK_N adjacent columns a program (rewrite/passes/column_tiling.py says
what is rewritten). It sits in passes/ beside multi_row_analysis, whose call checks, launch
checks (launch_problem, block_of) and taint walk (flows_from) it reuses.

What makes a site, read from the structure and never from names:
- the grid is a literal 1-tuple `(n,)` and the program id (axis 0) is the only thing that
  varies between programs;
- every load and store that depends on the program id adds it to the pointer with unit stride
  (`base + rows * stride + col`): the program id indexes the contiguous, row-major inner
  dimension, so BLOCK_N adjacent programs' loads become one coalesced [B, BLOCK_N] tile;
- at most one row block `tl.arange(0, B)` (any number of uses; none for a walk one row a
  step) and a reduction over the rows: a tl.sum/max/min... or a carried accumulator;
- straight-line code and top-level `for ... in range(...)` / `while` loops over rows whose
  bounds do not depend on the column, with simple statements inside;
- a loop carries only per-column accumulators (every update reads the accumulator itself:
  `acc += ...`, `best = tl.maximum(best, ...)`, started from a literal or a 1-D tl.zeros /
  tl.full) and column-independent scalar counters (`i += STEP`, no tl call in the update).

Anything else is not proven and `problem` says why. No rewriting here.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import (
    REDUCTIONS,
    Launched,
    _Check,
    _depends,
    _row_dependent,
    analyse_launches,
    block_of,
    flows_from,
    launch_problem,
)
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    code,
    walk,
)

LOOP_RANGES = {"range", "tl.range", "triton.language.range", "tl.static_range"}


@dataclass
class Analysis(Launched):
    # block: the launch's value of the row block (the arange bound); "1" for a serial walk
    cols: str = ""  # the grid's column count


def _assign_targets(st: cst.BaseSmallStatement) -> list[cst.BaseExpression]:
    if isinstance(st, cst.Assign):
        return [t.target for t in st.targets]
    if isinstance(st, cst.AugAssign | cst.AnnAssign):
        return [st.target]
    return []


def _literal_dtype(e: cst.BaseExpression) -> str | None:
    """The Triton dtype of a scalar literal accumulator start (0.0, -1, float("-inf"))."""
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
        e = e.expression
    if isinstance(e, cst.Float):
        return "float32"
    if isinstance(e, cst.Integer):
        return "int32"
    if (
        isinstance(e, cst.Call)
        and isinstance(e.func, cst.Name)
        and e.func.value == "float"
        and len(e.args) == 1
        and isinstance(e.args[0].value, cst.SimpleString)
    ):
        return "float32"
    return None


def _is_vector_start(e: cst.BaseExpression, roots: set[str]) -> bool:
    """A 1-D tl.zeros / tl.full (the rewrite widens it to (B, BLOCK_N))."""
    if not isinstance(e, cst.Call) or not isinstance(e.func, cst.Attribute):
        return False
    return dotted(e.func).split(".")[0] in roots and e.func.attr.value in ("zeros", "full")


def _shaped(fn: cst.FunctionDef, roots: set[str]) -> set[str]:
    """Names whose value comes from a tl call (a tensor after the rewrite, never a scalar)."""
    return flows_from(
        fn, lambda x: isinstance(x, cst.Call) and dotted(x.func).split(".")[0] in roots, False
    )


class _Kernel:
    """The checks on one kernel; each returns why it is not a site, or None."""

    def __init__(
        self,
        ctx: Ctx,
        kdef: cst.FunctionDef,
        roots: set[str],
        unit: str = "column",
        tile: str = "[B, BLOCK_N]",
    ) -> None:
        self.kdef = kdef
        self.roots = roots
        self.unit = unit  # what a program owns, for the messages (multi_row: "row")
        self.check = _Check(ctx.module, roots, tile=tile)
        self.dep = _row_dependent(kdef)  # names that depend on the program id (its column)
        self.shaped = _shaped(kdef, roots)
        self.params = {p.name.value for p in kdef.params.params}
        self.headers: set[int] = set()  # id() of the loops' range(...) calls
        self.widen: dict[int, str] = {}
        self.accumulators: set[str] = set()

    def body(self) -> list[cst.BaseStatement]:
        return list(self.kdef.body.body) if isinstance(self.kdef.body, cst.IndentedBlock) else []

    def statements(self) -> str | None:
        for st in self.body():
            if isinstance(st, cst.For | cst.While):
                if st.orelse is not None:
                    return f"a loop with an else clause at `{code(st).splitlines()[0]}`"
                inner = st.body.body if isinstance(st.body, cst.IndentedBlock) else []
                for s in inner:
                    if not isinstance(s, cst.SimpleStatementLine):
                        return f"a nested {type(s).__name__.lower()} statement in the loop at `{code(st).splitlines()[0]}`"
                    why = self._small(s)
                    if why:
                        return why
                why = self.header(st)
                if why:
                    return why
            elif isinstance(st, cst.SimpleStatementLine):
                why = self._small(st)
                if why:
                    return why
            else:
                return f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"
        return None

    def _small(self, st: cst.SimpleStatementLine) -> str | None:
        for small in st.body:
            if not isinstance(
                small, cst.Assign | cst.AugAssign | cst.AnnAssign | cst.Expr | cst.Pass
            ):
                return f"a `{code(small)}` statement"
            for t in _assign_targets(small):
                if not isinstance(t, cst.Name):
                    return f"an assignment to `{code(t)}` (only plain names are followed)"
        return None

    def header(self, loop: cst.For | cst.While) -> str | None:
        if isinstance(loop, cst.While):
            if _depends(loop.test, self.dep):
                return f"`while {code(loop.test)}`: the loop's bound depends on the {self.unit}"
            return None
        it = loop.iter
        if not (isinstance(it, cst.Call) and dotted(it.func) in LOOP_RANGES):
            return f"`for ... in {code(it)}`: only range(...) loops are followed"
        if not isinstance(loop.target, cst.Name):
            return f"`for {code(loop.target)} in ...`: only a plain loop variable is followed"
        self.headers.add(id(it))
        if _depends(it, self.dep):
            return f"`{code(it)}`: the loop's bounds depend on the {self.unit}"
        return None

    def calls(self) -> str | None:
        return self.check.expressions(self.kdef, self.headers)

    def carried(self) -> str | None:
        """Each loop carries only per-column accumulators and scalar counters."""
        before: dict[str, list[cst.BaseSmallStatement]] = {}
        for st in self.body():
            if isinstance(st, cst.SimpleStatementLine):
                for small in st.body:
                    for t in _assign_targets(small):
                        assert isinstance(t, cst.Name)
                        before.setdefault(t.value, []).append(small)
                continue
            assert isinstance(st, cst.For | cst.While) and isinstance(st.body, cst.IndentedBlock)
            updates: dict[str, list[cst.BaseSmallStatement]] = {}
            for line in st.body.body:
                assert isinstance(line, cst.SimpleStatementLine)
                for small in line.body:
                    for t in _assign_targets(small):
                        assert isinstance(t, cst.Name)
                        updates.setdefault(t.value, []).append(small)
            for name, ups in updates.items():
                if name in self.params:
                    return f"the loop reassigns the parameter {name}"
                if name not in before:
                    continue  # a per-iteration temporary
                why = self._carried(name, before[name], ups, updates)
                if why:
                    return why
        return None

    def _carried(
        self,
        name: str,
        starts: list[cst.BaseSmallStatement],
        ups: list[cst.BaseSmallStatement],
        loop: dict[str, list[cst.BaseSmallStatement]],
    ) -> str | None:
        if name in self.dep:  # a per-program value: must be an accumulator
            for u in ups:
                if not isinstance(u, cst.AugAssign) and not _reads(u, name, loop, set()):
                    return f"the loop carries `{name}` (`{code(u)}`), not a per-{self.unit} accumulator"
            if len(starts) != 1 or not isinstance(starts[0], cst.Assign):
                return f"the accumulator {name} is set {len(starts)} times before its loop"
            start = starts[0].value
            self.accumulators.add(name)
            dtype = _literal_dtype(start)
            if dtype:
                self.widen[id(starts[0])] = dtype
            elif not _is_vector_start(start, self.roots) or _depends(start, self.dep):
                return f"the accumulator `{name} = {code(start)}`: only a literal or a 1-D tl.zeros/tl.full start is widened"
            return None
        for u in ups:  # a counter shared by the program's columns (rows): it must stay a scalar
            value = getattr(u, "value", None)
            if value is not None and (
                any(isinstance(x, cst.Name) and x.value in self.shaped for x in walk(value))
                or any(
                    isinstance(x, cst.Call) and dotted(x.func).split(".")[0] in self.roots
                    for x in walk(value)
                )
            ):
                return f"the loop carries `{name}` (`{code(u)}`), a tensor that is neither per {self.unit} nor a scalar counter"
        return None

    def pointers(self) -> tuple[str | None, int, int]:
        """Why a column-dependent load/store is not unit-stride in the column; the counts of
        column-dependent stores and of reductions."""
        stores = reductions = 0
        for n in walk(self.kdef.body):
            if not isinstance(n, cst.Call) or not isinstance(n.func, cst.Attribute):
                continue
            last = n.func.attr.value
            if dotted(n.func).split(".")[0] not in self.roots:
                continue
            if last in REDUCTIONS:
                reductions += 1
            if last not in ("load", "store") or not n.args:
                continue
            ptr = n.args[0].value
            if not _depends(ptr, self.dep):
                if last == "store":
                    return (
                        f"`{code(n)}`: the pointer does not depend on the column (every program writes it)",
                        0,
                        0,
                    )
                continue
            why = self.unit_stride(ptr)
            if why:
                return why, 0, 0
            stores += last == "store"
        return None, stores, reductions

    def unit_stride(self, ptr: cst.BaseExpression) -> str | None:
        terms = [t for t in self._terms(ptr, 0) if _depends(t, self.dep)]
        if len(terms) != 1 or not self._column(terms[0]):
            shown = ", ".join(f"`{code(t)}`" for t in terms)
            return (
                f"pointer `{code(ptr)}`: the column enters as {shown}, not added once with unit "
                "stride (the tile would not be coalesced along columns)"
            )
        return None

    def _terms(self, e: cst.BaseExpression, depth: int) -> list[cst.BaseExpression]:
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
            return self._terms(e.left, depth) + self._terms(e.right, depth)
        if isinstance(e, cst.Name) and depth < 8 and not self._column(e):
            found = [
                s
                for s in walk(self.kdef.body)
                if isinstance(s, cst.Assign)
                and any(
                    isinstance(t.target, cst.Name) and t.target.value == e.value for t in s.targets
                )
            ]
            if len(found) == 1:
                return self._terms(found[0].value, depth + 1)
        return [e]

    def _column(self, e: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether e is the column index itself: tl.program_id(0), maybe .to(...), or a name
        set only to one."""
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
            if e.func.attr.value == "to":
                return self._column(e.func.value, depth)
            return e.func.attr.value == "program_id"
        if isinstance(e, cst.Name) and depth < 8:
            found = [
                s
                for s in walk(self.kdef.body)
                if isinstance(s, cst.Assign | cst.AugAssign | cst.AnnAssign)
                and any(isinstance(t, cst.Name) and t.value == e.value for t in _assign_targets(s))
            ]
            return (
                len(found) == 1
                and isinstance(found[0], cst.Assign)
                and self._column(found[0].value, depth + 1)
            )
        return False


def _reads(
    st: cst.BaseSmallStatement,
    name: str,
    loop: dict[str, list[cst.BaseSmallStatement]],
    seen: set[str],
) -> bool:
    """Whether st's value reads `name`, directly or through the loop's temporaries (m_new =
    tl.maximum(m, ...); m = m_new): then its shape broadcasts with the accumulator's."""
    value = getattr(st, "value", None)
    if value is None:
        return False
    for x in walk(value):
        if not isinstance(x, cst.Name):
            continue
        if x.value == name:
            return True
        if (
            x.value in loop
            and x.value not in seen
            and any(_reads(s, name, loop, seen | {x.value}) for s in loop[x.value])
        ):
            return True
    return False


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    unfit, a.cols = launch_problem(ctx, la, kdef, count, "n_cols")
    if unfit:
        return unfit
    k = _Kernel(ctx, kdef, roots)
    why = k.statements() or k.calls() or k.carried()
    if why:
        return why
    if not any(
        isinstance(n, cst.Call) and dotted(n.func).endswith("program_id") for n in walk(kdef.body)
    ):
        return f"{la.kernel} does not read tl.program_id(0)"
    if len(k.check.aranges) > 1:
        return f"{la.kernel} has {len(k.check.aranges)} row blocks ({', '.join(sorted(k.check.aranges))}); one is rewritten"
    why, stores, reductions = k.pointers()
    if why:
        return why
    if not stores:
        return f"{la.kernel} stores nothing that depends on its column"
    if not reductions and not k.accumulators:
        return f"{la.kernel} reduces nothing over its rows (not a column reduction)"
    a.widen = k.widen
    if not k.check.aranges:
        a.block = "1"  # a serial walk one row a step: [1, BLOCK_N] tiles
        return ""
    a.block, unbound = block_of(la, kdef, next(iter(k.check.aranges)))
    return unbound
