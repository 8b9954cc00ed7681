"""One online walk for a maximum and a sum of exponentials that two walks computed.

A naive softmax (or log-sum-exp) over data longer than one block walks it twice before it can
write: once for the maximum, once for the sum of exp(x - maximum). The expert's looped softmax
(`kernels/softmax/expert.py`, its online kernel) walks once, carrying the running maximum m and
the running sum d rescaled whenever a block raises the maximum:

    m_new = max(m, max(block));  d = d * exp(m - m_new) + sum(exp(block - m_new));  m = m_new

so x is read twice in all (this walk, then the write) instead of three times. Found by
structure, not by names: two top-level loops of one kernel with the same header whose bodies
are the same simple statements except the last one, the first ending `M = tl.maximum(M,
tl.max(E, ...))` and the second `S += tl.sum(tl.exp(E - M), ...)` (or exp2_log2e's
`tl.exp2(E * C - M * C)`, merged in that form but for the rescale, `tl.exp2((M - M_ref) * C)`:
distributed it compounds under a GPU's FMA contraction) with the same E and the same reduction
arguments (an axis, keep_dims: a row walk's scalar and a column tile's [1, BLOCK_N] alike).
The two loops become one, ending

    M_new = tl.maximum(M, tl.max(E, ...))
    M_ref = tl.where(M_new == float("-inf"), 0.0, M_new)
    S = S * tl.exp(M - M_ref) + tl.sum(tl.exp(E - M_ref), ...)
    M = M_new

and S's start moves before it. M_ref is the expert's guard: while every value so far is -inf (a
masked block, a column of -inf at its start), (-inf) - (-inf) would be NaN, and the sum must
stay 0.

Why it is sound: max is exact and order-free, so M ends the same; by induction S holds
sum(exp(E - M)) over the blocks so far (each rescale multiplies by exp(M_old - M_new), the
identity exp(a - b) = exp(a - c) * exp(c - b)), so S ends equal up to rounding, which the gate's
tolerance judges; the statements before the last are the same in both loops, so what they leave
after the loop is what the second loop left. Skipped, with the reason: loops whose bodies differ,
hold compound statements, store, or use M or S before their last statement; a sum whose
exponent is not the maximum's argument minus M; other statements between the loops than S's
start, or a start that reads what the first loop computes.

Backward, on an expert: a top-level loop ending `Mn = tl.maximum(M, tl.max(E, ...))`, a reference
`R = g(Mn)` (the guard, times log2(e) for exp2), `S = S * EXP(<M and R>) + tl.sum(EXP(<R, not M>),
...)` and `M = Mn` (the softmax expert's online kernel) becomes the running maximum's walk, then
the same walk computing R from the final M and adding the sum (the rescale dropped: against the
final maximum there is nothing to rescale). Skipped, with the reason: a rescale or terms that read
other values, a reference that reads more than Mn, Mn or R read after the walk, stores. The
analysis of both directions is online_softmax_analysis.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    names_under,
    parse,
    reads_renamed,
)
from klineage.rewrite.passes.online_softmax_analysis import (
    Online,
    Pair,
    _args,
    _one,
    _simple,
    analyse,
    analyse_online,
)
from klineage.rewrite.passes.rows_per_program import code
from klineage.rewrite.passes.tile_rewrite import fresh, tl_alias
from klineage.rewrite.registry import register


def rewrite(source: str, pair: Pair) -> str:
    module = parse(source)
    tl = tl_alias(module) or "tl"
    used = set(names_under(pair.kdef))
    new, ref = (
        fresh(f"{pair.peak}_new", used),
        fresh(f"{pair.peak}_ref", used | {pair.peak + "_new"}),
    )
    m, s, e = pair.peak, pair.total, code(pair.arg)
    mx = _args([cst.Arg(pair.arg), *pair.max_args])
    rest = _args(pair.max_args)
    c = f" * {pair.scale}" if pair.scale else ""
    fn = "exp2" if pair.scale else "exp"
    tail = f", {rest}" if rest else ""
    lines = [
        f"{new} = {tl}.maximum({m}, {tl}.max({mx}))",
        f'{ref} = {tl}.where({new} == float("-inf"), 0.0, {new})',
        # the rescale keeps C factored: distributed, a GPU build contracts it into one FMA whose
        # rounding residue (not 0 while the maximum holds) compounds over the steps
        # (exp2_log2e's _compounds); the summed terms keep the one-FFMA form
        f"{s} = {s} * {tl}.{fn}({f'({m} - {ref}){c}' if c else f'{m} - {ref}'})"
        f" + {tl}.sum({tl}.{fn}({e}{c} - {ref}{c}){tail})",
        f"{m} = {new}",
    ]
    body = _simple(pair.first.body)
    assert body is not None
    merged_body = [*body[:-1], *(cst.parse_statement(x) for x in lines)]
    merged = pair.first.with_changes(body=pair.first.body.with_changes(body=merged_body))
    stmts: list[cst.BaseStatement] = []
    for stmt in pair.kdef.body.body:
        if stmt is pair.second or stmt is pair.start:
            continue
        if stmt is pair.first:
            if pair.start is not None:
                stmts.append(cast(cst.BaseStatement, pair.start.with_changes(leading_lines=[])))
            stmts.append(merged)
            continue
        stmts.append(cast(cst.BaseStatement, stmt))
    kdef = pair.kdef.with_changes(body=pair.kdef.body.with_changes(body=stmts))
    return module.deep_replace(pair.kdef, kdef).code  # type: ignore[union-attr]


def split(source: str, o: Online) -> str:
    """The online walk as two: the running maximum, then the sum against the final maximum
    (its reference computed from it, the rescale dropped)."""
    module = parse(source)
    stmts = _simple(o.loop.body)
    assert stmts is not None
    prefix, (s_max, s_ref, s_sum, _) = stmts[:-4], stmts[-4:]
    m_assign = _one(s_max)
    assert isinstance(m_assign, cst.Assign)
    new = code(m_assign.targets[0].target)
    first_last = s_max.with_changes(
        body=[m_assign.with_changes(targets=[cst.AssignTarget(cst.Name(o.peak))])]
    )

    ref_line = reads_renamed(s_ref, {new: o.peak})
    sum_assign = _one(s_sum)
    assert isinstance(sum_assign, cst.Assign) and isinstance(sum_assign.value, cst.BinaryOperation)
    sum_line = cst.parse_statement(f"{o.total} += {code(sum_assign.value.right)}")
    first = o.loop.with_changes(body=o.loop.body.with_changes(body=[*prefix, first_last]))
    second = o.loop.with_changes(
        body=o.loop.body.with_changes(body=[*prefix, ref_line, sum_line]),
        leading_lines=[cst.EmptyLine(indent=False)],
    )
    out: list[cst.BaseStatement] = []
    for stmt in o.kdef.body.body:
        out.extend([first, second] if stmt is o.loop else [cast(cst.BaseStatement, stmt)])
    kdef = o.kdef.with_changes(body=o.kdef.body.with_changes(body=out))
    return module.deep_replace(o.kdef, kdef).code  # type: ignore[union-attr]


@register
class OnlineSoftmax(RewritePass):
    NAME = "online_softmax"
    DESCRIPTION = (
        "Merge a walk for the maximum and a walk for the sum of exp(x - maximum) into one online "
        "walk (running maximum, sum rescaled by exp(m_old - m_new), guarded while every value is "
        "-inf): the data is read twice in all instead of three times, as the softmax expert's "
        "online kernel does."
    )
    CATEGORY = "memory"
    STRUCTURAL = True
    ANCHOR = "two walks of one kernel: a running maximum, then a running sum of exp(x - maximum)"

    def _sites(self, direction: str, found: Sequence[Pair | Online], what: str) -> list[Site]:
        return [
            self.site(
                direction,
                k,
                x.line,
                x.kernel,
                f"{x.kernel}: {what.format(peak=x.peak, total=x.total)}",
                kernel=x.kernel,
                peak=x.peak,
                total=x.total,
            )
            for k, x in enumerate(found)
        ]

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(
            lambda: self._sites(
                "backward",
                [x for x in analyse_online(source) if isinstance(x, Online)],
                "an online walk carrying the maximum {peak} and the rescaled sum {total}",
            )
        )

    def _at(
        self,
        site: Site,
        found: Sequence[Pair | Online],
        make: Callable[[Any], str],
        what: str,
    ) -> RewriteResult:
        """The rewrite make(x) of the analysed x at the site's kernel and peak, or the skip."""
        x = next(
            (
                x
                for x in found
                if x.kernel == site.params.get("kernel") and x.peak == site.params.get("peak")
            ),
            None,
        )
        if x is None:
            return RewriteResult.skip(f"no such walk in {site.params.get('kernel')}", site)
        return RewriteResult(
            True, f"{x.kernel}: {what.format(peak=x.peak, total=x.total)}", make(x), site
        )

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return self.safe(
            lambda: self._at(
                site,
                [x for x in analyse_online(source) if isinstance(x, Online)],
                lambda o: split(source, o),
                "the online walk split into a walk for {peak} and one for {total}",
            )
        )

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(
            lambda: self._sites(
                "forward",
                [x for x in analyse(source) if isinstance(x, Pair)],
                "a walk for the maximum {peak}, then one for the sum {total} of exp(... - {peak})",
            )
        )

    def why_not(self, source: str) -> list[str]:
        """Why each kernel with two walks of one header is not a site ("" for a site)."""
        return self.reasons(lambda: analyse(source), Pair)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        return self.safe(
            lambda: self._at(
                site,
                [x for x in analyse(source) if isinstance(x, Pair)],
                lambda pair: rewrite(source, pair),
                "the walks for {peak} and {total} merged into one online walk",
            )
        )
