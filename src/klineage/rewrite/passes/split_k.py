"""Split-K: the K loop of a program that reduces it serially is split over SPLIT programs.

A GEMV or a small-output, long-K matmul written one output (or one block of outputs) per
program walks all of K in one program: M * N = 256 programs for the 132 SMs of an H200 at
M = N = 16, each making K / STEP dependent steps (issue 16). Splitting K gives every output
SPLIT programs, each reducing K / SPLIT. A tall, narrow column reduction (sum, mean, maximum)
is the same shape with the rows as K: after column_tiling its few column tiles each walk all
rows (the column max's 524288 x 384 ran 6x slower than the naive kernel on the H200,
docs/benchmarks.md), and split_k then gives it the colsum expert's structure.

Forward, on a kernel whose program reduces `for k in range(0, K, STEP)`, or its while form
`k = 0` ... `while k < K:` ... `k += STEP`, into one fp32 accumulator, a sum or a running
maximum or minimum (split_k_reduction.py), and stores it once after the loop (for a sum, a
linear function of it; for a maximum, itself or its tl.max): the grid `(n,)` becomes
`(n, SPLIT)`; program (i, s) runs the loop over its chunk only,
`range(k_lo, tl.minimum(k_lo + k_chunk, K), STEP)` with `k_chunk = cdiv(cdiv(K, SPLIT), STEP) *
STEP` and `k_lo = s * k_chunk` (a while loop keeps its form: `k = k_lo`,
`while k < tl.minimum(k_lo + k_chunk, K)`), and stores its partial, without the value's outer
cast, at the same offset in row s of an fp32 workspace: the output pointer parameter is moved
there (`c_ptr += s * n_out`) and the launcher passes `torch.empty((SPLIT, C.numel()), fp32)` for
it. A second kernel, added to the file and launched after, combines the SPLIT rows element by
element in fp32, a [PARTS, 256] tile of them a step, and stores the result cast to C's dtype:
`_split_k_sum` adds them in a fixed order (each tile's rows, then the tiles in turn),
`_split_k_max` (`_split_k_min`) takes their maximum (minimum) from -inf (+inf); deterministic,
where atomics would not be, and Triton, because the gate forbids PyTorch compute in forward.
That kernel's loop has split_k's own shape; it is left alone by its name (`_split_k_*`).
SPLIT is params["split"] (an int, or a launcher expression), else
`max(1, min(512, cdiv(4 * 132, n), cdiv(K, STEP)))`: enough programs for about 4x the H200's SMs
(params["programs"]), at most 512 chunks (params["max_split"]), at least one step each.
`scaled` halves or doubles both for a search's neighbours of the default.

Why it is sound: a chunk is a multiple of STEP, so the chunks' loop values are the original
loop's values, each in exactly one chunk, and the masks are kept; the accumulator starts from
the identity of its reduction (zero, -inf, +inf) and is only combined with values free of it,
so the chunks' accumulators combined are the accumulator (a sum up to fp32 order, which the
gate's float64-based comparison allows for long reductions; a maximum exactly), an empty
chunk's being the identity; the stored value commutes with the combine (a sum's is linear in
the accumulator; a maximum's is itself, reshaped or reduced by tl.max, never scaled or
shifted), so the partials combine into the stored value. Each program stores its partial at
every offset the original stored at, in its own row; the output is allocated uninitialised and
dense (offsets [0, numel)) and written by this launch alone, so the combine kernel's
overwriting all of it leaves nothing the original had written different. What is not proven is
skipped with its reason (split_k_analysis.py, split_k_store.py): a loop that carries anything
but the accumulator (an advanced pointer, a second accumulator), an accumulator read inside the
loop, updated by two reductions or started from anything but its reduction's fp32 identity, a
store inside the loop or of a value that does not commute with the combine (a bias added, an
activation, a scaled maximum), loop bounds other than range(0, K, STEP) or its while form, an
output not allocated by torch.empty for this launch alone (zeroed, written before, passed to
another launch), a grid that is not a literal 1-tuple, branches, nested loops, atomics, jit
helpers, autotuning.

Forward only: no backward direction (the corpus' experts do not split K in this two-kernel
shape, and undoing one would have to find its combine kernel).
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
    names_in,
    undefined_skip,
)
from klineage.rewrite.passes.split_k_analysis import Analysis, analyse
from klineage.rewrite.passes.split_k_reduction import Reduction
from klineage.rewrite.registry import register

SMS = 132  # an H200's SMs
# Programs per SM the default SPLIT aims at. Measured on the H200 (do_bench, 2026-12-01): the
# gemv naive at 2048 x 65536 bf16 (32 row blocks) 452 us unsplit, 80 us at the default 17
# (torch.mv 78 us); the long-K matmul naive at 16 x 16 x 1M bf16 2065 us, 726 us at the
# default 3, 621 us from SPLIT 8 on. Where the grid already fills the GPU the split costs:
# 8 x 64 x 512K fp32 (512 programs) 2222 us, 2608 us at SPLIT 2, which the gate's timing sees.
WAVES = 4
# The cap binds only below 9 programs (cdiv(528, 9) = 59). It was 64, and on the H200
# (2026-12-03) the tiled column mean of 393216 x 256 fp16 (one column tile) ran as 64
# programs at 6% of its floor; the 3-tile column max and mean (192 programs) at 19-25%.
MAX_SPLIT = 512
SUM_BLOCK = 256  # outputs a program of the combine kernel
# Partial rows the combine reads a step, a [PARTS, SUM_BLOCK] tile: one row a step, a combine
# of 256 outputs split 512 ways was one program making 512 dependent loads. On the H200 the
# tiled column mean of 393216 x 256 fp16 took 173.7 us, 27% of its floor, where the main
# kernel alone at the column max's 60% would take about 80 us (an estimate: the combine
# was not timed apart; search-issue16-h200-2026-12-03c). The tile is not measured there yet.
PARTS = 16

SUM_KERNEL = '''
@{tr}.jit
def {name}(parts_ptr, out_ptr, n_out, n_split, BLOCK: {tl}.constexpr, PARTS: {tl}.constexpr):
    """out[i] = the sum over s of parts[s, i] in fp32, cast to out's dtype (split_k's second
    kernel: the SPLIT partials of each output, PARTS rows a step, in a fixed order)."""
    offs = {tl}.program_id(0).to({tl}.int64) * BLOCK + {tl}.arange(0, BLOCK)
    ok = offs < n_out
    rows = {tl}.arange(0, PARTS)[:, None]
    total = {tl}.zeros((BLOCK,), dtype={tl}.float32)
    for s0 in range(0, n_split, PARTS):
        s = s0 + rows
        at = parts_ptr + s.to({tl}.int64) * n_out + offs[None, :]
        total += {tl}.sum({tl}.load(at, mask=(s < n_split) & ok[None, :], other=0.0), axis=0)
    {tl}.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=ok)
'''

# The combine of a running maximum or minimum (split_k_reduction.py): the partials' extremum
# from the start's infinity, so an empty chunk's partial (the start) changes nothing. NaN
# shows: a chunk's maxnum-updated accumulator is never NaN, so a NaN there is a partial no
# program wrote, which the gate's NaN-poisoned allocations then show (counted apart, since a
# tile's tl.max need not propagate it).
EXTREMUM_KERNEL = '''
@{tr}.jit
def {name}(parts_ptr, out_ptr, n_out, n_split, BLOCK: {tl}.constexpr, PARTS: {tl}.constexpr):
    """out[i] = the {word} over s of parts[s, i] in fp32, cast to out's dtype (split_k's second
    kernel: the SPLIT partials of each output, an empty chunk's {shown} changing nothing)."""
    offs = {tl}.program_id(0).to({tl}.int64) * BLOCK + {tl}.arange(0, BLOCK)
    ok = offs < n_out
    rows = {tl}.arange(0, PARTS)[:, None]
    best = {tl}.full((BLOCK,), float("{inf}"), {tl}.float32)
    for s0 in range(0, n_split, PARTS):
        s = s0 + rows
        at = parts_ptr + s.to({tl}.int64) * n_out + offs[None, :]
        part = {tl}.load(at, mask=(s < n_split) & ok[None, :], other=float("{inf}"))
        best = {tl}.{op}(best, {tl}.{red}(part, axis=0), propagate_nan={tl}.PropagateNan.ALL)
        best = {tl}.where({tl}.max((part != part).to({tl}.int32), axis=0) > 0, float("nan"), best)
    {tl}.store(out_ptr + offs, best.to(out_ptr.dtype.element_ty), mask=ok)
'''

# Per reduction: the combine kernel's name, what it does (comments, the result's message), and
# its source's fields.
COMBINE: dict[Reduction, tuple[str, str, dict[str, str]]] = {
    "sum": ("_split_k_sum", "adds up", {}),
    "max": (
        "_split_k_max",
        "takes the maximum of",
        {"word": "maximum", "inf": "-inf", "shown": "-inf", "op": "maximum"},
    ),
    "min": (
        "_split_k_min",
        "takes the minimum of",
        {"word": "minimum", "inf": "inf", "shown": "+inf", "op": "minimum"},
    ),
}


def _kernel(a: Analysis, kdef: cst.FunctionDef, tl: str) -> tuple[cst.FunctionDef, str]:
    """The kernel reducing its program's K chunk into its row of the partials, and the name
    of its new parameter, the partials' row length."""
    used = set(names_in(kdef)) | {p.name.value for p in kdef.params.params}
    n = {k: tile_rewrite.fresh(k, used) for k in ("split", "k_chunk", "k_lo", "n_out")}
    store, cast, start = a.store, a.cast, a.start
    assert a.loop is not None and store is not None
    header = a.loop.iter if isinstance(a.loop, cst.For) else a.loop.test
    lo = cst.Name(n["k_lo"])
    hi = cst.parse_expression(f"{tl}.minimum({n['k_lo']} + {n['k_chunk']}, {a.k})")

    class Body(cst.CSTTransformer):
        def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
            # a while loop's `v = 0` starts at its chunk's start
            return updated.with_changes(value=lo) if original is start else updated

        def leave_Comparison(
            self, original: cst.Comparison, updated: cst.Comparison
        ) -> cst.Comparison:
            if original is not header:
                return updated
            # `while v < K` stops at its chunk's end
            (last,) = updated.comparisons
            return updated.with_changes(comparisons=[last.with_changes(comparator=hi)])

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if original is header:
                args = list(updated.args)
                args[0], args[1] = args[0].with_changes(value=lo), args[1].with_changes(value=hi)
                return updated.with_changes(args=args)
            if original is store and cast is not None:
                assert isinstance(cast.func, cst.Attribute)
                at = next(i for i, x in enumerate(original.args) if x.value is cast)
                args = list(updated.args)
                bare = cast.func.value.with_changes(lpar=[], rpar=[])  # an argument needs none
                args[at] = args[at].with_changes(value=bare)
                return updated.with_changes(args=args)
            return updated

    body = kdef.body.visit(Body())
    assert isinstance(body, cst.IndentedBlock)
    lines = [
        f"{n['split']} = {tl}.program_id(1)",
        f"{a.out_param} += {n['split']}.to({tl}.int64) * {n['n_out']}",
        f"{n['k_chunk']} = {tl}.cdiv({tl}.cdiv({a.k}, {tl}.num_programs(1)), {a.step}) * {a.step}",
        f"{n['k_lo']} = {n['split']} * {n['k_chunk']}",
    ]
    prologue = [cst.parse_statement(x) for x in lines]
    comment = (
        f"split_k: program (i, s) reduces chunk s of {a.k} (a multiple of {a.step}) into row s "
        f"of the fp32 partials at {a.out_param}, which a second kernel {COMBINE[a.reduce][1]}"
    )
    prologue[0] = prologue[0].with_changes(leading_lines=_comments(comment))
    body = tile_rewrite.after_docstring(body, prologue)
    params = tile_rewrite.with_params(kdef.params.params, [cst.Param(cst.Name(n["n_out"]))])
    return kdef.with_changes(body=body, params=kdef.params.with_changes(params=params)), n["n_out"]


def _comments(text: str) -> list[cst.EmptyLine]:
    """text as `# ` comment lines of at most 88 characters."""
    return [cst.EmptyLine(comment=cst.Comment(f"# {x}")) for x in textwrap.wrap(text, 86)]


def scaled_split(params: dict[str, Any], factor: float) -> dict[str, Any]:
    """split_k's params (split_online's too) with the split `factor` times (RewritePass.scaled):
    a fixed int split itself, else the programs aimed at and the cap on chunks. Only these keys
    are returned: a skill's params also describe the expert's site (its "programs" may be the
    name `N`), which apply would refuse."""

    def given(key: str, default: int) -> int:
        v = params.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else default

    if isinstance(params.get("split"), int) and not isinstance(params["split"], bool):
        return {"split": min(65535, max(1, round(params["split"] * factor)))}
    return {
        "programs": max(1, round(given("programs", WAVES * SMS) * factor)),
        "max_split": min(65535, max(1, round(given("max_split", MAX_SPLIT) * factor))),
    }


def split_count(
    programs: str, k_arg: str, step_arg: str, tr: str, p: dict[str, Any]
) -> tuple[str, str]:
    """SPLIT's expression for a launch of `programs` programs walking `k_arg` in steps of
    `step_arg`, and what the launcher comment says of it (split_online's too)."""
    if "split" in p:
        return str(p["split"]), "SPLIT given."
    target_programs = p.get("programs", f"{WAVES} * {SMS}")
    cap = p.get("max_split", MAX_SPLIT)
    value = f"max(1, min({cap}, {tr}.cdiv({target_programs}, {programs}), {tr}.cdiv({k_arg}, {step_arg})))"
    target = (
        f"{WAVES}x the {SMS} SMs of an H200" if "programs" not in p else f"{target_programs} in all"
    )
    why = f"SPLIT: programs for about {target}, at most {cap} chunks, at least one step each."
    return value, why


def params_problem(p: dict[str, Any], expressions: bool = True) -> str:
    """Why params split, programs and max_split cannot be used ("" if they can): ints >= 1,
    the split and the cap at most 65535 (grid axis 1); a split may be a launcher expression
    where `expressions`."""
    for key in ("split", "programs", "max_split"):
        v = p.get(key)
        ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        ok = ok and not (key != "programs" and isinstance(v, int) and v > 65535)
        if not ok and not (key == "split" and expressions and isinstance(v, str)):
            return (
                f"params['{key}']={v!r}: expected an int >= 1"
                + (" and <= 65535 (grid axis 1)" if key != "programs" else "")
                + (" or a launcher expression" if key == "split" and expressions else "")
            )
    if isinstance(p.get("split"), str):
        try:
            cst.parse_expression(p["split"])
        except cst.ParserSyntaxError:
            return f"params['split']={p['split']!r}: not an expression"
    return ""


def rewrite(ctx: Ctx, a: Analysis, p: dict[str, Any]) -> str | RewriteResult:
    la = a.launch
    kdef = ctx.kernels[la.kernel]
    tl = tile_rewrite.tl_alias(ctx.module) or f"{_triton_alias(ctx.module)}.language"
    tr = _triton_alias(ctx.module)
    assert tr is not None and a.statement is not None
    used = set(names_in(ctx.module))
    base, does, fields = COMBINE[a.reduce]
    combine_name = tile_rewrite.fresh(base, used)
    launcher = set(names_in(la.func)) | set(assignments(ctx.module))
    split = tile_rewrite.fresh("SPLIT", launcher)
    parts = tile_rewrite.fresh(f"{a.out}_parts", launcher)
    value, why = split_count(a.programs, a.k_arg, a.step_arg, tr, p)
    if isinstance(p.get("split"), str):
        bad = undefined_skip(value, ctx.module, la.func, Site("split_k", "forward", 0, 0, "", ""))
        if bad is not None:
            return bad
    total = f"{a.out}.numel()"
    combines = (
        f"adds the {split} partials in order"
        if a.reduce == "sum"
        else f"{does} the {split} partials"
    )
    comment = (
        f"split_k: {split} programs per output, each reducing a chunk of {a.k_arg} in fp32 into "
        f"{parts}[s]; {combine_name} {combines} and casts to {a.out}'s dtype. {why}"
    )
    first = cst.parse_statement(f"{split} = {value}").with_changes(leading_lines=_comments(comment))
    workspace = cst.parse_statement(
        f"{parts} = {a.torch}.empty(({split}, {total}), device={a.out}.device, dtype={a.torch}.float32)"
    )
    after = cst.parse_statement(
        f"{combine_name}[({tr}.cdiv({total}, {SUM_BLOCK}),)]({parts}, {a.out}, {total}, {split}, "
        f"BLOCK={SUM_BLOCK}, PARTS=min({PARTS}, {tr}.next_power_of_2({split})))"
    )
    call = la.call
    new_kdef, n_out = _kernel(a, kdef, tl)
    grid = cst.parse_expression(f"({a.programs}, {split})")
    out = next(x for x in call.args if isinstance(x.value, cst.Name) and x.value.value == a.out)
    new_call = tile_rewrite._with_args(
        tile_rewrite.with_grid(call, grid).with_changes(
            args=[x.with_changes(value=cst.Name(parts)) if x is out else x for x in call.args]
        ),
        [tile_rewrite._kw(n_out, total)],
    )
    template = SUM_KERNEL if a.reduce == "sum" else EXTREMUM_KERNEL
    combine_def = cst.parse_module(
        template.format(tr=tr, tl=tl, name=combine_name, red=fields.get("op", "")[:3], **fields)
    ).body[0]
    combine_def = combine_def.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    edit = tile_rewrite.Relaunch(  # the launch's statement is a.statement, the call alone
        call,
        lambda _: new_call,
        lambda st: cst.FlattenSentinel([first, workspace, st, after]),
        kdef,
        cst.FlattenSentinel([new_kdef, combine_def]),
    )
    return ctx.module.visit(edit).code


@register
class SplitK(ForwardOnly):
    NAME = "split_k"
    DESCRIPTION = (
        "Split a long serial K loop (GEMV, small-output long-K matmul, tall column sum or max: "
        "too few programs to fill the GPU) over SPLIT programs per output: grid (n, SPLIT), each "
        "program reduces its K chunk (a multiple of the step) into an fp32 partials row, and a "
        "second Triton kernel sums (or takes the maximum or minimum of) the SPLIT partials per "
        "output and casts to the output dtype (deterministic)."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    BY_PROGRAMS = True
    ANCHOR = "one top-level `for k in range(0, K, STEP)` loop (or `while k < K` stepped by `k += STEP`) carrying one fp32 accumulator (a sum, a running max or min), stored once after the loop, launched over a literal grid (n,)"

    def forward_sites(self, source: str) -> list[Site]:
        return self.launch_sites(
            lambda: analyse(source)[1],
            lambda a: (
                f"{a.kernel}: {a.programs} programs, each a serial loop over {a.k_arg} in steps of {a.step_arg} into {a.acc}",
                {"kernel": a.kernel, "programs": a.programs, "k": a.k_arg, "step": a.step_arg},
            ),
        )

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""
        return tile_rewrite.why_not(self, analyse, source)

    def scaled(self, params: dict[str, Any], factor: float) -> dict[str, Any] | None:
        return scaled_split(params, factor)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            bad = params_problem(p)
            if bad:
                return RewriteResult.skip(bad, site)
            ctx, found = analyse(source)
            a = launched(found, site)
            if isinstance(a, RewriteResult):
                return a
            out = rewrite(ctx, a, p)
            if isinstance(out, RewriteResult):
                return RewriteResult.skip(out.reason, site)
            return RewriteResult(
                True,
                f"{a.kernel}: K split over SPLIT programs per output (grid ({a.programs}, SPLIT)), "
                + (
                    "fp32 partials summed by a second kernel"
                    if a.reduce == "sum"
                    else f"a second kernel {COMBINE[a.reduce][1]} the fp32 partials"
                ),
                out,
                site,
            )

        return self.safe(run)
