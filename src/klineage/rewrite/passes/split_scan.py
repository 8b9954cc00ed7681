"""Split-scan: a row scan's serial loop split into SEG segments over a second program axis.

A row scan (a prefix or suffix cumsum) written one program per row, each program walking its
row in a loop of blocks and carrying the running total, leaves most SMs idle when rows are few
and long: the held-out reverse cumsum's 384 rows of 200000 columns are 384 programs of 3125
dependent steps each, under 3 programs per SM of an H200. The cumsum expert's optimization 5
(`_cumsum_chunk_sums_kernel`, then `_cumsum_looped_kernel` with HAS_PREFIX) splits each row
into chunks over programs: a first kernel writes each chunk's fp32 sum, and the scan of a chunk
starts its carried total from the sum of the chunks before it.

Forward, on a kernel whose program runs `for v in range(0, K, STEP)` (or tl.range, its keywords
kept) carrying one fp32 running total `carried`, started from a scalar zero and updated last in
the loop by `carried += tl.sum(e, axis=0)` with e free of it, the stores in the loop reading it
before the update (split_scan_analysis.py, split_scan_memory.py say exactly what is proven):
the grid `(n,)` becomes `(n, SEG)`; program (i, s) reads `seg = tl.program_id(1)` and runs the
loop over segment s only, `range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, K), STEP)`
with `seg_len` (elements, a kernel argument) a whole number of steps, and, when HAS_PREFIX,
adds to carried's start the tl.sum of
the masked load of `totals + tl.program_id(0).to(tl.int64) * n_seg + tl.arange(0, SEG_P2)`,
mask `< seg`: the totals of segments 0..s-1 in a fixed order (deterministic, no atomics, no
program waits on another). A second kernel, `_split_scan_totals_<kernel>`, made from the same
kernel (the statements before the loop and in it that e depends on, the same loop over the
segment, carried's start and update, no stores), writes carried's value at its segment's end
to `totals[i, s]` (an fp32 `torch.empty((n, SEG))` the launcher allocates on an output's
device). Both kernels take their step from one launcher local, `SCAN_STEP`: the segments are
whole steps of it, so the two must agree (a size read elsewhere in the launcher is one that
tunables does not table per kernel; before 2026-12-07 each kernel's step could be tabled
apart, and the two autotuners could choose two steps and split a row two ways). Where STEP
is free (read only as the loop's step and as the extent of every `tl.arange(0, STEP)`, every
load and store masked: split_scan_analysis.step_free), `SCAN_STEP = max(STEP, min(params["chunk"] (4096, the cumsum
expert's looped tile), next_power_of_2(K)))`: a wider step walks the same elements. The
launcher then computes SEG = params["segments"], else
`max(1, min(cdiv(per_sm * 132, max(1, n)), cdiv(K, SCAN_STEP), most))` (per_sm =
params["programs_per_sm"], 8: about 8 programs for each of an H200's 132 SMs; most =
params["max_segments"], 64), then `seg_len = SCAN_STEP * max(1, cdiv(cdiv(K, SCAN_STEP), SEG))`
and `SEG = max(1, cdiv(K, seg_len))`, so no segment is empty; it launches the totals kernel
only when SEG > 1, then the scan kernel
with HAS_PREFIX = SEG > 1 and SEG_P2 = next_power_of_2(SEG). At SEG == 1 the scan kernel runs
the original loop from the original start: the same result.

Why it is sound: seg_len is a multiple of the step both kernels take, so the segments partition the loop's steps in
order, each step in exactly one segment with the same loop value, and each step's body runs
unchanged (masks kept); nothing but carried is carried from step to step, so a step computes
what it did, given carried; carried starts each segment at the fp32 sum of every term the
original loop had added before that segment's first step (the totals kernel computes those
terms from the same statements and inputs, then they are added in another order, which the
gate's float64-based tolerance accepts, as for split_k's sums), and carried reaches the stored
values only linearly. The segments of a row run concurrently, so what they read and write is
checked (split_scan_memory.py): stores only inside the loop, each step writing a window of at
most STEP elements that moves by STEP each step (no two steps write one address), through a
tensor allocated for this launch alone that no load reads, so neither the totals kernel nor
any segment sees anything another wrote. Skipped, with the reason: an exclusive scan (carried
read after its update), two carried values, an update that is not `+= tl.sum(e)` of a value
free of carried, a 2-D grid, no loop or a while loop, a loop not starting at 0, stores outside
the loop or not shown apart, atomics, branches, nested loops, jit helpers, autotuning.

Forward only: no backward direction (the cumsum expert's split has its chunk sums kernel
written apart, not this pass's shape, and undoing it would have to find that kernel).
"""

from __future__ import annotations

import textwrap
from typing import Any

import libcst as cst

from klineage.rewrite.base import ForwardOnly, RewriteResult, Site, launched
from klineage.rewrite.passes import tile_rewrite
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    _triton_alias,
    assignments,
    bind,
    names_in,
    undefined_skip,
)
from klineage.rewrite.passes.split_k import SMS, _comments
from klineage.rewrite.passes.split_scan_analysis import Analysis, analyse
from klineage.rewrite.registry import register

# Programs per SM the default SEG aims at (the cumsum expert's PROGRAMS_PER_SM), and its cap
# on segments a row (the expert's few_rows regime, 128 rows of 32 tiles, splits 8 ways).
PROGRAMS_PER_SM = 8
MAX_SEGMENTS = 64
# The step a split walk takes, where the kernel allows any (step_free): the cumsum expert's
# LOOP_BLOCK_N, 4096 elements (8 KB of bf16) a step, or the row's next power of two if shorter.
# The naive's 64 moved 128 bytes a step: on an H100 the split walk kept at that step ran the
# long rows at 5.6% of the floor, 21% once each kernel's step was tabled apart (2026-12-06;
# unsound, docs/REWRITES.md), with one segment a row.
CHUNK = 4096


def _lines(lines: list[cst.BaseStatement], keep: set[int]) -> list[cst.BaseStatement]:
    """The simple statement lines of `lines` holding a small statement in keep, only those."""
    out: list[cst.BaseStatement] = []
    for line in lines:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        body = [s for s in line.body if id(s) in keep]
        if not body:
            continue
        if len(body) != len(line.body):
            body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            line = line.with_changes(body=body)
        out.append(line)
    return out


def _kernels(
    a: Analysis, kdef: cst.FunctionDef, tl: str, n: dict[str, str]
) -> tuple[cst.FunctionDef, cst.FunctionDef]:
    """The scan kernel over its segment, and the totals kernel (named n["kernel"])."""
    loop = a.loop
    assert isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call)
    assert isinstance(kdef.body, cst.IndentedBlock) and isinstance(loop.body, cst.IndentedBlock)
    seg, seg_len = n["seg"], n["seg_len"]
    args = list(loop.iter.args)
    lo = cst.parse_expression(f"{seg} * {seg_len}")
    hi = cst.parse_expression(f"{tl}.minimum({seg} * {seg_len} + {seg_len}, {a.k})")
    args[0], args[1] = args[0].with_changes(value=lo), args[1].with_changes(value=hi)
    split = loop.with_changes(iter=loop.iter.with_changes(args=args))
    prologue = [cst.parse_statement(f"{seg} = {tl}.program_id(1)")]
    body = list(kdef.body.body)
    at = body.index(loop)

    # the scan kernel: the loop over the segment, carried started from the earlier totals
    comment = (
        f"split_scan: program (i, s) runs segment s of the loop over {a.k} ({seg_len} "
        f"elements, whole steps of {a.step}), {a.acc} started from the fp32 totals of segments "
        "0..s-1"
    )
    first = prologue[0].with_changes(leading_lines=_comments(comment))
    prefix = cst.parse_statement(
        f"if {n['HAS_PREFIX']}:\n"
        f"    {n['earlier']} = {tl}.arange(0, {n['SEG_P2']})\n"
        f"    {n['at']} = {n['totals']} + {tl}.program_id(0).to({tl}.int64) * {n['n_seg']} + {n['earlier']}\n"
        f"    {a.acc} += {tl}.sum({tl}.load({n['at']}, mask={n['earlier']} < {seg}, other=0.0), axis=0)\n"
    )
    why = "the totals of the segments before this one, added in segment order"
    prefix = prefix.with_changes(leading_lines=_comments(f"split_scan: {why}"))
    scan_body = tile_rewrite.after_docstring(
        kdef.body.with_changes(body=[*body[:at], prefix, split, *body[at + 1 :]]),
        [first],
    )
    annotation = tile_rewrite.constexpr(kdef, tl)
    new = [cst.Param(cst.Name(n[x])) for x in ("totals", "n_seg", "seg_len")]
    flags = [cst.Param(cst.Name(n[x]), annotation=annotation) for x in ("SEG_P2", "HAS_PREFIX")]
    params = kdef.params.with_changes(
        params=tile_rewrite.with_params(kdef.params.params, new + flags)
    )
    scan = kdef.with_changes(body=scan_body, params=params)

    # the totals kernel: what the loop adds to carried over the segment, stored
    said = (
        f"split_scan's first kernel: {n['totals']}[i, s] = the fp32 sum of what "
        f"{kdef.name.value}'s loop adds to {a.acc} over segment s of row i (program (i, s)), "
        "from the statements that value depends on."
    )
    doc = '"""' + "\n    ".join(textwrap.wrap(said, 88)) + '"""'
    store = (
        f"{tl}.store({n['totals']} + {tl}.program_id(0).to({tl}.int64) * {n['n_seg']} + {seg}, "
        f"{a.acc})"
    )
    inner = _lines(list(loop.body.body), a.keep)
    totals_loop = split.with_changes(body=loop.body.with_changes(body=inner))
    totals_body = [
        cst.parse_statement(doc),
        *prologue,
        *_lines(body[:at], a.keep),
        totals_loop,
        cst.parse_statement(store),
    ]
    totals = kdef.with_changes(
        name=cst.Name(n["kernel"]),
        body=kdef.body.with_changes(body=totals_body),
        params=kdef.params.with_changes(params=tile_rewrite.with_params(kdef.params.params, new)),
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
    )
    return scan, totals


def _segments(a: Analysis, tr: str, p: dict[str, Any], step: str) -> tuple[str, str]:
    """SEG's expression and what the launcher comment says of it."""
    if "segments" in p:
        return str(p["segments"]), "SEG given."
    per_sm = p.get("programs_per_sm", PROGRAMS_PER_SM)
    most = p.get("max_segments", MAX_SEGMENTS)
    value = (
        f"max(1, min({tr}.cdiv({per_sm} * {SMS}, max(1, {a.programs})), "
        f"{tr}.cdiv({a.k_arg}, {step}), {most}))"
    )
    why = (
        f"SEG: about {per_sm} programs for each of the {SMS} SMs of an H200, at least "
        f"one step and at most {most} segments a row."
    )
    return value, why


def _step_arg(call: cst.Call, kdef: cst.FunctionDef, step: str, value: str) -> cst.Call:
    """The launch with the argument bound to the kernel's `step` parameter set to `value`."""
    target = bind(call, kdef)[step]
    args = [
        x.with_changes(value=cst.parse_expression(value)) if x.value is target else x
        for x in call.args
    ]
    return call.with_changes(args=args)


def rewrite(ctx: Ctx, a: Analysis, p: dict[str, Any]) -> str | RewriteResult:
    la = a.launch
    kdef = ctx.kernels[la.kernel]
    tr = _triton_alias(ctx.module)
    assert tr is not None and a.statement is not None
    tl = tile_rewrite.tl_alias(ctx.module) or f"{tr}.language"
    launcher = set(names_in(la.func)) | set(assignments(ctx.module))
    chunk = p.get("chunk", CHUNK) if a.step_free else 0
    # The step both kernels take, one launcher local (tunables lifts no size read elsewhere):
    # the segments are whole steps of it, so a step tabled apart in each kernel would split
    # the rows two ways. A literal step in the kernel is fixed already.
    wide = None if a.step.isdigit() else tile_rewrite.fresh("SCAN_STEP", launcher)
    step = wide or a.step_arg
    value, why = _segments(a, tr, p, step)
    if isinstance(p.get("segments"), str):
        bad = undefined_skip(
            value, ctx.module, la.func, Site("split_scan", "forward", 0, 0, "", "")
        )
        if bad is not None:
            return bad
    used = set(names_in(kdef)) | {x.name.value for x in kdef.params.params}
    n = {
        x: tile_rewrite.fresh(x, used)
        for x in ("totals", "n_seg", "SEG_P2", "HAS_PREFIX", "seg", "seg_len")
    }
    used |= set(n.values())
    n["earlier"] = tile_rewrite.fresh("earlier", used)
    n["at"] = tile_rewrite.fresh("at", used | {n["earlier"]})
    n["kernel"] = tile_rewrite.fresh(f"_split_scan_totals_{la.kernel}", set(names_in(ctx.module)))
    launcher |= {wide} if wide else set()
    seg = tile_rewrite.fresh("SEG", launcher)
    length = tile_rewrite.fresh("seg_len", launcher)
    totals = tile_rewrite.fresh("seg_totals", launcher)
    total_steps = f"{tr}.cdiv({a.k_arg}, {step})"
    comment = (
        f"split_scan: each row's loop over {a.k_arg} split into {seg} segments of {length} "
        f"elements (whole steps of {step}) over a second grid axis; {n['kernel']} writes each "
        f"segment's fp32 total to {totals}, from which a segment's scan starts (none when "
        f"{seg} == 1). {why}"
    )
    if wide and chunk:
        comment += (
            f" {wide}: the step of both kernels, at least {a.step_arg} and up to {chunk} "
            "elements (the row's next power of two if shorter)."
        )
    lines = [
        cst.parse_statement(f"{seg} = {value}"),
        cst.parse_statement(f"{length} = {step} * max(1, {tr}.cdiv({total_steps}, {seg}))"),
        cst.parse_statement(f"{seg} = max(1, {tr}.cdiv({a.k_arg}, {length}))"),
        cst.parse_statement(
            f"{totals} = {a.torch}.empty(({a.programs}, {seg}), dtype={a.torch}.float32, device={a.out}.device)"
        ),
    ]
    grid = cst.parse_expression(f"({a.programs}, {seg})")
    common = [
        tile_rewrite._kw(n["totals"], totals),
        tile_rewrite._kw(n["n_seg"], seg),
        tile_rewrite._kw(n["seg_len"], length),
    ]
    call = la.call
    if wide:
        bound = (
            f"max({a.step_arg}, min({chunk}, {tr}.next_power_of_2({a.k_arg})))"
            if chunk
            else a.step_arg
        )
        lines.insert(0, cst.parse_statement(f"{wide} = {bound}"))
        call = _step_arg(call, kdef, a.step, wide)
    lines[0] = lines[0].with_changes(leading_lines=_comments(comment))
    assert isinstance(call.func, cst.Subscript)
    first = tile_rewrite.with_grid(call, grid)
    assert isinstance(first.func, cst.Subscript)
    first = first.with_changes(func=first.func.with_changes(value=cst.Name(n["kernel"])))
    first = tile_rewrite._with_args(first, common)
    guarded = cst.If(
        test=cst.parse_expression(f"{seg} > 1"),
        body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(first)])]),
    )
    flags = [
        tile_rewrite._kw(n["SEG_P2"], f"{tr}.next_power_of_2({seg})"),
        tile_rewrite._kw(n["HAS_PREFIX"], f"{seg} > 1"),
    ]
    new_call = tile_rewrite._with_args(tile_rewrite.with_grid(call, grid), common + flags)
    scan, totals_def = _kernels(a, kdef, tl, n)
    edit = tile_rewrite.Relaunch(
        la.call,
        lambda _: new_call,
        lambda st: cst.FlattenSentinel([*lines, guarded, st]),
        kdef,
        cst.FlattenSentinel([scan, totals_def]),
    )
    return ctx.module.visit(edit).code


@register
class SplitScan(ForwardOnly):
    NAME = "split_scan"
    DESCRIPTION = (
        "Split a row scan's serial loop (a prefix or suffix cumsum walking its row in blocks "
        "with a carried running total, one program per row: too few programs when rows are few "
        "and long) into SEG segments over a second grid axis: a first Triton kernel writes each "
        "segment's fp32 total, and program (row, s) scans segment s starting from the totals of "
        "segments 0..s-1, summed in a fixed order (deterministic, no atomics)."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    BY_PROGRAMS = True
    ANCHOR = "one top-level `for v in range(0, K, STEP)` loop carrying one fp32 running total, updated last by `carried += tl.sum(e, axis=0)` and read before that by the stores in the loop (a row scan), launched over a literal grid (n,)"

    def forward_sites(self, source: str) -> list[Site]:
        return self.launch_sites(
            lambda: analyse(source)[1],
            lambda a: (
                f"{a.kernel}: {a.programs} programs, each a serial scan over {a.k_arg} in steps of {a.step_arg} carrying {a.acc}",
                {"kernel": a.kernel, "programs": a.programs, "k": a.k_arg, "step": a.step_arg},
            ),
        )

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""
        return tile_rewrite.why_not(self, analyse, source)

    def scaled(self, params: dict[str, Any], factor: float) -> dict[str, Any] | None:
        """The segments a row `factor` times: a fixed int count itself, else the programs a SM
        aimed at and the cap on segments (only these keys: a skill's params describe its
        expert's site too)."""
        v = params.get("segments")
        if isinstance(v, int) and not isinstance(v, bool):
            return {"segments": min(65535, max(1, round(v * factor)))}

        def given(key: str, default: int) -> int:
            v = params.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else default

        return {
            "programs_per_sm": max(1, round(given("programs_per_sm", PROGRAMS_PER_SM) * factor)),
            "max_segments": min(65535, max(1, round(given("max_segments", MAX_SEGMENTS) * factor))),
        }

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            v = p.get("segments")
            if isinstance(v, str):
                try:
                    cst.parse_expression(v)
                except cst.ParserSyntaxError:
                    return RewriteResult.skip(f"params['segments']={v!r}: not an expression", site)
            elif v is not None and (
                not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 65535
            ):
                return RewriteResult.skip(
                    f"params['segments']={v!r}: expected an int >= 1 and <= 65535 (grid axis 1) "
                    "or a launcher expression",
                    site,
                )
            for key, most in (("programs_per_sm", 1 << 16), ("max_segments", 65535)):
                v = p.get(key)
                if v is not None and (
                    not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= most
                ):
                    return RewriteResult.skip(
                        f"params[{key!r}]={v!r}: expected an int >= 1 and <= {most}", site
                    )
            v = p.get("chunk")
            if v is not None and (
                not isinstance(v, int) or isinstance(v, bool) or v < 0 or v & (v - 1)
            ):
                return RewriteResult.skip(
                    f"params['chunk']={v!r}: expected a power of two (0: keep the kernel's step)",
                    site,
                )
            ctx, found = analyse(source)
            a = launched(found, site)
            if isinstance(a, RewriteResult):
                return a
            out = rewrite(ctx, a, p)
            if isinstance(out, RewriteResult):
                return RewriteResult.skip(out.reason, site)
            return RewriteResult(
                True,
                f"{a.kernel}: the loop over {a.k_arg} split into SEG segments per row (grid "
                f"({a.programs}, SEG)), each starting from the fp32 totals of the segments before it",
                out,
                site,
            )

        return self.safe(run)
