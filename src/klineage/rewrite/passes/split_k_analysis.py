"""split_k's analysis (not a pass): a file's launches of kernels whose program reduces a long K
loop serially into one accumulator, and whether the loop can be split over a second program
axis (rewrite/passes/split_k.py says what is rewritten). It builds on multi_row_analysis's
launch checks (`Launched`, `analyse_launches`, `launch_problem`).

What makes a site, read from the structure and never from names:
- a literal 1-D grid `(n,)`, a kernel that reads no program axis but 0 and no tl.num_programs,
  straight-line code around exactly one top-level K loop, K a parameter the kernel never
  reassigns and STEP a constexpr parameter or a positive literal, the loop either
  `for v in range(0, K, STEP)` (or tl.range) or its while form: `v = 0` before the loop (v no
  parameter, assigned nowhere else and read by nothing before the loop), `while v < K:` whose
  body's last statement is `v += STEP` and which assigns v nowhere else (no walrus): v then
  takes exactly the values of range(0, K, STEP), and the rewrite starts it at its chunk's
  start and stops it at its chunk's end;
- the loop carries exactly one value besides a while loop's v, the accumulator, started once
  before the loop and inside the loop only updated by one reduction, never read otherwise
  (split_k_reduction.py reads which): a sum (from an fp32 zero: tl.zeros(...,
  dtype=tl.float32), tl.full(..., 0, tl.float32), 0.0; `acc += e`, `acc = acc + e`,
  `acc = tl.dot(x, y, acc)`), a running maximum (from an fp32 -inf: float("-inf"),
  -float("inf"), tl.full(..., float("-inf"), tl.float32); `acc = tl.maximum(acc, e)` or
  `tl.maximum(e, acc)`, two arguments and no keyword) or a running minimum (+inf,
  tl.minimum), e free of acc; nothing else assigned in the loop (nor v) is read after it;
- one tl.store in the kernel, after the loop, whose value (an outer `.to(...)` aside) follows
  the accumulator through the chunks (split_k_store.py): for a sum, the accumulator summed
  (tl.sum), scaled by values free of it, indexed with None/`:` or cast to fp32 (the partials'
  dtype), a linear function of it, so the sum of the chunks' values is the value; for a
  maximum (minimum), the accumulator itself, indexed with None/`:`, cast to fp32 or reduced by
  tl.max (tl.min) over an axis, never scaled or shifted, so the maximum of the chunks' values
  is the value; its pointer and mask are free of the accumulator;
- the store's base pointer arrives in a parameter used for nothing but that store (its
  `.dtype` aside) and receives a tensor the launcher allocates uninitialised and dense
  (torch.empty, torch.empty_like, x.new_empty), passes to no other launch and, before the
  launch, only asks its shape, strides or device: its offsets lie in [0, numel), which the
  second kernel overwrites whole, and nothing there but allocation garbage is lost;
- no atomics, returns, or calls of the file's own jit helpers (their stores are not followed);
  the launch is a statement of its own, in no loop of its launcher, the kernel is launched
  once, without autotuning, and the grid's, K's and STEP's launch expressions only read values
  (the default SPLIT repeats them).

Anything else is not proven and `problem` says why. No rewriting here.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import Launched, analyse_launches, launch_problem
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    bind,
    code,
    constexprs,
    walk,
)
from klineage.rewrite.passes.split_checks import (
    allocated,
    early_use,
    kernel_calls,
    launched_in_loop,
)
from klineage.rewrite.passes.split_k_reduction import (
    START_WHY,
    UPDATE_WHY,
    Reduction,
    is_zero,
    start_of,
    update_of,
)
from klineage.rewrite.passes.split_k_store import StoreCheck, reads, smalls, targets

LOOP_RANGES = {"range", "tl.range", "triton.language.range"}
SMALL = cst.Assign | cst.AugAssign | cst.AnnAssign | cst.Expr | cst.Pass


# Calls a launcher expression may make and still be evaluated twice (the default SPLIT repeats
# the grid's, K's and STEP's expressions).
PURE_CALLS = {
    "stride",
    "size",
    "numel",
    "dim",
    "len",
    "cdiv",
    "next_power_of_2",
    "min",
    "max",
    "int",
}


def _pure(e: cst.BaseExpression) -> bool:
    """e reads values only: names, attributes, subscripts, arithmetic and size queries."""
    return not any(
        (isinstance(n, cst.Call) and dotted(n.func).split(".")[-1] not in PURE_CALLS)
        or isinstance(n, cst.NamedExpr | cst.Lambda | cst.Yield | cst.Await)
        for n in walk(e)
    )


@dataclass
class Analysis(Launched):
    programs: str = ""  # the grid's program count
    acc: str = ""  # the loop-carried accumulator
    k: str = ""  # the kernel's K parameter (the loop's stop)
    step: str = ""  # the kernel's STEP: a constexpr parameter or a literal
    out_param: str = ""  # the kernel parameter the output pointer arrives in
    out: str = ""  # the launcher's output tensor
    k_arg: str = ""  # the launch's K
    step_arg: str = ""  # the launch's STEP
    torch: str = ""  # the launcher's name for torch
    reduce: Reduction = "sum"  # what the accumulator's updates make of it
    var: str = ""  # the K loop's variable
    loop: cst.For | cst.While | None = None
    start: cst.Assign | None = None  # a while loop's `v = 0`, started at the chunk's start
    store: cst.Call | None = None
    cast: cst.Call | None = None  # the stored value's outer `.to(...)`, stripped by the rewrite
    statement: cst.SimpleStatementLine | None = None  # the launch's own statement


class _Kernel:
    """The checks on one kernel; each returns why it is not a site, or None, and fills `a`."""

    def __init__(self, ctx: Ctx, kdef: cst.FunctionDef, roots: set[str], a: Analysis) -> None:
        self.kdef, self.roots, self.a = kdef, roots, a
        self.helpers = set(ctx.kernels)
        self.params = [p.name.value for p in kdef.params.params]
        self.body = list(kdef.body.body) if isinstance(kdef.body, cst.IndentedBlock) else []
        self.pre: list[cst.BaseStatement] = []
        self.inner: list[cst.BaseStatement] = []
        self.post: list[cst.BaseStatement] = []
        self.own: set[int] = set()  # a while loop's `v = 0` and `v += STEP`: its header's

    def _smalls(self, lines: list[cst.BaseStatement]) -> list[cst.BaseSmallStatement]:
        """The small statements of lines but a while loop's start and step of its variable."""
        return [s for s in smalls(lines) if id(s) not in self.own]

    def problem(self) -> str | None:
        return self.shape() or self.header() or self.calls() or self.carried() or self.stored()

    def shape(self) -> str | None:
        for st in self.body:
            if not isinstance(st, cst.SimpleStatementLine | cst.For | cst.While):
                return f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"
        loops = [st for st in self.body if isinstance(st, cst.For | cst.While)]
        if not loops:
            return "no K loop (a `for ... in range(0, K, STEP)` or `while v < K` at the kernel's top level)"
        if len(loops) > 1:
            return f"{len(loops)} loops at the kernel's top level; one K loop is split"
        loop = self.a.loop = loops[0]
        at = self.body.index(loop)
        self.pre, self.post = self.body[:at], self.body[at + 1 :]
        if loop.orelse is not None:
            return f"a loop with an else clause at `{code(loop).splitlines()[0]}`"
        self.inner = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
        for st in self.inner:
            if not isinstance(st, cst.SimpleStatementLine):
                return f"a nested {type(st).__name__.lower()} statement in the K loop at `{code(st).splitlines()[0]}`"
        for small in smalls(self.body) + smalls(self.inner):
            if not isinstance(small, SMALL):
                return f"a `{code(small)}` statement"
            lhs = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
            if isinstance(small, cst.AugAssign | cst.AnnAssign):
                lhs = [small.target]
            for t in lhs:
                if not isinstance(t, cst.Name):
                    return f"an assignment to `{code(t)}` (only plain names are followed)"
        return None

    def header(self) -> str | None:
        loop = self.a.loop
        why = self._for(loop) if isinstance(loop, cst.For) else self._while()
        if why:
            return why
        for name in (self.a.k, self.a.step):
            if any(name in targets(s) for s in walk(self.kdef.body)):
                return f"the kernel reassigns its loop bound {name}"
        return None

    def _step(self, step: cst.BaseExpression) -> bool:
        """step is a constexpr parameter or a positive literal (then a.step names it)."""
        if (isinstance(step, cst.Name) and step.value in constexprs(self.kdef)) or (
            isinstance(step, cst.Integer) and int(step.value, 0) > 0
        ):
            self.a.step = step.value if isinstance(step, cst.Name) else str(int(step.value, 0))
            return True
        return False

    def _for(self, loop: cst.For) -> str | None:
        it = loop.iter
        bad = f"`for ... in {code(it)}`: the K loop is not range(0, K, STEP) with K a parameter and STEP a constexpr parameter or a literal"
        if not isinstance(it, cst.Call) or dotted(it.func) not in LOOP_RANGES:
            return bad
        pos = [a.value for a in it.args if a.keyword is None]
        if len(pos) != 3 or not isinstance(loop.target, cst.Name):
            return bad
        start, stop, step = pos
        if not is_zero(start) or not isinstance(stop, cst.Name) or stop.value not in self.params:
            return bad
        if not self._step(step):
            return bad
        self.a.k, self.a.var = stop.value, loop.target.value
        return None

    def _while(self) -> str | None:
        """The while form of range(0, K, STEP): `v = 0` before, `while v < K:`, `v += STEP` last."""
        loop = self.a.loop
        assert isinstance(loop, cst.While)
        t = loop.test
        bad = f"`while {code(t)}`: the K loop is not `while v < K` with K a parameter, v started from 0 before it and stepped by `v += STEP` last in its body, STEP a constexpr parameter or a literal"
        if not (
            isinstance(t, cst.Comparison)
            and len(t.comparisons) == 1
            and isinstance(t.comparisons[0].operator, cst.LessThan)
            and isinstance(t.left, cst.Name)
            and isinstance(stop := t.comparisons[0].comparator, cst.Name)
            and stop.value in self.params
            and t.left.value not in self.params
        ):
            return bad
        var = t.left.value
        inner = smalls(self.inner)
        last = inner[-1] if inner else None
        if not (
            isinstance(last, cst.AugAssign)
            and isinstance(last.operator, cst.AddAssign)
            and isinstance(last.target, cst.Name)
            and last.target.value == var
            and self._step(last.value)
        ):
            return bad
        starts = [s for s in smalls(self.pre) if var in targets(s)]
        start = starts[0] if len(starts) == 1 else None
        if not (
            isinstance(start, cst.Assign)
            and isinstance(start.value, cst.Integer)
            and is_zero(start.value)
        ):
            return bad
        for n in walk(self.kdef.body):
            if n is not start and n is not last and var in targets(n):
                return f"`{code(n)}`: the K loop's variable {var} is assigned besides its start and step"
            if isinstance(n, cst.NamedExpr) and reads(n.target, {var}):
                return f"`{code(n)}`: the K loop's variable {var} is assigned besides its start and step"
        for s in smalls(self.pre):
            if s is not start and reads(s, {var}):
                return f"`{code(s)}`: the K loop's variable {var} is read before the loop"
        self.own = {id(start), id(last)}
        self.a.k, self.a.var, self.a.start = stop.value, var, start
        return None

    def calls(self) -> str | None:
        loop = self.a.loop
        assert loop is not None
        in_loop = {id(n) for n in walk(loop.body)}
        before = {id(n) for st in self.pre for n in walk(st)}
        why, found = kernel_calls(self.kdef, self.helpers, self.roots)
        if why:
            return why
        stores: list[cst.Call] = []
        for n in found:
            if id(n) in in_loop:
                return f"`{code(n)}`: a store inside the K loop (a value a step, not one a K chunk)"
            if id(n) in before:
                return f"`{code(n)}`: a store before the K loop"
            stores.append(n)
        if len(stores) != 1:
            return f"the kernel stores {len(stores)} times; one store of the accumulator is split"
        self.a.store = stores[0]
        return None

    def carried(self) -> str | None:
        before = set(self.params) | {t for s in self._smalls(self.pre) for t in targets(s)}
        in_loop = {t for s in self._smalls(self.inner) for t in targets(s)}
        for name in sorted(in_loop & set(self.params)):
            return f"the K loop reassigns the parameter {name}"
        carried = sorted(in_loop & before)
        if not carried:
            return "the K loop carries no accumulator"
        if len(carried) > 1:
            return f"the K loop carries {', '.join(carried)}: one accumulator is split (anything else would need its chunk's start)"
        acc = self.a.acc = carried[0]
        starts = [s for s in smalls(self.pre) if acc in targets(s)]
        start = starts[0] if len(starts) == 1 else None
        local = set(self.params) | {t for s in walk(self.kdef.body) for t in targets(s)}
        began = start_of(start.value, self.roots, local) if isinstance(start, cst.Assign) else None
        kinds: list[Reduction] = []
        for small in self._smalls(self.inner):
            if acc in targets(small):
                kind = update_of(small, acc, self.roots)
                if kind is None or (kinds and kinds[0] != kind):
                    # the reduction the first update (else the start) made it says what is wrong
                    why = UPDATE_WHY[kinds[0] if kinds else began or "sum"]
                    return f"`{code(small)}`: the K loop does more to {acc} {why}"
                kinds.append(kind)
            elif reads(small, {acc}):
                return f"`{code(small)}`: the accumulator {acc} is read inside the K loop"
        kind = self.a.reduce = kinds[0]
        stepwise = (in_loop - {acc}) | {self.a.var}
        for st in self.post:
            for name in sorted(stepwise):
                if reads(st, {name}):
                    return f"`{name}` from the K loop is read after it (its last step's value)"
        if began != kind:
            shown = "; ".join(code(s) for s in starts)
            return f"the accumulator `{shown}`: {START_WHY[kind]}, each chunk starting from it"
        if any(acc in targets(s) for s in smalls(self.post)):
            return f"the accumulator {acc} is reassigned after the K loop"
        return None

    def stored(self) -> str | None:
        assert self.a.store is not None
        self.check = StoreCheck(
            self.kdef,
            self.roots,
            self.a.acc,
            self.post,
            smalls(self.body) + smalls(self.inner),
            self.a.reduce,
        )
        why = self.check.problem(self.a.store)
        self.a.cast = self.check.cast
        return why


def _torch_alias(module: cst.Module) -> str | None:
    for n in walk(module):
        if isinstance(n, cst.Import):
            for a in n.names:
                if a.evaluated_name == "torch":
                    return a.evaluated_alias or "torch"
    return None


def _untouched(ctx: Ctx, la: Launch, name: str, arg: cst.Name) -> str | None:
    """Why the output `name` may hold anything but its allocation's garbage at the launch, or
    be written after it but for the launch's own store (None: it cannot): the sum kernel
    overwrites all of it."""
    if launched_in_loop(la):
        return "the launch is inside a loop of its launcher"
    line = early_use(ctx, la, name, arg)
    if line is not None:
        return f"`{name}` is used before the launch at line {line} (it must hold nothing the partials' sum would overwrite)"
    return None


def _statement(la: Launch) -> cst.SimpleStatementLine | None:
    """The launcher's statement that is the launch and nothing else."""
    for n in walk(la.func):
        if (
            isinstance(n, cst.SimpleStatementLine)
            and len(n.body) == 1
            and isinstance(n.body[0], cst.Expr)
            and n.body[0].value is la.call
        ):
            return n
    return None


def _launcher(ctx: Ctx, la: Launch, kdef: cst.FunctionDef, k: _Kernel) -> str:
    a = k.a
    torch = _torch_alias(ctx.module)
    if torch is None:
        return "no `import torch` for the partials' torch.empty in the launcher"
    a.torch = torch
    args = bind(la.call, kdef)
    outs = [
        p
        for p in k.check.candidates
        if isinstance(v := args.get(p), cst.Name) and allocated(la.func, v.value, torch)
    ]
    if len(outs) != 1:
        return (
            f"the store's pointer is built from {', '.join(k.check.candidates)}, "
            f"{'several' if outs else 'none'} of them a tensor the launcher allocates "
            "uninitialised (torch.empty, empty_like, new_empty) for this launch alone"
        )
    a.out_param = outs[0]
    out = args[a.out_param]
    assert isinstance(out, cst.Name)
    a.out = out.value
    passed = [  # the tensor itself; its strides and shape are the partials' rows' too
        x
        for other in ctx.launches
        if other.func is la.func
        for x in other.call.args
        if isinstance(x.value, cst.Name) and x.value.value == a.out
    ]
    if len(passed) != 1:
        return f"{a.out} is passed to other launches too (the partials' sum overwrites all of it)"
    why = _untouched(ctx, la, a.out, out)
    if why:
        return why
    assert a.store is not None and a.loop is not None
    header = a.loop.iter if isinstance(a.loop, cst.For) else a.loop.test
    why = k.check.exclusive(a.out_param, a.store, header)
    if why:
        return why
    if a.k not in args:
        return f"the launch does not pass {a.k}"
    a.k_arg = code(args[a.k])
    if a.step.isdigit():
        a.step_arg = a.step
    elif a.step in args:
        a.step_arg = code(args[a.step])
    else:
        return f"the launch does not pass {a.step}"
    a.statement = _statement(la)
    if a.statement is None:
        return "the launch is not a statement of its own (the partials' sum follows it)"
    for e in (a.programs, a.k_arg, a.step_arg):
        if not _pure(cst.parse_expression(e)):
            return f"`{e}` may not be evaluated twice (the default SPLIT repeats it)"
    return ""


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    if kdef.name.value.startswith("_split_k_"):
        return f"{kdef.name.value}: the combine of a split (split_k's own second kernel)"
    unfit, a.programs = launch_problem(ctx, la, kdef, count, "programs")
    if unfit:
        return unfit
    k = _Kernel(ctx, kdef, roots, a)
    return k.problem() or _launcher(ctx, la, kdef, k)
