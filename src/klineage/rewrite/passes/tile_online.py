"""An online softmax walk's running maximum and sum kept per element of the tile.

online_softmax (and split_online's partial walk) leave a loop ending

    M_new = tl.maximum(M, tl.max(E, axis=A, keep_dims=K))
    M_ref = tl.where(M_new == float("-inf"), 0.0, M_new)
    S = S * tl.exp(M - M_ref) + tl.sum(tl.exp(E - M_ref), axis=A, keep_dims=K)
    M = M_new

which reduces the tile across its rows twice a step (a maximum, then a sum: shuffles between
lanes and, where the rows are spread over warps, two round trips through shared memory and two
barriers a step). On the column softmax this walk, tabled over its step and warps, stayed near
30% of the floor on an H100 (docs/benchmarks.md, 2026-12-07). tile_accumulator keeps a plain
sum or maximum per element of the tile; this is the same for the online pair: each element of
the [rows, columns] tile carries its own running maximum and its own sum, rescaled as the
walk's, and the tile is reduced once, after the loop, by the original four statements with the
tile's partials in place of E:

    M_tile = tl.full(SHAPE, float("-inf"), tl.float32); S_tile = tl.full(SHAPE, 0.0, tl.float32)
    for ...:
        ...
        v = E
        n = tl.maximum(M_tile, v)
        r = tl.where(n == float("-inf"), 0.0, n)
        e = tl.exp(tl.minimum(M_tile, v) - r)
        S_tile = tl.where(v > M_tile, S_tile * e + 1.0, S_tile + e)
        M_tile = n
    M_new = tl.maximum(M, tl.max(M_tile, axis=A, keep_dims=K))
    M_ref = ...
    S = S * tl.exp(M - M_ref) + tl.sum(S_tile * tl.exp(M_tile - M_ref), axis=A, keep_dims=K)
    M = M_new

One exponential an element a step, as before: of the two terms of the rescaled sum, the one of
the larger value is exp(0) = 1, so only exp(smaller - larger) is computed (where v rises above
the element's maximum, the old sum is rescaled by it and v adds 1; otherwise v adds it).

Why it is sound: for each element position, (M_tile, S_tile) is the online pair of the values
that position saw, by the same induction as online_softmax's (exp(a - b) = exp(a - c) *
exp(c - b)); the maximum over positions of M_tile is the walk's maximum (max is exact and
order-free) and sum over positions of S_tile * exp(M_tile - M_ref) is sum(exp(E - M_ref)) over
every value the walk saw, up to rounding (the gate's tolerance judges it). The guard keeps the
pair at (-inf, 0) while a position saw only -inf (a masked lane: exp(-inf) is 0, never NaN),
and the final terms of such positions are 0 * exp(-inf - M_ref) = 0. A loop that runs no step
leaves every position at (-inf, 0), and the four statements after it leave M and S as they
started.

Found by structure: an online walk as online_softmax_analysis.analyse_online finds it (the walk
reads its totals only in its last four statements, does not store, and nothing after it reads
M_new or M_ref), with tl.exp (exp2_log2e's forms are not matched), the guard as written above,
the same E in the maximum and the sum, an int axis, and E's shape known statically with every
dimension a tl.constexpr or a literal (tl.full needs it). Forward only: no expert in the corpus
keeps the pair per element.
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
    names_under,
    parse,
)
from klineage.rewrite.passes import tile_rewrite
from klineage.rewrite.passes.online_softmax_analysis import (
    Online,
    _kernels,
    _one,
    _running_max,
    _tail,
    analyse_online,
)
from klineage.rewrite.passes.rows_per_program import code
from klineage.rewrite.passes.tile_accumulator import _body, _line
from klineage.rewrite.passes.tile_accumulator_analysis import Shapes, _reduce_args
from klineage.rewrite.registry import register


@dataclass
class OnlineTile:
    """An online walk whose pair can be kept per element of its tile (a forward site)."""

    kernel: str
    kdef: cst.FunctionDef
    loop: cst.For
    peak: str
    total: str
    ref: str
    value: cst.BaseExpression  # E
    shape: tuple[str, ...]
    tl: str
    line: int


def _compact(node: cst.CSTNode | str) -> str:
    return (node if isinstance(node, str) else code(node)).replace(" ", "")


def _site(o: Online, shapes: Shapes) -> OnlineTile | str:
    """The online walk `o` as a site, or why not."""
    stmts = cast(cst.IndentedBlock, o.loop.body).body
    s_max, s_ref, s_sum = (_one(cast(cst.SimpleStatementLine, x)) for x in stmts[-4:-1])
    found = _running_max(s_max)
    assert found is not None  # analyse_online checked it
    new, peak, value, _ = found
    maximum = cast(cst.Call, cast(cst.Assign, s_max).value)
    tl = dotted(maximum.func).rsplit(".", 1)[0]
    ref = code(cast(cst.Assign, s_ref).targets[0].target)
    guard = f'{tl}.where({new}==float("-inf"),0.0,{new})'
    if _compact(cast(cst.Assign, s_ref).value) not in (guard, guard.replace(",0.0,", ",0,")):
        return f'{ref} is not `tl.where({new} == float("-inf"), 0.0, {new})`'
    v = cast(cst.BinaryOperation, cast(cst.Assign, s_sum).value)
    scale = cast(cst.Call, cast(cst.BinaryOperation, v.left).right)
    if _compact(scale) != f"{tl}.exp({peak}-{ref})":
        return f"the rescale is not `tl.exp({peak} - {ref})` (exp2_log2e's forms are not matched)"
    summed = cast(cst.Call, _tail(v.right, "sum"))
    term = _tail(summed.args[0].value, "exp")
    if term is None or _compact(term) != f"{tl}.exp({_compact(value)}-{ref})":
        return f"the summed terms are not `tl.exp(E - {ref})` of the maximum's E"
    reduced = _reduce_args(cast(cst.Call, _tail(maximum.args[1].value, "max")))
    if reduced is None:
        return "the reduction's axis is not an int literal (or it has other arguments)"
    shape = shapes.tile(value, reduced[1])
    if isinstance(shape, str):
        return shape
    return OnlineTile(o.kernel, o.kdef, o.loop, peak, o.total, ref, value, shape, tl, o.line)


def analyse(source: str) -> list[OnlineTile | tuple[str, str]]:
    """Each kernel's online walks that are sites, or (kernel, why not)."""
    shapes = {k.name.value: Shapes(k) for k in _kernels(parse(source))}
    out: list[OnlineTile | tuple[str, str]] = []
    for found in analyse_online(source):
        if not isinstance(found, Online):
            out.append(found)
            continue
        got = _site(found, shapes[found.kernel])
        out.append(got if isinstance(got, OnlineTile) else (found.kernel, got))
    return out


def rewrite(source: str, s: OnlineTile) -> str:
    """The forward rewrite (module docstring)."""
    module = parse(source)
    used = set(names_under(s.kdef))
    names: list[str] = []
    for want in (f"{s.peak}_tile", f"{s.total}_tile", "x_step", "peak_step", "ref_step", "e_step"):
        names.append(tile_rewrite.fresh(want, used | set(names)))
    pt, dt, xv, nt, rt, et = names
    tl, dims = s.tl, ", ".join(s.shape) + ("," if len(s.shape) == 1 else "")
    init = [
        _line(
            f'{pt} = {tl}.full(({dims}), float("-inf"), {tl}.float32)',
            f"tile_online: {s.peak} and {s.total} kept per element of the [{', '.join(s.shape)}] "
            "tile (one exp an element a step), reduced once after the loop",
        ),
        _line(f"{dt} = {tl}.full(({dims}), 0.0, {tl}.float32)"),
    ]
    step = [
        _line(f"{xv} = {code(s.value)}"),
        _line(f"{nt} = {tl}.maximum({pt}, {xv})"),
        _line(f'{rt} = {tl}.where({nt} == float("-inf"), 0.0, {nt})'),
        _line(f"{et} = {tl}.exp({tl}.minimum({pt}, {xv}) - {rt})"),
        _line(f"{dt} = {tl}.where({xv} > {pt}, {dt} * {et} + 1.0, {dt} + {et})"),
        _line(f"{pt} = {nt}"),
    ]
    body = list(cast(cst.IndentedBlock, s.loop.body).body)
    last4 = [cast(cst.SimpleStatementLine, x) for x in body[-4:]]

    class _Tile(cst.CSTTransformer):
        """E -> the peak tile in the maximum; tl.exp(E - ref) -> dt * tl.exp(pt - ref)."""

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if _tail(updated, "max") is not None and _compact(updated.args[0].value) == _compact(
                s.value
            ):
                return updated.with_changes(args=[cst.Arg(cst.Name(pt)), *updated.args[1:]])
            if _compact(updated) == f"{tl}.exp({_compact(s.value)}-{s.ref})":
                return cst.parse_expression(f"{dt} * {tl}.exp({pt} - {s.ref})")
            return updated

    after = [cast(cst.SimpleStatementLine, x.visit(_Tile())) for x in last4]
    after[0] = after[0].with_changes(leading_lines=[])
    loop = s.loop.with_changes(
        body=cast(cst.IndentedBlock, s.loop.body).with_changes(body=[*body[:-4], *step])
    )
    kdef = _body(s.kdef, {id(s.loop): [*init, loop, *after]})
    return module.deep_replace(s.kdef, kdef).code  # type: ignore[union-attr]


@register
class TileOnlinePass(ForwardOnly):
    NAME = "tile_online"
    DESCRIPTION = (
        "Keep an online softmax walk's running maximum and rescaled sum per element of the tile "
        "(one exp an element a step) and reduce them once after the loop, instead of two "
        "cross-lane (often cross-warp) reductions and barriers every step: tile_accumulator's "
        "optimization written for the online pair."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    IN_PROGRAM = True
    ANCHOR = "an online walk's `M_new = tl.maximum(M, tl.max(E, axis))`, `S = S * tl.exp(M - M_ref) + tl.sum(tl.exp(E - M_ref), axis)`"
    NO_BACKWARD = "no expert in the corpus keeps the online pair per element"

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            found = [x for x in analyse(source) if isinstance(x, OnlineTile)]
            return [
                self.site(
                    "forward",
                    k,
                    x.line,
                    x.kernel,
                    f"{x.kernel}: {x.peak} and {x.total} reduced from a [{', '.join(x.shape)}] "
                    "tile twice a step",
                    kernel=x.kernel,
                    name=x.peak,
                )
                for k, x in enumerate(found)
            ]

        return self.safe_sites(run)

    def why_not(self, source: str) -> list[str]:
        """Why each online walk is not a site ("" for a site)."""
        return self.reasons(lambda: analyse(source), OnlineTile)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            want = (site.params.get("kernel"), site.params.get("name"))
            found = [x for x in analyse(source) if isinstance(x, OnlineTile)]
            s = next((x for x in found if (x.kernel, x.peak) == want), None)
            if s is None:
                return RewriteResult.skip(f"no such online walk of {want[1]} in {want[0]}", site)
            what = f"{s.kernel}: {s.peak} and {s.total} kept per element of a [{', '.join(s.shape)}] tile"
            return RewriteResult(True, what, rewrite(source, s), site)

        return self.safe(run)
