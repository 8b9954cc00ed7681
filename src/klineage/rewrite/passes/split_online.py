"""An online walk and the write walk after it, split over segments of the walked dimension.

A softmax down the columns (or along rows) whose programs are few and whose walks are long
(the held-out column softmax's tall regime: 1536 columns make 12 column tiles, each walking
65536 rows twice, 1-2% of the floor on an H100) leaves most of the GPU idle; split_k's split of a
reduction over more programs does not apply, because the walk's result (the running maximum and
the rescaled sum) is needed by a second walk that writes. Forward, on a kernel whose body is
simple statements, an online walk (online_softmax's form: `Mn = tl.maximum(M, tl.max(E, ...))`,
a reference `R = g(Mn)`, `S = S * EXP(...) + tl.sum(EXP(...), ...)`, `M = Mn`) and then a write
walk with the same header `for v in range(0, K, STEP)` that reads M and S, launched over a literal
grid `(n,)`, the kernel becomes two, each launched over `(n, SPLIT)`:

- `<kernel>_stats`: the statements before the walks and the online walk over chunk s of K
  (`range(k_lo, tl.minimum(k_lo + k_chunk, K), STEP)`, k_chunk a multiple of STEP, as split_k's
  chunks), storing its partial M and S to an fp32 workspace, one slot per program;
- `<kernel>`: the statements before the walks, then M and S combined from the SPLIT partials of
  its program (M = the maximum of the partials' M; S = the sum of each partial S times EXP of its
  M against the combined reference R, the walk's own rescale with the partial's M for M), then
  the write walk over its chunk.

SPLIT = `max(1, min(512, cdiv(4 * 132, n), cdiv(K, STEP)))`, split_k's default (params
"programs", "max_split" and "split" as split_k's; `scaled` halves or doubles it).

Why it is sound: the chunks partition the walk's steps (split_k's argument), so each partial is
the online walk of its chunk from the identity (M from -inf, S from 0, checked), and the rescale
identity exp(a - c) = exp(a - b) * exp(b - c) that makes the online walk correct makes the
combine equal to the walk over all chunks (an empty chunk's -inf and 0 change nothing, and the
reference's guard keeps an all -inf column's sum 0, as the walk did); each write program then
holds the M and S the original's write walk read, and writes its own chunk of the rows, which
together are the original's. Up to rounding in S's order, which the gate's tolerance judges.
Skipped, with the reason: other statements after the walks, a header other than
`range(0, K, STEP)`, M or S not started at -inf and 0, a shape of M the code does not state, a
launch that is not a statement of its own, grids other than a literal `(n,)`. Forward only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import (
    ForwardOnly,
    RewriteResult,
    Site,
    dotted,
    launched,
    names_under,
    reads_renamed,
)
from klineage.rewrite.passes import tile_rewrite
from klineage.rewrite.passes.multi_row_analysis import (
    Launched,
    analyse_launches,
    launch_problem,
)
from klineage.rewrite.passes.online_softmax_analysis import Online, _online
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    _triton_alias,
    assignments,
    bind,
    bound_names,
    code,
    names_in,
    walk,
)
from klineage.rewrite.passes.split_k import (
    SMS,
    WAVES,
    params_problem,
    scaled_split,
    split_count,
)
from klineage.rewrite.passes.split_k_analysis import _pure, _statement, _torch_alias
from klineage.rewrite.passes.tile_accumulator_analysis import Shapes, last_assignment
from klineage.rewrite.registry import register


@dataclass
class Analysis(Launched):
    programs: str = ""  # the grid's count
    online: Online | None = None
    write: cst.For | None = None
    k: str = ""  # the walks' stop (a kernel parameter)
    step: str = ""
    k_arg: str = ""
    step_arg: str = ""
    shape: tuple[str, ...] = ()  # M's shape (S's too)
    numel_arg: str = "1"  # M's element count, in the launcher's terms
    device: str = ""  # a tensor argument of the launch (the workspace goes on its device)
    torch: str = "torch"
    statement: cst.SimpleStatementLine | None = None


def _header(loop: cst.For) -> tuple[str, str] | None:
    """(K, STEP) of `for v in range(0, K, STEP)`."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) == "range" and len(it.args) == 3):
        return None
    lo, hi, step = (a.value for a in it.args)
    if not (isinstance(lo, cst.Integer) and lo.value == "0") or any(a.keyword for a in it.args):
        return None
    return code(hi), code(step)


def _start(body: list[cst.BaseStatement], name: str) -> cst.BaseExpression | None:
    """The value `name` starts from: its last top-level assignment in body."""
    found = last_assignment(body, name)
    return found[1].value if found is not None else None


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    unfit, a.programs = launch_problem(ctx, la, kdef, count, "n")
    if unfit:
        return unfit
    body = [cast(cst.BaseStatement, st) for st in kdef.body.body]
    loops = [k for k, st in enumerate(body) if not isinstance(st, cst.SimpleStatementLine)]
    if len(loops) != 2 or loops[1] != loops[0] + 1 or loops[1] != len(body) - 1:
        return f"{la.kernel}: not simple statements, then two walks, and nothing after them"
    k = loops[0]
    first, write = body[k], body[k + 1]
    if not (isinstance(first, cst.For) and isinstance(write, cst.For)):
        return f"{la.kernel}: the walks are not for loops"
    online = _online(la.kernel, kdef, k)
    if isinstance(online, str):
        return f"{la.kernel}: {online}"
    a.online, a.write = online, write
    header = _header(first)
    if (
        header is None
        or code(first.iter) != code(write.iter)
        or code(first.target) != code(write.target)
    ):
        return f"{la.kernel}: the walks' headers are not one `range(0, K, STEP)`"
    a.k, a.step = header
    peak, total = online.peak, online.total
    m0, s0 = _start(body[:k], peak), _start(body[:k], total)
    if m0 is None or "-inf" not in code(m0).replace(" ", "") or "float" not in code(m0):
        return f"{la.kernel}: {peak} does not start at -inf"
    if s0 is None or not any(z in code(s0) for z in ("0.0", "zeros")) or "inf" in code(s0):
        return f"{la.kernel}: {total} does not start at 0"
    reads = set(names_under(write))
    if not {peak, total} <= reads or {peak, total} & bound_names(write):
        return f"{la.kernel}: the write walk does not read {peak} and {total} alone"
    if not any(
        isinstance(n, cst.Call) and dotted(n.func).split(".")[-1] == "store" for n in walk(write)
    ):
        return f"{la.kernel}: the second walk stores nothing"
    axes = [
        code(n.args[0].value) if n.args else "0"
        for n in walk(kdef)
        if isinstance(n, cst.Call)
        and dotted(n.func).split(".")[-1] in ("program_id", "num_programs")
    ]
    if any(x != "0" for x in axes):
        return f"{la.kernel} reads a second grid axis"
    shapes = Shapes(kdef)
    shape = shapes.of(m0)
    if shape is None or any(not shapes.constant(d) for d in shape):
        return f"{la.kernel}: the shape of {peak} is not stated by constexprs (`{code(m0)}`)"
    a.shape = shape
    args = bind(la.call, kdef)
    dims = []
    for d in shape:
        if d == "1":
            continue
        if d.isdigit():
            dims.append(d)
        elif d in args:
            dims.append(f"({code(args[d])})")
        else:
            return f"the launch does not pass {d}"
    a.numel_arg = " * ".join(dims) or "1"
    if a.k not in args or (not a.step.isdigit() and a.step not in args):
        return f"the launch does not pass {a.k} and {a.step}"
    a.k_arg = code(args[a.k])
    a.step_arg = a.step if a.step.isdigit() else code(args[a.step])
    stores = [
        n
        for n in walk(write)
        if isinstance(n, cst.Call) and dotted(n.func).split(".")[-1] == "store"
    ]
    params = {p.name.value for p in kdef.params.params}
    out = [n for n in names_under(stores[0].args[0].value) if n in params and n in args]
    if not out:
        return f"{la.kernel}: the write walk's store is not through a pointer parameter"
    a.device = f"{code(args[out[0]])}.device"
    a.torch = _torch_alias(ctx.module) or ""
    if not a.torch:
        return "no `import torch` for the workspace in the launcher"
    a.statement = _statement(la)
    if a.statement is None:
        return "the launch is not a statement of its own (the second launch follows it)"
    for e in (a.programs, a.k_arg, a.step_arg, a.numel_arg):
        if not _pure(cst.parse_expression(e)):
            return f"`{e}` may not be evaluated twice (the launcher repeats it)"
    return ""


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def _renamed(e: cst.BaseExpression, names: dict[str, str]) -> str:
    return code(reads_renamed(e, names))


@dataclass
class _Slots:
    """Where program (i, s)'s partials live in the workspace, and M's shape around a load."""

    tl: str
    shape: tuple[str, ...]

    @property
    def numel(self) -> str:
        return " * ".join(d for d in self.shape if d != "1") or "1"

    def at(self, s: str) -> str:
        base = f"{s} * {self.tl}.num_programs(0) + {self.tl}.program_id(0)"
        if self.numel == "1":
            return base
        return f"({base}) * ({self.numel}) + {self.tl}.arange(0, {self.numel})"

    def flat(self, v: str) -> str:
        return v if self.numel == "1" else f"{self.tl}.reshape({v}, ({self.numel},))"

    def back(self, v: str) -> str:
        if self.numel == "1":
            return v
        dims = ", ".join(self.shape) + ("," if len(self.shape) == 1 else "")
        return f"{self.tl}.reshape({v}, ({dims}))"


def _indented(lines: list[str]) -> str:
    return "\n".join("    " + x for block in lines for x in block.split("\n"))


def _walk_text(loop: cst.For, header: str) -> str:
    return code(loop.with_changes(iter=cst.parse_expression(header), leading_lines=[])).rstrip()


def _kernels(ctx: Ctx, a: Analysis, stats_name: str) -> tuple[list[cst.BaseStatement], str, str]:
    """The stats kernel and the write kernel (the module docstring), and the names of the
    workspace parameter and of its half's length the launch passes."""
    la, o, write = a.launch, a.online, a.write
    assert o is not None and write is not None
    kdef = ctx.kernels[la.kernel]
    tl = tile_rewrite.tl_alias(ctx.module) or "tl"
    used = set(names_in(ctx.module)) | {stats_name}
    ws, n_ws, seg, seg_len, seg_lo, slot, part, part_peak = (
        tile_rewrite.fresh(x, used)
        for x in ("stats_ptr", "n_stats", "seg", "seg_len", "seg_lo", "slot", "part", "part_peak")
    )
    at = _Slots(tl, a.shape)
    body = [cast(cst.BaseStatement, st) for st in kdef.body.body]
    k = body.index(o.loop)
    prologue = [code(st).strip("\n") for st in body[:k]]
    docstring = []
    if prologue and tile_rewrite._is_docstring(body[0]):
        docstring, prologue = prologue[:1], prologue[1:]
    chunked = f"range({seg_lo}, {tl}.minimum({seg_lo} + {seg_len}, {a.k}), {a.step})"
    segment = [
        f"{seg} = {tl}.program_id(1)",
        f"{seg_len} = {tl}.cdiv({tl}.cdiv({a.k}, {tl}.num_programs(1)), {a.step}) * {a.step}",
        f"{seg_lo} = {seg} * {seg_len}",
    ]
    peak, total = o.peak, o.total
    stmts = [cast(cst.SimpleStatementLine, x).body[0] for x in o.loop.body.body[-4:-1]]
    s_max, s_ref, s_sum = (cast(cst.Assign, x) for x in stmts)
    new, ref = code(s_max.targets[0].target), code(s_ref.targets[0].target)
    rescale = cast(cst.BinaryOperation, cast(cst.BinaryOperation, s_sum.value).left).right
    signature = code(kdef.params).rstrip()
    params = f"{signature}, {ws}, {n_ws}" if signature else f"{ws}, {n_ws}"
    decorators = "".join(code(d) for d in kdef.decorators)
    stats_doc = (
        f'"""{la.kernel}\'s online walk over segment {seg} of {a.k}: its partial {peak} and '
        f'{total} (split_online)."""'
    )
    stats_body = [stats_doc, *prologue, *segment, _walk_text(o.loop, chunked)]
    stats_body += [
        f"{slot} = {at.at(seg)}",
        f"{tl}.store({ws} + {slot}, {at.flat(peak)})",
        f"{tl}.store({ws} + {n_ws} + {slot}, {at.flat(total)})",
    ]
    combine = [
        f"# split_online: {peak} and {total} combined from every segment's partials",
        f"for {part} in range(0, {tl}.num_programs(1)):",
        f"    {slot} = {at.at(part)}",
        f"    {peak} = {tl}.maximum({peak}, {at.back(f'{tl}.load({ws} + {slot})')})",
        f"{ref} = {_renamed(s_ref.value, {new: peak})}",
        f"for {part} in range(0, {tl}.num_programs(1)):",
        f"    {slot} = {at.at(part)}",
        f"    {part_peak} = {at.back(f'{tl}.load({ws} + {slot})')}",
        f"    {total} += {at.back(f'{tl}.load({ws} + {n_ws} + {slot})')} * "
        f"{_renamed(rescale, {peak: part_peak})}",
    ]
    write_body = [*docstring, *prologue, *segment, *combine, _walk_text(write, chunked)]
    text = (
        f"{decorators}def {stats_name}({params}):\n{_indented(stats_body)}\n\n\n"
        f"{decorators}def {la.kernel}({params}):\n{_indented(write_body)}\n"
    )
    first, second = cst.parse_module(text).body
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    kernels = [first.with_changes(leading_lines=kdef.leading_lines)]
    return [*kernels, second.with_changes(leading_lines=blank)], ws, n_ws


def rewrite(ctx: Ctx, a: Analysis, p: dict[str, Any]) -> str:
    la = a.launch
    assert a.online is not None and a.statement is not None
    kdef = ctx.kernels[la.kernel]
    tr = _triton_alias(ctx.module) or "triton"
    stats_name = tile_rewrite.fresh(f"{la.kernel}_stats", set(names_in(ctx.module)))
    kernels, ws, n_ws = _kernels(ctx, a, stats_name)
    launcher_names = set(names_in(la.func)) | set(assignments(ctx.module))
    split = tile_rewrite.fresh("SEGMENTS", launcher_names)
    workspace = tile_rewrite.fresh("stats", launcher_names | {split})
    count = f"{split} * {a.programs} * {a.numel_arg}"
    comment = (
        f"# split_online: {la.kernel}'s walks over {a.k_arg} in {split} segments a program (about "
        f"{WAVES}x the {SMS} SMs of an H200 in all); {stats_name} walks each for its partial "
        f"{a.online.peak} and {a.online.total}, {la.kernel} combines them and writes its segment"
    )
    first = cst.parse_statement(
        f"{split} = {split_count(a.programs, a.k_arg, a.step_arg, tr, p)[0]}"
    )
    first = first.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(comment))])
    alloc = cst.parse_statement(
        f"{workspace} = {a.torch}.empty(2 * {count}, device={a.device}, dtype={a.torch}.float32)"
    )
    grid = cst.parse_expression(f"({a.programs}, {split})")
    extra = [tile_rewrite._kw(ws, workspace), tile_rewrite._kw(n_ws, count)]
    new_call = tile_rewrite._with_args(tile_rewrite.with_grid(la.call, grid), extra)
    stats_call = new_call.with_changes(
        func=cast(cst.Subscript, new_call.func).with_changes(value=cst.Name(stats_name))
    )
    stats_line = cst.SimpleStatementLine([cst.Expr(stats_call)])
    edit = tile_rewrite.Relaunch(
        la.call,
        lambda _: new_call,
        lambda st: cst.FlattenSentinel([first, alloc, stats_line, st]),
        kdef,
        cst.FlattenSentinel(kernels),
    )
    return ctx.module.visit(edit).code


@register
class SplitOnline(ForwardOnly):
    NAME = "split_online"
    DESCRIPTION = (
        "Split an online walk (running maximum and rescaled sum) and the write walk after it "
        "over segments of the walked dimension: grid (n, SPLIT); a first kernel walks each "
        "segment for its partial maximum and sum, the second combines every segment's partials "
        "by the walk's own rescale and writes its segment. Few programs with long walks (a tall "
        "softmax down columns) fill the GPU."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    BY_PROGRAMS = True
    ANCHOR = "an online walk, then a write walk with the same `range(0, K, STEP)`, launched over a literal grid (n,)"

    def forward_sites(self, source: str) -> list[Site]:
        return self.launch_sites(
            lambda: analyse(source)[1],
            lambda a: (
                f"{a.kernel}: {a.programs} programs, each walking {a.k_arg} twice (online, then writing)",
                {"kernel": a.kernel, "k": a.k_arg},
            ),
        )

    def why_not(self, source: str) -> list[str]:
        return tile_rewrite.why_not(self, analyse, source)

    def scaled(self, params: dict[str, Any], factor: float) -> dict[str, Any] | None:
        return scaled_split(params, factor)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            ctx, found = analyse(source)
            a = launched(found, site)
            if isinstance(a, RewriteResult):
                return a
            bad = params_problem(p, expressions=False)
            if bad:
                return RewriteResult.skip(bad, site)
            out = rewrite(ctx, a, p)
            return RewriteResult(
                True,
                f"{a.kernel}: walks split into segments of {a.k_arg} (grid ({a.programs}, SPLIT))",
                out,
                site,
            )

        return self.safe(run)
