"""output_tiling's analysis (not a pass): a file's launches of kernels whose program computes
one output of a matrix product as a dot product over K, and whether the program can own a
[TILE_M, TILE_N] tile of outputs reduced by tl.dot instead (output_tiling.py says what is
rewritten).

What makes a site, read from the structure and never from names:
- the program's two output indices: either a 2-D grid `(R, C)` read as `r = tl.program_id(0)`,
  `c = tl.program_id(1)`, or a 1-D grid `(R * C,)` read once as `t = tl.program_id(0)` and
  split as `r = t // D`, `c = t % D` (in either order), D a kernel parameter that receives C
  (the grid's other factor is then R). The names r, c are assigned nowhere else, t is read
  by nothing else, and the kernel reads no other program axis nor tl.num_programs;
- straight-line code around exactly one top-level `for k in range(0, K, STEP)` (or tl.range)
  loop; its body is simple assignments only: names free of r and c (the K block: offsets,
  masks), exactly two loads `x = tl.load(...)`, one whose address depends on one output index
  and not the other (A's row), one the other way round (B's column), and names that depend on
  exactly one of the indices (their addresses), and one update `acc += X * Y` (or
  `acc = acc + X * Y`), X and Y the two loads' values, each bare or cast to fp32 by `.to(...)`;
- the accumulator started once before the loop as `tl.zeros([STEP], dtype=tl.float32)` (or
  `(STEP,)`), STEP the loop's step and the only arange bound in the loop, `tl.arange(0, STEP)`;
- exactly one tl.store, after the loop, whose value reads the accumulator once, as
  `tl.sum(acc, axis=0)` (or `tl.sum(acc)`), and whose pointer reads both output indices;
- every expression depending on an output index or on the K block elementwise: tl functions
  that work lane by lane, `.to(...)`, arithmetic and comparisons; no reductions but the
  store's sum, no indexing, no jit helpers, atomics, branches or returns; no load outside the
  loop (its padded lanes would read out of bounds); expressions before the loop that read an
  output index do not read the K block (a pointer walked along K is not rewritten);
- the kernel has a single @triton.jit decorator, no parameter defaults or *args, and one
  launch, a statement of its own whose grid is a literal tuple.

Why the shape is enough: with r a [TILE_M, 1] column and c a [1, TILE_N] row of indices, every
expression that depends on one index and the K block lane by lane is evaluated on the broadcast
[TILE_M, STEP] (or [STEP, TILE_N]) grid, lane (m, k) holding what program (r_m, c) computed at
lane k; the loads' products summed over the block and over the loop are then exactly the
tl.dot of the two tiles accumulated over K (in fp32; the order of the additions differs, which
the gate's float64-based comparison allows), and the store writes lane (m, n) where program
(r_m, c_n) wrote. Lanes past R or C are masked off in both loads and the store.

Anything else is not proven and `problem` says why. No rewriting here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import (
    ELEMENTWISE,
    Launched,
    _tl_roots,
    analyse_launches,
)
from klineage.rewrite.passes.output_tiling_indices import (
    _assign_of,
    _is_call,
    _product_factors,
    _reads,
    _target,
    output_indices,
)
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    bind,
    code,
    constexprs,
    walk,
)
from klineage.rewrite.passes.split_k_analysis import _statement
from klineage.rewrite.passes.tile_rewrite import _is_docstring

LOOP_RANGES = {"range", "tl.range", "triton.language.range"}


@dataclass
class Analysis(Launched):
    form: str = ""  # "grid2": (R, C) and two program axes; "split": (R * C,) split by // and %
    row: str = ""  # the output index A's load reads (tile axis 0)
    col: str = ""  # the output index B's load reads (tile axis 1)
    row_count: str = ""  # the launch's count of `row` values
    col_count: str = ""  # the launch's count of `col` values
    pid: str = ""  # split form: the name of tl.program_id(0)
    row_def: cst.Assign | None = None
    col_def: cst.Assign | None = None
    pid_def: cst.Assign | None = None
    acc: str = ""
    acc_def: cst.Assign | None = None
    step: str = ""  # the loop's step in the kernel (a constexpr parameter or a literal)
    step_arg: str = ""  # its value at the launch
    loop: cst.For | None = None
    a_load: cst.Call | None = None  # the load along the row index: the left tile
    b_load: cst.Call | None = None
    a_value: str = ""  # the names the loads are assigned to
    b_value: str = ""
    update: cst.BaseSmallStatement | None = None
    a_side: set[str] = field(default_factory=set)  # loop names on A's side (its address)
    b_side: set[str] = field(default_factory=set)
    k_block: set[str] = field(default_factory=set)  # names holding a vector of the K block
    store: cst.Call | None = None
    total: cst.Call | None = None  # the store's tl.sum(acc, ...)
    statement: cst.SimpleStatementLine | None = None


class _Kernel:
    """The checks on one kernel; each method returns why not (None: it holds)."""

    def __init__(self, ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], a: Analysis):
        self.ctx, self.la, self.kdef, self.roots, self.a = ctx, la, kdef, roots, a
        body = kdef.body.body if isinstance(kdef.body, cst.IndentedBlock) else []
        self.body = [st for st in body if not _is_docstring(st)]
        self.loops = [st for st in self.body if isinstance(st, cst.For)]
        self.params = {p.name.value for p in kdef.params.params}

    def problem(self) -> str | None:
        return (
            self.shape()
            or self.indices()
            or self.loop_body()
            or self.accumulator()
            or self.stored()
            or self.expressions()
        )

    def shape(self) -> str | None:
        for st in self.body:
            if isinstance(st, cst.For):
                continue
            if not isinstance(st, cst.SimpleStatementLine):
                return f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"
            for small in st.body:
                if not isinstance(small, cst.Assign | cst.AugAssign | cst.Expr | cst.Pass):
                    return f"a `{code(small)}` statement"
        if len(self.loops) != 1:
            return f"{len(self.loops) or 'no'} top-level K loops (one is tiled)"
        loop = self.loops[0]
        if loop.orelse is not None or not isinstance(loop.target, cst.Name):
            return "the K loop has an else or a tuple target"
        it = loop.iter
        if not (isinstance(it, cst.Call) and dotted(it.func) in LOOP_RANGES and len(it.args) == 3):
            return f"`for ... in {code(it)}`: not range(0, K, STEP)"
        lo, _, step = (x.value for x in it.args)
        if not (isinstance(lo, cst.Integer) and lo.value == "0"):
            return f"`for ... in {code(it)}`: not range(0, K, STEP)"
        name = code(step)
        if not (name in constexprs(self.kdef) or (isinstance(step, cst.Integer))):
            return f"the K loop's step {name} is not a constexpr parameter or a literal"
        self.a.loop, self.a.step = loop, name
        if isinstance(step, cst.Integer):
            self.a.step_arg = name
        else:
            arg = bind(self.la.call, self.kdef).get(name)
            if arg is None:
                return f"the launch does not pass {name}"
            self.a.step_arg = code(arg)
        if self.a.step_arg.isdigit() and int(self.a.step_arg) < 16:
            return f"the K block {self.a.step_arg} is under 16 (tl.dot's least K)"
        return None

    def indices(self) -> str | None:
        found = output_indices(self.ctx, self.la, self.kdef, self.roots, self.body)
        if isinstance(found, str):
            return found
        a = self.a
        a.form, a.pid, a.pid_def = found.form, found.pid, found.pid_def
        self.index_defs = dict(zip(found.names, found.defs, strict=True))
        self.index_counts = dict(zip(found.names, found.counts, strict=True))
        return None

    def loop_body(self) -> str | None:
        a = self.a
        assert a.loop is not None
        inner = a.loop.body.body if isinstance(a.loop.body, cst.IndentedBlock) else []
        # The tile's rows run along the first index (program axis 0, or t // D), its columns
        # along the second; the left tile is the load that reads the first.
        a.row, a.col = list(self.index_defs)
        a.row_def, a.col_def = self.index_defs[a.row], self.index_defs[a.col]
        a.row_count, a.col_count = self.index_counts[a.row], self.index_counts[a.col]
        row_dep, col_dep = self._flows(a.row), self._flows(a.col)
        loads: dict[str, tuple[bool, cst.Call]] = {}
        updates: list[cst.BaseSmallStatement] = []
        assigned: set[str] = set()
        for st in inner:
            if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
                return f"a `{code(st).splitlines()[0]}` statement in the K loop"
            small = st.body[0]
            asg = _assign_of(st)
            if isinstance(small, cst.AugAssign) or (
                asg is not None and _reads(asg.value, {_target(asg)})
            ):  # a name carried by the loop: the accumulator's update, or refused there
                updates.append(small)
                continue
            if asg is None:
                return f"`{code(small)}` in the K loop"
            name, v = _target(asg), asg.value
            if name in assigned:
                return f"{name} is assigned twice in the K loop"
            assigned.add(name)
            reads_row, reads_col = _reads(v, row_dep), _reads(v, col_dep)
            if reads_row and reads_col:
                return f"`{code(asg)}` reads both output indices inside the K loop"
            if _is_call(v, self.roots, "load"):
                assert isinstance(v, cst.Call)
                if not (reads_row or reads_col):
                    return f"`{code(asg)}`: a load that reads neither output index"
                loads[name] = (reads_row, v)
        if len(loads) != 2 or len({side for side, _ in loads.values()}) != 2:
            return "the K loop does not load one value along each output index"
        if len(updates) != 1:
            return f"the K loop has {len(updates) or 'no'} accumulator updates (one is tiled)"
        for name, (on_row, call) in loads.items():
            if on_row:
                a.a_value, a.a_load = name, call
            else:
                a.b_value, a.b_load = name, call
        a.update = updates[0]
        why = self._update(updates[0])
        if why:
            return why
        a.a_side = (row_dep & assigned) | {a.a_value}
        a.b_side = (col_dep & assigned) | {a.b_value}
        a.k_block = self._k_block()
        for st in inner:
            asg = _assign_of(st)
            if asg is a.update:
                continue
            if asg is not None and _reads(asg.value, {a.a_value, a.b_value}):
                return f"`{code(asg)}` reads a loaded value outside the product"
        return None

    def _update(self, small: cst.BaseSmallStatement) -> str | None:
        a = self.a
        if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
            if not isinstance(small.target, cst.Name):
                return f"`{code(small)}`: not `acc += X * Y`"
            acc, term = small.target.value, small.value
        elif (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.BinaryOperation)
            and isinstance(small.value.operator, cst.Add)
            and isinstance(small.value.left, cst.Name)
            and small.value.left.value == small.targets[0].target.value
        ):
            acc, term = small.value.left.value, small.value.right
        else:
            return f"`{code(small)}`: not `acc += X * Y`"
        factors = _product_factors(term)
        if factors is None:
            return f"`{code(small)}`: the update is not a product of the two loads"
        got = sorted(_bare(f) for f in factors)
        if got != sorted([a.a_value, a.b_value]):
            return f"`{code(small)}`: the update is not a product of the two loads (each bare or `.to(fp32)`)"
        for f in factors:
            if isinstance(f, cst.Call) and not _fp32_cast(f):
                return f"`{code(f)}`: a cast to anything but fp32"
        a.acc = acc
        return None

    def accumulator(self) -> str | None:
        a = self.a
        starts = [x for x in map(_assign_of, self.body) if x is not None and _target(x) == a.acc]
        others = [x for x in self.ctx.assigns(self.kdef).get(a.acc, []) if x is not a.update]
        if len(starts) != 1 or len(others) != 1:
            return f"{a.acc} is not started exactly once before the loop"
        v = starts[0].value
        if not _is_call(v, self.roots, "zeros") or not isinstance(v, cst.Call) or not v.args:
            return f"`{code(starts[0])}`: not tl.zeros([{a.step}], dtype=tl.float32)"
        shape = v.args[0].value
        if not (
            isinstance(shape, cst.Tuple | cst.List)
            and len(shape.elements) == 1
            and code(shape.elements[0].value) == a.step
        ):
            return f"`{code(starts[0])}`: not a [{a.step}] vector"
        dtype = [x.value for x in v.args[1:]]
        if len(dtype) != 1 or dotted(dtype[0]).split(".")[-1] != "float32":
            return f"`{code(starts[0])}`: not fp32"
        a.acc_def = starts[0]
        return None

    def stored(self) -> str | None:
        a = self.a
        assert a.loop is not None
        stores = [n for n in walk(self.kdef.body) if _is_call(n, self.roots, "store")]
        if len(stores) != 1:
            return f"{len(stores) or 'no'} tl.store calls (one is tiled)"
        (store,) = stores
        assert isinstance(store, cst.Call)
        if any(n is store for n in walk(a.loop)):
            return "the store is inside the K loop"
        if len(store.args) < 2:
            return f"`{code(store)}`: no value"
        value = store.args[1].value
        uses = [n for n in walk(self.kdef.body) if isinstance(n, cst.Name) and n.value == a.acc]
        sums = [
            n
            for n in walk(value)
            if _is_call(n, self.roots, "sum")
            and isinstance(n, cst.Call)
            and n.args
            and isinstance(n.args[0].value, cst.Name)
            and n.args[0].value.value == a.acc
        ]
        # the start, the update's target (and its right side's `acc` when spelled out), the sum
        spelled = 2 if isinstance(a.update, cst.Assign) else 1
        if len(sums) != 1 or len(uses) != 1 + spelled + 1:
            return f"`{code(store)}`: the accumulator is not read once, as tl.sum({a.acc}, axis=0)"
        total = sums[0]
        assert isinstance(total, cst.Call)
        for i, arg in enumerate(total.args[1:], 1):
            key = arg.keyword.value if arg.keyword else ("axis" if i == 1 else "?")
            if key != "axis" or not (isinstance(arg.value, cst.Integer) and arg.value.value == "0"):
                return f"`{code(total)}`: only tl.sum over axis 0 is tiled"
        ptr = store.args[0].value
        if not (_reads(ptr, self._flows(a.row)) and _reads(ptr, self._flows(a.col))):
            return f"`{code(store)}`: its pointer does not read both output indices"
        a.store, a.total = store, total
        return None

    def expressions(self) -> str | None:
        a = self.a
        helpers = {s.name.value for s in self.ctx.module.body if isinstance(s, cst.FunctionDef)}
        for n in walk(self.kdef.body):
            if isinstance(n, cst.Subscript):
                return f"indexing `{code(n)}` (a tile already?)"
            if isinstance(n, cst.Lambda | cst.IfExp | cst.ListComp | cst.GeneratorExp):
                return f"`{code(n)}`"
            if isinstance(n, cst.Return):
                return "a return in the kernel"
            if not isinstance(n, cst.Call) or n is a.total or n is a.loop.iter:  # type: ignore[union-attr]
                continue
            if isinstance(n.func, cst.Name):
                if n.func.value in helpers:
                    return f"a call to the jit helper {n.func.value}"
                if n.func.value not in ("float", "int", "min", "max"):
                    return f"a call to {n.func.value}"
                continue
            if isinstance(n.func, cst.Attribute) and n.func.attr.value == "to":
                continue  # a cast keeps the shape
            parts = dotted(n.func).split(".")
            last = parts[-1] if parts else ""
            if not parts or parts[0] not in self.roots:
                if last != "to":
                    return f"a method call `.{last}(...)`"
                continue
            if last in ELEMENTWISE or last in ("program_id", "load", "store", "zeros"):
                continue
            if last == "arange":
                if len(n.args) != 2 or code(n.args[1].value) != a.step:
                    return f"`{code(n)}`: an arange other than the K block's tl.arange(0, {a.step})"
                continue
            if last.startswith("atomic_"):
                return f"{dotted(n.func)}: atomics"
            return f"{dotted(n.func)} (not known to work lane by lane on an output tile)"
        loop = a.loop
        assert loop is not None
        for st in self.body:
            if st is loop:
                break
            if any(_is_call(n, self.roots, "load") for n in walk(st)):
                return "a load before the K loop (its padded lanes would read out of bounds)"
            if _reads(st, self._flows(a.row) | self._flows(a.col)) and (
                _reads(st, a.k_block) or any(_is_call(n, self.roots, "arange") for n in walk(st))
            ):
                return (
                    f"`{code(st).strip()}` mixes an output index with the K block before the loop"
                )
        after = False
        for st in self.body:
            if st is loop:
                after = True
                continue
            if after and any(_is_call(n, self.roots, "load") for n in walk(st)):
                return "a load after the K loop (its padded lanes would read out of bounds)"
        return None

    def _flows(self, index: str) -> set[str]:
        """Names whose value depends on `index`, itself included (the kernel is straight-line
        but for the loop, so one pass in order with a repeat for the loop settles it)."""
        found = {index}
        for _ in range(2):
            for n in walk(self.kdef.body):
                if isinstance(n, cst.Assign) and len(n.targets) == 1:
                    t = n.targets[0].target
                    if isinstance(t, cst.Name) and _reads(n.value, found):
                        found.add(t.value)
        if self.a.acc:
            found.discard(self.a.acc)
        return found

    def _k_block(self) -> set[str]:
        """The names (before or in the loop) holding a vector of the K block: assigned a value
        with tl.arange in it, or reading such a name."""
        out: set[str] = set()
        for _ in range(3):
            for n in walk(self.kdef.body):
                if isinstance(n, cst.Assign) and len(n.targets) == 1:
                    t = n.targets[0].target
                    if not isinstance(t, cst.Name) or t.value == self.a.acc:
                        continue
                    if any(_is_call(x, self.roots, "arange") for x in walk(n.value)) or _reads(
                        n.value, out
                    ):
                        out.add(t.value)
        return out - self._flows(self.a.row) - self._flows(self.a.col)


def _bare(e: cst.BaseExpression) -> str:
    """The name under an optional `.to(...)`."""
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "to":
        e = e.func.value
    return e.value if isinstance(e, cst.Name) else ""


def _fp32_cast(e: cst.Call) -> bool:
    return (
        isinstance(e.func, cst.Attribute)
        and e.func.attr.value == "to"
        and len(e.args) == 1
        and dotted(e.args[0].value).split(".")[-1] == "float32"
    )


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    if len(kdef.decorators) != 1:
        return f"{la.kernel} has decorators besides @triton.jit (autotuned or heuristics)"
    if count > 1:
        return f"{la.kernel} is launched from {count} places"
    params = kdef.params
    if (
        params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.star_kwarg
        or params.kwonly_params
        or params.posonly_params
        or any(p.default is not None for p in params.params)
    ):
        return f"{la.kernel} has *args, keyword-only parameters or defaults"
    a.statement = _statement(la)
    if a.statement is None:
        return "the launch is not a statement of its own"
    return _Kernel(ctx, la, kdef, roots, a).problem() or ""


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def tl_roots(module: cst.Module) -> set[str]:
    return _tl_roots(module)
