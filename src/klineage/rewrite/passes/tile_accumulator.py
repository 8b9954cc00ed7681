"""An accumulator of the tile's shape: a loop's per-step reduction becomes one after the loop.

A kernel that walks its data in tiles and reduces each tile into a carried total,

    total = tl.full((1, BLOCK_N), 0.0, tl.float32)
    for top in range(lo, hi, STEP):
        ...
        total += tl.sum(vals.to(tl.float32), axis=0, keep_dims=True)

reduces across the tile's rows at every step: shuffles between lanes and, where the rows are
spread over warps, a round trip through shared memory and a barrier, once per tile. The colsum
expert (`kernels/colsum/expert.py`, its optimization 1) keeps an fp32 accumulator of the tile's
shape instead, one add per element a step, and reduces its rows once, after the loop:

    total_tile = tl.full((STEP, BLOCK_N), 0.0, tl.float32)
    for top in range(lo, hi, STEP):
        ...
        total_tile += vals.to(tl.float32)
    total += tl.sum(total_tile, axis=0, keep_dims=True)

A running maximum (minimum), `m = tl.maximum(m, tl.max(x, axis, ...))`, becomes
`m_tile = tl.maximum(m_tile, x)` from -inf (+inf) and the same update once after the loop.
Found by structure: a direct statement of a kernel's top-level for (or while) loop of one of those forms,
whose accumulator the loop reads nowhere else, whose reduced value has a shape the code states
(tl.arange, `[:, None]`, tl.load of pointer and mask, arithmetic; each dimension a tl.constexpr
or a literal, as tl.full needs) with more than one element along the axis, and whose total is
a float (the value cast to one, or the total started from a float literal or dtype).

Why it is sound: the elements reduced are the same (masked lanes included, with whatever the
load gave them: the step's reduction summed them too), each added into its own lane's partial
from the identity, so the one reduction after the loop combines all of them; the original
update then adds that to the total's start as it added each step's. A sum changes order (each
lane sums its column's values in sequence, then the lanes are summed; the gate's float64-based
comparison allows for a long sum's rounding); a maximum is exact. A loop that runs no step
leaves the tile at the identity, whose reduction leaves the total as it started.

Backward, on an expert: a tile accumulator started by tl.zeros (tl.full of the identity) of a
literal shape, updated by `T += x` (tl.maximum/minimum) as a direct statement of a top-level
loop that reads it nowhere else, and reduced once after the loop by `R = tl.sum(T, axis=A)`
(max/min) becomes `R` started at the reduced shape, `R += tl.sum(x, axis=A)` in the loop.
The analysis is tile_accumulator_analysis.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, names_under, parse
from klineage.rewrite.passes import tile_rewrite
from klineage.rewrite.passes.rows_per_program import code
from klineage.rewrite.passes.tile_accumulator_analysis import (
    KINDS,
    Loop,
    Reduction,
    TileAccumulator,
    _reduce_args,
    analyse,
    analyse_tiles,
)
from klineage.rewrite.registry import register


def _line(text: str, comment: str = "") -> cst.SimpleStatementLine:
    st = cast(cst.SimpleStatementLine, cst.parse_statement(text + "\n"))
    if comment:
        st = st.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(f"# {comment}"))])
    return st


def _loop_with(loop: Loop, stmt: cst.SimpleStatementLine, new: cst.SimpleStatementLine) -> Loop:
    """loop with its direct statement `stmt` replaced by `new`."""
    inner = [new if s is stmt else s for s in loop.body.body]
    return loop.with_changes(body=loop.body.with_changes(body=inner))


def _body(kdef: cst.FunctionDef, edits: dict[int, list[cst.BaseStatement]]) -> cst.FunctionDef:
    """kdef with each top-level statement whose id is in `edits` replaced by its list."""
    out: list[cst.BaseStatement] = []
    for st in kdef.body.body:
        out += edits.get(id(st), [cast(cst.BaseStatement, st)])
    return kdef.with_changes(body=kdef.body.with_changes(body=out))


def rewrite(source: str, r: Reduction) -> str:
    """The forward rewrite of one per-step reduction (module docstring)."""
    module = parse(source)
    tile = tile_rewrite.fresh(f"{r.acc}_tile", set(names_under(r.kdef)))  # the kernel's own scope
    dims = ", ".join(r.shape) + ("," if len(r.shape) == 1 else "")
    reduce, combine, ident = KINDS[r.kind]
    init = _line(
        f"{tile} = {r.tl}.full(({dims}), {ident}, {r.tl}.float32)",
        f"tile_accumulator: {r.acc}'s {reduce} of each step kept per element of the "
        f"[{', '.join(r.shape)}] tile, reduced once after the loop",
    )
    x = code(r.tile)
    step = _line(f"{tile} += {x}" if r.kind == "sum" else f"{tile} = {r.tl}.{combine}({tile}, {x})")
    once = cast(cst.SimpleStatementLine, r.stmt.deep_replace(r.tile, cst.Name(tile)))
    once = once.with_changes(leading_lines=[])
    kdef = _body(r.kdef, {id(r.loop): [init, _loop_with(r.loop, r.stmt, step), once]})
    return module.deep_replace(r.kdef, kdef).code  # type: ignore[union-attr]


def simplify_tile(source: str, t: TileAccumulator) -> str:
    """The backward rewrite: the tile accumulator becomes a per-step reduction."""
    module = parse(source)
    got = _reduce_args(t.reduce)
    assert got is not None
    _, axis = got
    keep = next((a for a in t.reduce.args if a.keyword and a.keyword.value == "keep_dims"), None)
    keep_dims = keep is not None and code(keep.value) == "True"
    axis %= len(t.shape)
    shape = (
        [("1" if k == axis else d) for k, d in enumerate(t.shape)]
        if keep_dims
        else [d for k, d in enumerate(t.shape) if k != axis]
    )
    _, combine, ident = KINDS[t.kind]
    init_call = cast(cst.Call, cast(cst.Assign, t.init.body[0]).value)
    dtype = next(
        (code(a.value) for a in init_call.args if a.keyword and a.keyword.value == "dtype"), None
    )
    pos = [a for a in init_call.args if a.keyword is None]
    dtype = dtype or (
        code(pos[1].value) if len(pos) > 1 and "zeros" in code(init_call.func) else None
    )
    dtype = dtype or (code(pos[2].value) if len(pos) > 2 else f"{t.tl}.float32")
    if not shape:
        start = "0.0" if t.kind == "sum" else ident
    elif t.kind == "sum":
        start = f"{t.tl}.zeros([{', '.join(shape)}], dtype={dtype})"
    else:
        start = f"{t.tl}.full([{', '.join(shape)}], {ident}, {dtype})"
    init = _line(f"{t.total} = {start}").with_changes(leading_lines=t.init.leading_lines)
    per_step = t.reduce.with_changes(args=[cst.Arg(t.x), *t.reduce.args[1:]])
    text = code(per_step)
    step = _line(
        f"{t.total} += {text}"
        if t.kind == "sum"
        else f"{t.total} = {t.tl}.{combine}({t.total}, {text})"
    ).with_changes(leading_lines=t.stmt.leading_lines)
    edits = {id(t.init): [init], id(t.after): [], id(t.loop): [_loop_with(t.loop, t.stmt, step)]}
    kdef = _body(t.kdef, edits)  # type: ignore[arg-type]
    return module.deep_replace(t.kdef, kdef).code  # type: ignore[union-attr]


@register
class TileAccumulatorPass(RewritePass):
    NAME = "tile_accumulator"
    DESCRIPTION = (
        "Accumulate a loop's tiles elementwise into an fp32 accumulator of the tile's shape and "
        "reduce it once after the loop, instead of reducing every tile into the total (a "
        "cross-lane, often cross-warp, reduction and barrier a step), as the colsum expert does."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    IN_PROGRAM = True
    ANCHOR = "a loop's per-step `total += tl.sum(tile, axis)` (tl.maximum(m, tl.max(...)))"

    def _sites(
        self, direction: str, found: Sequence[Any], what: Callable[[Any], str]
    ) -> list[Site]:
        return [
            self.site(
                direction,
                k,
                x.line,
                x.kernel,
                f"{x.kernel}: {what(x)}",
                kernel=x.kernel,
                name=x.acc if direction == "forward" else x.tile,
            )
            for k, x in enumerate(found)
        ]

    def _at(
        self,
        site: Site,
        found: Sequence[Any],
        make: Callable[[Any], str],
        what: Callable[[Any], str],
    ) -> RewriteResult:
        key = "acc" if site.direction == "forward" else "tile"
        want = (site.params.get("kernel"), site.params.get("name"))
        x = next((x for x in found if (x.kernel, getattr(x, key)) == want), None)
        if x is None:
            return RewriteResult.skip(
                f"no such accumulator {site.params.get('name')} in {site.params.get('kernel')}",
                site,
            )
        return RewriteResult(True, f"{x.kernel}: {what(x)}", make(x), site)

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(
            lambda: self._sites(
                "backward",
                analyse_tiles(source),
                lambda t: (
                    f"a [{', '.join(t.shape)}] accumulator {t.tile} reduced once into {t.total} after its loop"
                ),
            )
        )

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return self.safe(
            lambda: self._at(
                site,
                analyse_tiles(source),
                lambda t: simplify_tile(source, t),
                lambda t: f"{t.total} reduced at every step of the loop instead of {t.tile}",
            )
        )

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(
            lambda: self._sites(
                "forward",
                [x for x in analyse(source) if isinstance(x, Reduction)],
                lambda r: f"{r.acc} reduced from a [{', '.join(r.shape)}] tile at every step",
            )
        )

    def why_not(self, source: str) -> list[str]:
        """Why each loop update of a carried total is not a site ("" for a site)."""
        return self.reasons(lambda: analyse(source), Reduction)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        return self.safe(
            lambda: self._at(
                site,
                [x for x in analyse(source) if isinstance(x, Reduction)],
                lambda r: rewrite(source, r),
                lambda r: (
                    f"{r.acc} accumulated per element of a [{', '.join(r.shape)}] tile, reduced once after the loop"
                ),
            )
        )
