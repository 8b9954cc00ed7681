"""P, the indices a program of a tiled kernel owns (tile_rewrite.py), at a launch: its default
from the tile and its bounds, the params that set it, and those params at a multiple of P
(RewritePass.scaled).

params: `Tiling.fixed` (P itself, a power of two), "tile" (elements a tile), `Tiling.cap_key`
(P's cap), "programs" (the floor on programs; 0 drops it) and "scale" (a power of two: the tile
and the cap times it, the floor divided by it: a search's neighbours of the default).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import SCANS, Launched
from klineage.rewrite.passes.rows_per_program import assignments, walk

if TYPE_CHECKING:
    from klineage.rewrite.passes.tile_rewrite import Tiling


def defaults(t: Tiling, a: Launched, kdef: cst.FunctionDef) -> tuple[int, int]:
    """(tile, programs) by default: (t.scan_tile, no floor) for a kernel whose loop carries
    per-index totals (a.widen) and that scans (a chunked row scan); (t.tile, t.programs)
    otherwise."""
    scans = any(
        isinstance(n, cst.Call) and dotted(n.func).split(".")[-1] in SCANS for n in walk(kdef)
    )
    return (t.scan_tile, 0) if t.scan_tile and a.widen and scans else (t.tile, t.programs)


def problem(t: Tiling, p: dict[str, Any]) -> str:
    """Why params p cannot set P ("" when they can)."""
    if t.fixed in p:
        r = p[t.fixed]
        if not isinstance(r, int) or isinstance(r, bool) or r < 1 or r & (r - 1):
            return f"params['{t.fixed}']={r!r}: expected a power of two"
    if "scale" in p and not _pow2_scale(p["scale"]):
        return f"params['scale']={p['scale']!r}: expected a power of two (0.5, 1, 2, ...)"
    return ""


def value(
    t: Tiling, a: Launched, kdef: cst.FunctionDef, count: str, tr: str, p: dict[str, Any]
) -> tuple[str, str]:
    """(P's expression at the launch, what the launcher's comment says of it)."""
    if t.fixed in p:
        return str(int(p[t.fixed])), "fixed"
    tile, programs = defaults(t, a, kdef)
    scale = p.get("scale", 1)
    tile = max(1, int(int(p.get("tile", tile)) * scale))
    cap = max(1, int(int(p.get(t.cap_key, t.cap)) * scale))
    programs = int(p.get("programs", programs))
    if programs:
        programs = max(1, int(programs / scale))
    terms = [str(cap), f"max(1, {tile} // {a.block})", f"{tr}.next_power_of_2({count})"]
    why = f"a {t.shape} tile of about {tile} elements, at most {cap} {t.unit}"
    if programs:  # a power of two, so the min of the terms stays one where it was
        terms.append(f"{tr}.next_power_of_2(max(1, {count} // {2 * programs}))")
        why += f", at least about {programs} programs"
    out = f"min({', '.join(terms)})"
    if not _pow2(a.block, a.launch.func):
        out = f"{tr}.next_power_of_2({out})"
    return out, why


def scaled(t: Tiling, params: dict[str, Any], factor: float) -> dict[str, Any] | None:
    """params with P `factor` times (RewritePass.scaled): a fixed P itself, else "scale";
    only the keys apply reads as numbers (a skill's params also describe the expert's site)."""

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and v > 0

    if number(params.get(t.fixed)):
        return {t.fixed: max(1, int(params[t.fixed] * factor))}
    keep = ("tile", t.cap_key, "programs")
    p = {k: params[k] for k in keep if number(params.get(k)) or params.get(k) == 0}
    p["scale"] = (params["scale"] if number(params.get("scale")) else 1) * factor
    return p


def _pow2_scale(v: Any) -> bool:
    """Whether v is 2**k for an integer k (0.25, 0.5, 1, 2, ...)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
        return False
    m, _ = math.frexp(v)
    return m == 0.5


def _pow2(block: str, func: cst.FunctionDef) -> bool:
    if block.isdigit():
        v = int(block)
        return v >= 1 and v & (v - 1) == 0
    e = cst.parse_expression(block)
    if isinstance(e, cst.Name):
        found = assignments(func).get(e.value, [])
        if len(found) != 1 or found[0].value is None:
            return False
        e = found[0].value
    return isinstance(e, cst.Call) and dotted(e.func).endswith("next_power_of_2")
