"""Persistent grid: a few programs per SM, each looping over the blocks, instead of one per block.

With many tiny blocks (262144 rows of 64 columns = 4096 row blocks of 8 KB) one short-lived
program per block pays launch/retire and index setup for each, and leaves a ragged tail wave.
A persistent kernel starts about (SMs x resident programs per SM) programs and each strides
over the blocks:

    for blk in tl.range(tl.program_id(0), n_blocks, tl.num_programs(0)):

so setup is paid once per program and (with num_stages) the next block's loads overlap this
block's math. The kernel is the same either way; the optimization is the launcher's grid:
min(n_blocks, num_sms * k) instead of n_blocks.

Backward sets the grid back to the full block count (every program's loop runs once): the
`min(...)` cap (or a bare SM-count grid) becomes the count the kernel loops to. params record
the original expression; forward, given it, restores the cap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, dotted, is_call_to, replaced
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    assignments,
    bind,
    closure,
    code,
    same,
    undefined_skip,
    walk,
)
from klineage.rewrite.registry import register


def _from(node: cst.BaseExpression, assigns: dict[str, list[Any]], fn: str) -> bool:
    """node is a call to tl.<fn>(0) (or a name the kernel assigned from one)."""
    if isinstance(node, cst.Name) and len(assigns.get(node.value, [])) == 1:
        node = assigns[node.value][0].value
    if not is_call_to(node, f"tl.{fn}"):
        return False
    axis = node.args[0].value if node.args else None  # type: ignore[attr-defined]
    return axis is None or (isinstance(axis, cst.Integer) and axis.value == "0")


def persistent_count(kdef: cst.FunctionDef) -> str | None:
    """The kernel's block count if it strides over blocks by the grid size
    (for b in range(program_id(0), COUNT, num_programs(0))); '' if COUNT is not a parameter;
    None if the kernel is not persistent."""
    assigns = assignments(kdef)
    params = {p.name.value for p in kdef.params.params}
    for n in walk(kdef):
        if not (isinstance(n, cst.For) and isinstance(n.iter, cst.Call)):
            continue
        if dotted(n.iter.func).split(".")[-1] not in ("range", "static_range"):
            continue
        pos = [a.value for a in n.iter.args if a.keyword is None]
        if (
            len(pos) == 3
            and _from(pos[0], assigns, "program_id")
            and _from(pos[2], assigns, "num_programs")
        ):
            end = pos[1]
            return end.value if isinstance(end, cst.Name) and end.value in params else ""
    return None


def _dim0(grid: cst.BaseExpression, assigns: dict[str, list[Any]]) -> list[cst.BaseExpression]:
    """The grid's first dimension: (g0, ...) or a name assigned such tuples."""
    if isinstance(grid, cst.Tuple) and grid.elements:
        return [grid.elements[0].value]
    if isinstance(grid, cst.Name) and assigns.get(grid.value):
        vals = [a.value for a in assigns[grid.value]]
        if all(isinstance(v, cst.Tuple) and v.elements for v in vals):
            return [v.elements[0].value for v in vals]
    return [grid]


_SM_TOKENS = {"sm", "sms", "nsm", "nsms", "processor", "resident", "persistent", "programs"}


def _sm_like(expr: cst.BaseExpression, assigns: dict[str, list[Any]]) -> bool:
    """The expression (through the launcher's assignments) counts SMs or resident programs."""
    text = " ".join(code(e) for e in closure(expr, assigns)).lower()
    return bool(_SM_TOKENS & set(re.split(r"[^a-z0-9]+", text)))


@dataclass
class _Match:
    launch: Launch
    cap: cst.BaseExpression  # the node to replace (backward) / the uncapped node (forward)
    count: str  # the full block count
    owner: str  # the name whose assignment holds the cap ("" when it is in the launch's grid)
    owner_index: int  # which assignment to that name, in source order


def _matches(ctx: Ctx, capped: bool) -> list[_Match]:
    out: list[_Match] = []
    for la in ctx.launches:
        kdef = ctx.kernels.get(la.kernel)
        param = persistent_count(kdef) if kdef is not None else None
        if param is None or kdef is None:
            continue
        fa = ctx.assigns(la.func)
        assigns = {**ctx.module_assigns, **fa}
        count = bind(la.call, kdef).get(param) if param else None
        count_code = code(count) if count is not None else None
        dims = _dim0(la.grid, assigns)
        exprs = [e for d in dims for e in closure(d, assigns)]
        mins = [
            n
            for e in exprs
            for n in walk(e)
            if isinstance(n, cst.Call) and dotted(n.func) in ("min", "builtins.min")
        ]
        found = None
        for m in mins:
            args = [a.value for a in m.args if a.keyword is None and not a.star]
            full = [a for a in args if count_code is not None and same(code(a), count_code)]
            if not full and len(args) == 2:
                full = [a for a in args if not _sm_like(a, assigns)]
                full = full if len(full) == 1 and _sm_like(m, assigns) else []
            if len(full) == 1:
                found = (m, code(full[0]))
                break
        if capped and found is not None:
            out.append(_Match(la, found[0], found[1], *_owner(fa, found[0])))
        elif (
            capped
            and count_code is not None
            and len(dims) == 1
            and not any(same(code(e), count_code) for e in exprs)
        ):
            # a bare SM-count grid: (num_sms,) with the kernel looping to the count
            if _sm_like(dims[0], assigns):
                out.append(_Match(la, dims[0], count_code, *_owner(fa, dims[0])))
        elif (
            not capped
            and found is None
            and count_code is not None
            and any(same(code(n), count_code) for e in exprs for n in walk(e))
        ):
            target = _uncapped(ctx, la, dims[0], fa, count_code)
            if target is not None:
                out.append(_Match(la, target[0], count_code, target[1], target[2]))
    return out


def _owner(fa: dict[str, list[Any]], node: cst.CSTNode) -> tuple[str, int]:
    for name, assigns in fa.items():
        for i, a in enumerate(assigns):
            if any(n is node for n in walk(a.value)):
                return name, i
    return "", 0


def _uncapped(
    ctx: Ctx, la: Launch, dim0: cst.BaseExpression, fa: dict[str, list[Any]], count: str
) -> tuple[cst.BaseExpression, str, int] | None:
    """Where a cap goes: the last assignment to the grid's name before the launch, else the
    grid's first dimension itself (also when it is the count's own name)."""
    if isinstance(dim0, cst.Name) and fa.get(dim0.value) and not same(dim0.value, count):
        before = [(i, a) for i, a in enumerate(fa[dim0.value]) if ctx.line(a) < la.line]
        if before:
            i, a = before[-1]
            return a.value, dim0.value, i
    return dim0, *_owner(fa, dim0)


@register
class PersistentGrid(RewritePass):
    NAME = "persistent_grid"
    DESCRIPTION = (
        "Launch about (SMs x resident programs) programs that stride over the blocks "
        "(tl.range(pid, n_blocks, tl.num_programs(0))) instead of one program per block: "
        "setup paid once per program, no tail wave, next block's loads overlap this block's math."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    BY_PROGRAMS = True
    ANCHOR = "launcher grid of a kernel looping over blocks by tl.num_programs(0)"

    def _sites(self, source: str, capped: bool) -> list[Site]:
        ctx = Ctx(source)
        out = []
        for i, m in enumerate(_matches(ctx, capped)):
            where = f"{m.owner} = " if m.owner else "grid "
            what = (
                f"grid {code(m.cap)} (persistent) for {m.launch.kernel}, {m.count} blocks"
                if capped
                else f"{where}{code(m.cap)}: one program per block of {m.launch.kernel}"
            )
            params: dict[str, Any] = {"count": m.count, "kernel": m.launch.kernel}
            if m.owner:
                params.update(assign_name=m.owner, assign_index=m.owner_index)
            if capped:
                params["expr"] = code(m.cap)
            node = m.cap if not m.owner else ctx.assigns(m.launch.func)[m.owner][m.owner_index]
            out.append(
                self.site(
                    "backward" if capped else "forward",
                    i,
                    ctx.line(node),
                    m.launch.func.name.value,
                    what,
                    **params,
                )
            )
        return out

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, True)

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, False)

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            ctx = Ctx(source)
            found = _matches(ctx, True)
            if site.index >= len(found):
                return RewriteResult.skip(
                    f"no persistent grid #{site.index} here (a launch of a kernel looping "
                    "range(program_id(0), n, num_programs(0)) with a min(n, SMs...) grid)",
                    site,
                )
            m = found[site.index]
            new = replaced(ctx.module, m.cap, cst.parse_expression(m.count))
            what = f"grid of {m.launch.kernel} in {m.launch.func.name.value}: {m.count}"
            return RewriteResult(
                True, f"{what} (one program per block; was {code(m.cap)})", new, site
            )

        return self.safe(run)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = {**site.params, **(params or {})}

        def run() -> RewriteResult:
            if "expr" not in p:
                return RewriteResult.skip(
                    "needs params['expr']: the persistent grid size, e.g. "
                    "min(n_blocks, num_sms * programs_per_sm)",
                    site,
                )
            ctx = Ctx(source)
            found = _matches(ctx, False)
            if site.index >= len(found):
                return RewriteResult.skip(f"no one-program-per-block launch #{site.index}", site)
            m = found[site.index]
            root: cst.CSTNode = m.cap
            name = p.get("assign_name")
            if name:
                assigns = ctx.assigns(m.launch.func).get(str(name), [])
                idx = int(p.get("assign_index", 0))
                if idx >= len(assigns):
                    return RewriteResult.skip(f"no assignment #{idx} to {name} here", site)
                root = assigns[idx].value or root
            count = str(p.get("count", m.count))
            target = next(
                (
                    n
                    for n in walk(root)
                    if isinstance(n, cst.BaseExpression) and same(code(n), count)
                ),
                None,
            )
            if target is None:
                return RewriteResult.skip(
                    f"{code(root)} does not contain the block count {count}", site
                )
            skip = undefined_skip(str(p["expr"]), ctx.module, m.launch.func, site)
            if skip is not None:
                return skip
            new = replaced(ctx.module, target, cst.parse_expression(str(p["expr"])))
            what = (
                f"persistent grid {p['expr']} for {m.launch.kernel} in {m.launch.func.name.value}"
            )
            return RewriteResult(True, what, new, site)

        return self.safe(run)
