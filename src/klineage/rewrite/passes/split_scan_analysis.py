"""split_scan's analysis (not a pass): a file's launches of kernels whose program scans a long
row in a serial loop carrying one running total, and whether that loop can be split into
segments over a second program axis (rewrite/passes/split_scan.py says what is rewritten). It
builds on split_k_analysis (`_Kernel.shape` and `_Kernel.header`: straight-line code around
one top-level `for v in range(0, K, STEP)` loop, K a parameter never reassigned, STEP a
constexpr parameter or a positive literal; `_pure`, `_statement`, `_torch_alias`) and on
multi_row_analysis's launch checks (`analyse_launches`, `launch_problem`: a literal 1-D grid,
one launch, no autotuning, no parameter defaults). split_scan_memory.py checks the stores,
loads and the output tensors.

What makes a site, read from the structure and never from names:
- the kernel reads no program axis but 0 and no tl.num_programs, makes no atomics, returns and
  calls of the file's own jit helpers; the loop is a `for` (tl.range kwargs kept), not a while;
- the loop carries exactly one value, `carried`: the only name assigned both before and in the
  loop, or read in the loop before its assignment there (everything else assigned in the loop
  is set before it is read in each iteration); its one start before the loop is an fp32 scalar
  zero (0.0, tl.zeros((), dtype=tl.float32), tl.full((), 0, tl.float32)); its one update is the
  loop body's last statement, `carried += tl.sum(e, axis=0)` (or `carried = carried + ...`,
  `tl.sum(e)`, `tl.sum(e, 0)`), so nothing reads it after the update (an exclusive scan does);
- the statements e depends on in the iteration and before the loop (a backward slice) do not
  read carried and store nothing: the totals kernel recomputes e from them;
- carried reaches nothing but stored values, and those only linearly (sums, differences,
  products and quotients with values free of it, float casts, tl.sum, tl.cumsum): a
  segment's carried start, the sum of the earlier segments' totals in another order, moves
  them by rounding only;
- no statement after the loop reads anything the loop assigns (its variable included) or
  stores; the launch is a statement of its own, in no loop of its launcher, without *args or
  **kwargs, and its grid's, K's and STEP's expressions only read values (the default SEG
  repeats them).

Anything else is not proven and `problem` says why. No rewriting here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes import split_k_analysis as ska
from klineage.rewrite.passes.multi_row_analysis import analyse_launches, launch_problem
from klineage.rewrite.passes.rows_per_program import Ctx, Launch, bind, code, names_in, walk
from klineage.rewrite.passes.split_checks import kernel_calls
from klineage.rewrite.passes.split_k_reduction import is_zero, start_of
from klineage.rewrite.passes.split_k_store import arg, smalls, targets
from klineage.rewrite.passes.split_scan_memory import Memory

Small = cst.BaseSmallStatement
FLOATS = ("float16", "bfloat16", "float32", "float64", "element_ty")
LINEAR = ("sum", "cumsum")  # tl reductions linear in their first argument


@dataclass
class Analysis(ska.Analysis):
    # acc (split_k's field) is the carried running total; out, a tensor the kernel stores to
    init: Small | None = None  # carried's one start before the loop
    update: cst.SimpleStatementLine | None = None  # the loop body's last line, the update
    term: cst.Call | None = None  # the update's `tl.sum(e, axis=0)`
    keep: set[int] = field(default_factory=set)  # ids of the smalls the totals kernel keeps
    # STEP is read only as the loop's step and as every tl.arange's extent: any power of two
    # walks the same elements (split_scan may widen it; see step_free)
    step_free: bool = False


def read(s: Small) -> set[str]:
    """The names the small statement s reads (keyword and attribute names are not reads)."""
    if isinstance(s, cst.Assign):
        return set(names_in(s.value))
    if isinstance(s, cst.AugAssign):
        return set(names_in(s.value)) | set(targets(s))
    if isinstance(s, cst.AnnAssign):
        return set(names_in(s.value)) if s.value is not None else set()
    if isinstance(s, cst.Expr):
        return set(names_in(s.value))
    return set()


def backward_slice(lines: list[Small], needed: set[str]) -> tuple[list[Small], set[str]]:
    """The statements of lines that the names `needed` after them depend on, and the names
    needed before them."""
    kept: list[Small] = []
    for s in reversed(lines):
        t = set(targets(s))
        if t & needed:
            kept.append(s)
            if not isinstance(s, cst.AugAssign):
                needed = needed - t
            needed = needed | read(s)
    return kept[::-1], needed


def _sum_term(s: Small, acc: str, roots: set[str]) -> cst.Call | None:
    """The `tl.sum(e, axis=0)` that the update s adds to acc (None: s does more)."""
    if isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign):
        term = s.value
    elif (
        isinstance(s, cst.Assign)
        and len(s.targets) == 1
        and isinstance(v := s.value, cst.BinaryOperation)
        and isinstance(v.operator, cst.Add)
    ):
        ends = [(v.left, v.right), (v.right, v.left)]
        found = [y for x, y in ends if isinstance(x, cst.Name) and x.value == acc]
        if len(found) != 1:
            return None
        term = found[0]
    else:
        return None
    if not (isinstance(term, cst.Call) and dotted(term.func).split(".")[0] in roots):
        return None
    if dotted(term.func).split(".")[-1] != "sum" or not term.args or term.args[0].keyword:
        return None
    rest = term.args[1:]
    if len(rest) > 1:
        return None
    if rest:
        key = rest[0].keyword.value if rest[0].keyword else "axis"
        if key != "axis" or not (isinstance(rest[0].value, cst.Integer) and is_zero(rest[0].value)):
            return None
    return term


def _linear(e: cst.BaseExpression, tainted: set[str], roots: set[str]) -> bool:
    """e is linear in the tainted names: sums, differences, products and quotients with values
    free of them, negation, float casts, tl.sum and tl.cumsum."""
    if not (set(names_in(e)) & tainted):
        return True
    if isinstance(e, cst.Name):
        return True
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus | cst.Plus):
        return _linear(e.expression, tainted, roots)
    if isinstance(e, cst.BinaryOperation):
        left, right = e.left, e.right
        if isinstance(e.operator, cst.Add | cst.Subtract):
            return _linear(left, tainted, roots) and _linear(right, tainted, roots)
        free_l, free_r = not (set(names_in(left)) & tainted), not (set(names_in(right)) & tainted)
        if isinstance(e.operator, cst.Multiply):
            return (free_l and _linear(right, tainted, roots)) or (
                free_r and _linear(left, tainted, roots)
            )
        if isinstance(e.operator, cst.Divide):
            return free_r and _linear(left, tainted, roots)
        return False
    if not isinstance(e, cst.Call):
        return False
    if isinstance(e.func, cst.Attribute) and e.func.attr.value == "to" and len(e.args) == 1:
        to = dotted(e.args[0].value).split(".")[-1]
        return to in FLOATS and _linear(e.func.value, tainted, roots)
    parts = dotted(e.func).split(".")
    if parts[0] in roots and parts[-1] in LINEAR and e.args and not e.args[0].keyword:
        rest = e.args[1:]
        return _linear(e.args[0].value, tainted, roots) and not any(
            set(names_in(x.value)) & tainted for x in rest
        )
    return False


class _Scan:
    """The checks on one kernel; each returns why it is not a site, or None, and fills `a`."""

    def __init__(self, ctx: Ctx, kdef: cst.FunctionDef, roots: set[str], a: Analysis) -> None:
        self.k = ska._Kernel(ctx, kdef, roots, a)
        self.kdef, self.roots, self.a, self.helpers = kdef, roots, a, set(ctx.kernels)
        self.params = set(self.k.params)

    def problem(self) -> str | None:
        k = self.k
        why = k.shape()
        if why:
            return why
        if isinstance(self.a.loop, cst.While):
            return f"`while {code(self.a.loop.test)}`: a while loop (only `for v in range(0, K, STEP)` is split into segments)"
        return k.header() or self.calls() or self.carried() or self.sliced() or self.flows()

    def calls(self) -> str | None:
        loop = self.a.loop
        assert loop is not None
        in_loop = {id(n) for n in walk(loop.body)}
        why, stores = kernel_calls(self.kdef, self.helpers, self.roots)
        if why:
            return why
        for n in stores:
            if id(n) not in in_loop:
                return f"`{code(n)}`: a store outside the loop (every segment's program would make it, in no fixed order with the other segments' stores)"
        if not stores:
            return (
                "no store in the loop: not a scan (a reduction stored after its loop is split_k's)"
            )
        return None

    def carried(self) -> str | None:
        k, a = self.k, self.a
        var = a.var
        before = self.params | {t for s in smalls(k.pre) for t in targets(s)}
        inner = smalls(k.inner)
        in_loop = {t for s in inner for t in targets(s)}
        for name in sorted(in_loop & self.params):
            return f"the loop reassigns the parameter {name}"
        if var in in_loop:
            return f"the loop reassigns its variable {var}"
        carried = in_loop & before
        seen: set[str] = set()
        for s in inner:  # read in an iteration before it is set there: the last one's value
            carried |= (read(s) & in_loop) - seen
            seen |= set(targets(s))
        if not carried:
            return "the loop carries no running total"
        if len(carried) > 1:
            return f"the loop carries {', '.join(sorted(carried))}: one running total is split (anything else would need its segment's start)"
        acc = a.acc = next(iter(carried))
        starts = [s for s in smalls(k.pre) if acc in targets(s)]
        init = starts[0] if len(starts) == 1 else None
        local = self.params | {t for s in walk(self.kdef.body) for t in targets(s)}
        if not (
            isinstance(init, cst.Assign)
            and start_of(init.value, self.roots, local) == "sum"
            and _scalar(init.value)
        ):
            shown = "; ".join(code(s) for s in starts) or "none"
            return f"the running total's start `{shown}`: only one fp32 scalar zero start (0.0, tl.zeros((), dtype=tl.float32), tl.full((), 0, tl.float32)) is split"
        a.init = init
        updates = [s for s in inner if acc in targets(s)]
        if len(updates) != 1:
            return f"{acc} is updated {len(updates)} times in the loop; one `{acc} += tl.sum(e, axis=0)` is split"
        (update,) = updates
        after = inner[inner.index(update) + 1 :]
        readers = [s for s in after if acc in read(s)]
        if readers:
            return f"`{code(readers[0])}`: the running total {acc} is read after its update `{code(update)}` (an exclusive scan; the update must be the loop's last statement)"
        if after:
            return f"`{code(update)}`: the update of {acc} is not the loop's last statement"
        last = k.inner[-1]
        assert isinstance(last, cst.SimpleStatementLine)
        if len(last.body) != 1:
            return f"`{code(update)}`: the update shares its line with other statements"
        term = _sum_term(update, acc, self.roots)
        if term is None or acc in names_in(term):
            return f"`{code(update)}`: {acc} is updated by more than adding tl.sum(e, axis=0) of a value e free of it"
        a.update, a.term = last, term
        stepwise = in_loop | {var}
        for st in k.post:
            for s in smalls([st]):
                if read(s) & stepwise:
                    names = ", ".join(sorted(read(s) & stepwise))
                    return f"`{code(s)}`: reads {names} from the loop after it"
        return None

    def sliced(self) -> str | None:
        """The statements the term depends on: free of carried and of stores (the totals kernel
        recomputes the term from them)."""
        a, k = self.a, self.k
        assert a.term is not None and isinstance(a.loop, cst.For) and a.init is not None
        assert a.update is not None
        inner = smalls(k.inner)[:-1]
        body, needed = backward_slice(inner, set(names_in(a.term)))
        if a.acc in needed:
            via = next((s for s in body if a.acc in read(s)), None)
            shown = f" (through `{code(via)}`)" if via is not None else ""
            return f"`{code(a.term)}`: the added value depends on the running total {a.acc}{shown}"
        needed = (needed - {a.var}) | set(names_in(a.loop.iter)) | read(a.init)
        pre = [s for s in smalls(k.pre) if s is not a.init]
        head, _ = backward_slice(pre, needed)
        for s in head + body:
            for n in walk(s):
                if isinstance(n, cst.Call) and dotted(n.func).split(".")[-1] == "store":
                    return f"`{code(s)}`: the added value depends on a store"
        a.keep = {id(s) for s in head + body} | {id(a.init), id(a.update.body[0])}
        return None

    def flows(self) -> str | None:
        """carried reaches the stored values only, and only linearly."""
        a, roots = self.a, self.roots
        tainted = {a.acc}
        for s in smalls(self.k.inner)[:-1]:
            if not (read(s) & tainted):
                continue
            if isinstance(s, cst.Assign) and _linear(s.value, tainted, roots):
                tainted |= set(targets(s))
                continue
            call = s.value if isinstance(s, cst.Expr) else None
            if (
                isinstance(call, cst.Call)
                and dotted(call.func).split(".")[-1] == "store"
                and (value := arg(call, 1, "value")) is not None
                and _linear(value, tainted, roots)
                and not any(
                    set(names_in(x.value)) & tainted for x in call.args if x.value is not value
                )
            ):
                continue
            return f"`{code(s)}`: the running total {a.acc} is used other than linearly in a stored value (a segment starts it from the earlier segments' totals, summed in another order)"
        return None


def step_free(kdef: cst.FunctionDef, a: Analysis, roots: set[str]) -> bool:
    """STEP is a constexpr parameter read only as the loop's step (`range(..., ..., STEP)`)
    and as the extent of `tl.arange(0, STEP)`, every tl.arange in the kernel spans STEP and
    every load and store is masked:
    each step then covers the STEP elements it moves by, whatever power of two STEP is, so a
    wider STEP walks the same elements in fewer steps (tunables' "a loop steps by it" argument,
    stricter: no other extent)."""
    if a.step.isdigit() or not isinstance(a.loop, cst.For):
        return False
    it = a.loop.iter
    if not (isinstance(it, cst.Call) and len(it.args) >= 3 and not it.args[2].keyword):
        return False
    if not (isinstance(it.args[2].value, cst.Name) and it.args[2].value.value == a.step):
        return False
    allowed = {id(it.args[2].value)}
    for n in walk(kdef.body):
        if not isinstance(n, cst.Call):
            continue
        parts = dotted(n.func).split(".")
        at = {"load": 1, "store": 2}.get(parts[-1])
        if parts[0] in roots and at is not None and arg(n, at, "mask") is None:
            return False  # unmasked: correct only where steps end at K, which a wider one may not
        if parts[0] in roots and parts[-1] == "arange":
            ext = n.args[1].value if len(n.args) == 2 and not n.args[1].keyword else None
            if not (isinstance(ext, cst.Name) and ext.value == a.step and is_zero(n.args[0].value)):
                return False
            allowed.add(id(ext))
    reads = [n for n in walk(kdef.body) if isinstance(n, cst.Name) and n.value == a.step]
    return all(id(n) in allowed for n in reads)


def _scalar(e: cst.BaseExpression) -> bool:
    """A literal, or a tl.zeros / tl.full of the empty shape `()` or `[]`."""
    if not isinstance(e, cst.Call):
        return True
    shape = arg(e, 0, "shape")
    return isinstance(shape, cst.Tuple | cst.List) and not shape.elements


def _launcher(ctx: Ctx, la: Launch, kdef: cst.FunctionDef, a: Analysis, mem: Memory) -> str:
    if any(x.star for x in la.call.args):
        return "the launch passes *args or **kwargs"
    torch = ska._torch_alias(ctx.module)
    if torch is None:
        return "no `import torch` for the segment totals' torch.empty in the launcher"
    a.torch = torch
    args = bind(la.call, kdef)
    if a.k not in args:
        return f"the launch does not pass {a.k}"
    a.k_arg = code(args[a.k])
    if a.step.isdigit():
        a.step_arg = a.step
    elif a.step in args:
        a.step_arg = code(args[a.step])
    else:
        return f"the launch does not pass {a.step}"
    a.statement = ska._statement(la)
    if a.statement is None:
        return "the launch is not a statement of its own (the totals kernel's launch precedes it)"
    for e in (a.programs, a.k_arg, a.step_arg):
        if not ska._pure(cst.parse_expression(e)):
            return f"`{e}` may not be evaluated twice (the default SEG repeats it)"
    why, out = mem.launcher(ctx, la, torch)
    a.out = out
    return why


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    unfit, a.programs = launch_problem(ctx, la, kdef, count, "programs")
    if unfit:
        return unfit
    scan = _Scan(ctx, kdef, roots, a)
    why = scan.problem()
    if why:
        return why
    assert a.loop is not None
    mem = Memory(kdef, roots, a.var, a.step, scan.k.pre, scan.k.inner)
    why = mem.problem() or _launcher(ctx, la, kdef, a, mem)
    a.step_free = not why and step_free(kdef, a, roots)
    return why
