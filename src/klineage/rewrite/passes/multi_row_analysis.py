"""multi_row's analysis (not a pass): a file's one-row-per-program launches and whether each
kernel can take ROWS rows a program (rewrite/passes/multi_row.py says what is rewritten). It
sits in passes/ because it builds on rows_per_program's launcher helpers: at rewrite/ it would,
imported first, load the passes package and with it multi_row before its own names existed
(multi_row would then land in passes.BROKEN).

`analyse` finds each launch of a file's own @triton.jit kernel and records, per launch, the
grid's row count, the block (the one tl.arange bound) and `problem`: why the rewrite is not sound
for it (empty for a site). The kernel's operations must broadcast lane by lane on a [ROWS, B]
tile, its loops (column_tiling_analysis's checks, which follow them) carry per-row values only
as accumulators; `_row_dependent` names the values that depend on the program id
(a load or store that uses one gets `& row_ok`). No rewriting here. column_tiling_analysis
builds on the parts that do not read rows: `Launched`, `analyse_launches`, `launch_problem`,
`block_of`, `flows_from` and the call checks of `_Check`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from klineage.rewrite.base import dotted, is_triton_jit
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    _triton_alias,
    bind,
    code,
    constexprs,
    walk,
)

REDUCTIONS = {"sum", "max", "min", "argmax", "argmin", "xor_sum"}
# Scans along one axis: the row's block scan (axis 0) becomes a scan along the tile's block axis,
# each row (column) scanned on its own.
SCANS = {"cumsum", "cumprod"}
# tl functions that work lane by lane (shapes broadcast): safe on a [ROWS, B] tile.
ELEMENTWISE = {
    "abs",
    "ceil",
    "clamp",
    "cos",
    "div_rn",
    "erf",
    "exp",
    "exp2",
    "fdiv",
    "floor",
    "fma",
    "log",
    "log2",
    "maximum",
    "minimum",
    "rsqrt",
    "sigmoid",
    "sin",
    "sqrt",
    "sqrt_rn",
    "umulhi",
    "where",
    "cast",
    "multiple_of",
    "max_contiguous",
    "max_constancy",
    "zeros_like",
    "full_like",
    "rand",
    "randn",
    "randint",
    "static_assert",
    "static_print",
    "device_assert",
    "debug_barrier",
    "constexpr",
    "cdiv",
    "isnan",
    "isinf",
    "signbit",
    "tanh",
    "pow",
}
BUILTINS = {"float", "int", "bool", "min", "max", "abs"}  # on constexprs and literals


@dataclass
class Launched:
    """One launch of a file's own kernel, as an analysis (this one, column_tiling's) finds it."""

    launch: Launch
    kernel: str
    line: int
    function: str
    problem: str = ""  # why the rewrite is not sound for it ("" for a site)
    block: str = ""  # the launch's value of the arange bound
    # carried accumulators started from a literal: the Assign node -> the literal's Triton dtype
    # (widened to one start per program index: [1, BLOCK_N] columns, [ROWS, 1] rows)
    widen: dict[int, str] = field(default_factory=dict)


@dataclass
class Analysis(Launched):
    rows: str = ""  # the grid's row count


A = TypeVar("A", bound=Launched)


def _tl_roots(module: cst.Module) -> set[str]:
    """Names that refer to triton modules (tl, triton, libdevice...)."""
    out: set[str] = set()
    for n in walk(module):
        if isinstance(n, cst.Import):
            for a in n.names:
                if a.evaluated_name.startswith("triton"):
                    out.add((a.evaluated_alias or a.evaluated_name).split(".")[0])
        elif (
            isinstance(n, cst.ImportFrom)
            and n.module is not None
            and dotted(n.module).startswith("triton")
            and not isinstance(n.names, cst.ImportStar)
        ):
            for a in n.names:
                if a.evaluated_name in ("language", "libdevice", "math", "extra", "cuda"):
                    out.add(a.evaluated_alias or a.evaluated_name)
    return out


def _axis0(call: cst.Call) -> str | None:
    """Why a reduction cannot become axis=1 keep_dims (None: it can)."""
    for i, a in enumerate(call.args):
        key = a.keyword.value if a.keyword else ("axis" if i == 1 else "" if i == 0 else "?")
        if key in ("", "dtype", "propagate_nan", "tie_break_left", "reverse"):
            continue
        if key != "axis":
            return f"{code(call)}: argument {code(a)} (only axis 0 is rewritten)"
        v = a.value
        ok = (isinstance(v, cst.Integer) and v.value == "0") or (
            isinstance(v, cst.Name) and v.value == "None"
        )
        if (
            isinstance(v, cst.UnaryOperation)
            and isinstance(v.operator, cst.Minus)
            and isinstance(v.expression, cst.Integer)
        ):
            ok = v.expression.value == "1"  # axis=-1 of a 1-D tensor
        if not ok:
            return f"{code(call)}: reduces over axis {code(v)}, not the row's"
    return None


class _Check:
    """Walks a kernel (and its helpers) for what the rewrite cannot handle."""

    def __init__(self, module: cst.Module, roots: set[str], tile: str = "[ROWS, B]") -> None:
        self.roots = roots
        self.tile = tile  # the rewritten tile, for the message on a tl call of unknown shape
        self.helpers = {
            s.name.value: s
            for s in module.body
            if isinstance(s, cst.FunctionDef) and any(is_triton_jit(d) for d in s.decorators)
        }
        self.aranges: set[str] = set()

    def statements(self, fn: cst.FunctionDef) -> str | None:
        body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
        for st in body:
            if not isinstance(st, cst.SimpleStatementLine):
                return f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"
            for small in st.body:
                if not isinstance(
                    small,
                    cst.Assign | cst.AugAssign | cst.AnnAssign | cst.Expr | cst.Pass | cst.Return,
                ):
                    return f"a `{code(small)}` statement"
        return None

    def expressions(self, fn: cst.FunctionDef, skip: set[int]) -> str | None:
        """Why an expression in the kernel fn cannot be rewritten; calls whose id() is in skip
        (column_tiling's loop headers) are not checked."""
        for n in walk(fn.body):
            if isinstance(n, cst.Return):
                return "a return in the kernel"
            if isinstance(n, cst.Subscript):
                return f"indexing `{code(n)}` (a 2-D tile already?)"
            if isinstance(n, cst.Lambda | cst.IfExp | cst.ListComp | cst.GeneratorExp):
                return f"`{code(n)}`"
            if isinstance(n, cst.Call) and id(n) not in skip:
                why = self.call(n, helper=False)
                if why:
                    return why
        return None

    def helper(self, fn: cst.FunctionDef, seen: set[str]) -> str | None:
        """A helper is fine when it is straight-line and elementwise (no loads, reductions)."""
        why = self.statements(fn)
        if why:
            return f"helper {fn.name.value}: {why}"
        for n in walk(fn.body):
            if isinstance(n, cst.Subscript):
                return f"helper {fn.name.value}: indexing `{code(n)}`"
            if isinstance(n, cst.Call):
                why = self.call(n, helper=True, seen=seen | {fn.name.value})
                if why:
                    return f"helper {fn.name.value}: {why}"
        return None

    def call(self, n: cst.Call, helper: bool, seen: set[str] | None = None) -> str | None:
        callee = dotted(n.func)
        if isinstance(n.func, cst.Name):
            name = n.func.value
            if name in BUILTINS:
                return None
            if name in self.helpers:
                if name in (seen or set()):
                    return None
                return self.helper(self.helpers[name], (seen or set()) | {name})
            return f"a call to {name}, not a known elementwise function"
        if not isinstance(n.func, cst.Attribute):
            return f"a call `{code(n)}`"
        parts = callee.split(".") if callee else []
        last = n.func.attr.value
        if not parts or parts[0] not in self.roots:
            # a method of a value: only .to(...) is known to keep the shape
            return None if last == "to" else f"a method call `.{last}(...)`"
        if any(x in ("math", "extra", "libdevice") for x in parts[:-1]):
            return None  # tl.math.*, libdevice.*: elementwise
        if last in ELEMENTWISE:
            return None
        if helper:
            return f"{callee} in a helper (helpers must be elementwise)"
        if last == "program_id":
            axis = n.args[0].value if n.args else None
            if not (isinstance(axis, cst.Integer) and axis.value == "0") or len(n.args) != 1:
                return f"{code(n)}: a program id other than axis 0"
            return None
        if last == "arange":
            if len(n.args) != 2:
                return f"{code(n)}"
            self.aranges.add(code(n.args[1].value))
            return None
        if last in REDUCTIONS or last in SCANS:
            return _axis0(n)
        if last in ("load", "store"):
            return None
        if last in ("zeros", "full"):
            shape = n.args[0].value if n.args else None
            if not (isinstance(shape, cst.Tuple | cst.List) and len(shape.elements) == 1):
                return f"{code(n)}: only a 1-D shape (B,) is rewritten"
            return None
        if last.startswith("atomic_"):
            return f"{callee}: atomics"
        return f"{callee} (not known to work lane by lane on a {self.tile} tile)"


def _row_dependent(fn: cst.FunctionDef) -> set[str]:
    """Names whose value depends on the program id (through any chain of assignments)."""
    return flows_from(
        fn, lambda x: isinstance(x, cst.Call) and dotted(x.func).endswith("program_id"), True
    )


def flows_from(fn: cst.FunctionDef, seed: Callable[[cst.CSTNode], bool], updates: bool) -> set[str]:
    """Names assigned, through any chain of assignments, a value with a node under it for which
    seed holds or a name already found; with `updates`, also the names in an augmented
    assignment's target when the target has such a node (`x[pid] += v` taints x)."""
    found: set[str] = set()

    def reads(node: cst.CSTNode) -> bool:
        return any(seed(x) or (isinstance(x, cst.Name) and x.value in found) for x in walk(node))

    changed = True
    while changed:
        changed = False
        for n in walk(fn.body):
            if isinstance(n, cst.Assign | cst.AugAssign | cst.AnnAssign) and n.value is not None:
                targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                if reads(n.value) or (updates and isinstance(n, cst.AugAssign) and reads(n.target)):
                    for t in targets:
                        for x in walk(t):
                            if isinstance(x, cst.Name) and x.value not in found:
                                found.add(x.value)
                                changed = True
    return found


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def analyse_launches(
    source: str,
    kind: type[A],
    problem: Callable[[Ctx, Launch, cst.FunctionDef, set[str], int, A], str],
) -> tuple[Ctx, list[A]]:
    """The file's parsed context and an analysis of each launch of its own kernels, with
    problem(ctx, launch, kernel, triton roots, the kernel's launch count, the analysis)."""
    ctx = Ctx(source)
    roots = _tl_roots(ctx.module)
    counts: dict[str, int] = {}
    for la in ctx.launches:
        counts[la.kernel] = counts.get(la.kernel, 0) + 1
    out = []
    for la in ctx.launches:
        kdef = ctx.kernels.get(la.kernel)
        if kdef is None:
            continue
        a = kind(la, la.kernel, la.line, la.func.name.value)
        out.append(a)
        a.problem = problem(ctx, la, kdef, roots, counts[la.kernel], a)
    return ctx, out


def launch_problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, count: int, n: str
) -> tuple[str, str]:
    """Why the launch cannot take the kernel's two new trailing parameters and a cdiv grid
    ("" if it can), and its 1-D grid's count (`n` names it in the message)."""
    if len(kdef.decorators) != 1:
        return f"{la.kernel} has decorators besides @triton.jit (autotuned or heuristics)", ""
    if count > 1:
        return f"{la.kernel} is launched from {count} places", ""
    params = kdef.params
    if (
        params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.star_kwarg
        or params.kwonly_params
    ):
        return f"{la.kernel} has *args/**kwargs/keyword-only parameters", ""
    if any(p.default is not None for p in params.params) or params.posonly_params:
        return f"{la.kernel} has parameter defaults (new parameters would follow them)", ""
    grid = la.grid
    if not (
        isinstance(grid, cst.Tuple | cst.List)
        and len(grid.elements) == 1
        and isinstance(grid.elements[0], cst.Element)
    ):
        return f"grid `{code(grid)}` is not a literal 1-D tuple ({n},)", ""
    size = code(grid.elements[0].value)
    if _triton_alias(ctx.module) is None:
        return "no `import triton` for triton.cdiv in the launcher", size
    return "", size


def block_of(la: Launch, kdef: cst.FunctionDef, bound: str) -> tuple[str, str]:
    """The launch's value of the arange bound, and why there is none ("" if there is)."""
    args = bind(la.call, kdef)
    if bound in constexprs(kdef):
        if bound not in args:
            return "", f"the launch does not pass {bound}"
        return code(args[bound]), ""
    if bound.isdigit():
        return bound, ""
    return "", f"tl.arange(0, {bound}): the bound is not a constexpr parameter or literal"


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    # column_tiling's kernel checks, which follow loops (imported here: it imports this module)
    from klineage.rewrite.passes.column_tiling_analysis import _Kernel as _Loops

    unfit, a.rows = launch_problem(ctx, la, kdef, count, "n_rows")
    if unfit:
        return unfit
    k = _Loops(ctx, kdef, roots, unit="row", tile="[ROWS, B]")
    why = k.statements() or k.calls() or k.carried()
    if why:
        return why
    check = k.check
    if not any(
        isinstance(n, cst.Call) and dotted(n.func).endswith("program_id") for n in walk(kdef.body)
    ):
        return f"{la.kernel} does not read tl.program_id(0)"
    if len(check.aranges) != 1:
        return f"{la.kernel} has {len(check.aranges) or 'no'} block sizes ({', '.join(sorted(check.aranges))}); one is rewritten"
    a.block, unbound = block_of(la, kdef, next(iter(check.aranges)))
    if unbound:
        return unbound
    dep = _row_dependent(kdef)
    stores = 0
    for n in walk(kdef.body):
        if isinstance(n, cst.Call) and dotted(n.func).split(".")[-1] == "store" and n.args:
            if not _depends(n.args[0].value, dep):
                return (
                    f"`{code(n)}`: the pointer does not depend on the row (every program writes it)"
                )
            stores += 1
    if not stores:
        return f"{la.kernel} stores nothing that depends on its row"
    # The program id added once, with unit stride, to every pointer that reads it: the program
    # owns a column and its loop strides down the rows. Packed "rows" there are adjacent columns,
    # column_tiling's tile the other way round. On an H100 (2026-12-06) multi_row made the naive
    # column mean 0.86x (one column a program on its tall regimes, by the programs floor), and
    # its regime dispatch then kept column_tiling + split_k (12.6x on the H200) from the run.
    pointers = [
        n.args[0].value
        for n in walk(kdef.body)
        if isinstance(n, cst.Call)
        and dotted(n.func).split(".")[-1] in ("load", "store")
        and n.args
        and _depends(n.args[0].value, dep)
    ]
    if pointers and all(k.unit_stride(p) is None for p in pointers):
        return (
            f"{la.kernel}: the program id enters every pointer with unit stride (a walk down a "
            "column: column_tiling's site, whose tile is coalesced along the columns)"
        )
    a.widen = k.widen
    return ""


def _depends(node: cst.CSTNode, dep: set[str]) -> bool:
    return any(
        (isinstance(x, cst.Name) and x.value in dep)
        or (isinstance(x, cst.Call) and dotted(x.func).endswith("program_id"))
        for x in walk(node)
    )
