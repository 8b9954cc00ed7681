"""Online (looped) reduction for rows longer than one block, dispatched by the launcher.

A single-block row kernel (BLOCK = next_power_of_2(N), the whole row in registers) is the
fastest shape while the row fits: x read once, every reduction on registers. Past some length
(16K columns for softmax, 8K for the norms) the row no longer fits without spilling, and a
looped kernel that walks the row in fixed chunks (running max and rescaled sum for softmax,
chunked sums of squares for the norms, then a normalising pass) is faster and compiles at any
N. The expert launcher dispatches between the two:

    if BLOCK_N <= MAX_FUSED_SIZE:
        <launch the single-block kernel>
    else:
        <launch the looped kernel>

Backward keeps the single-block branch unconditionally (that kernel is correct for any N, just
slower and larger on long rows) and removes the looped kernel when nothing else launches it.
params record the condition, the looped branch and the removed kernels; forward, given them,
restores the dispatch around the single-block launch. A looped kernel with no single-block
sibling (cross-entropy's) has nothing to fall back to and is not a site.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, dotted, is_call_to
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    assignments,
    bound_names,
    closure,
    code,
    constexprs,
    known_names,
    names_in,
    walk,
)
from klineage.rewrite.registry import register

_RANGES = {"range", "static_range"}


def looped(kdef: cst.FunctionDef) -> bool:
    """The kernel walks its data in chunks: a range loop whose positional bounds depend on a
    constexpr (the chunk size, through the kernel's assignments) and whose body loads."""
    consts, assigns = constexprs(kdef), assignments(kdef)
    for n in walk(kdef):
        if not (isinstance(n, cst.For) and isinstance(n.iter, cst.Call)):
            continue
        if dotted(n.iter.func).split(".")[-1] not in _RANGES:
            continue
        bounds = [a.value for a in n.iter.args if a.keyword is None]
        used = {x for b in bounds for e in closure(b, assigns) for x in names_in(e)}
        if used & consts and any(_loads(x) for x in walk(n.body)):
            return True
    return False


def _loads(n: cst.CSTNode) -> bool:
    return isinstance(n, cst.Call) and (
        is_call_to(n, "tl.load") or dotted(n.func).endswith(".load") or is_call_to(n, "tl.dot")
    )


def _whole_row(ctx: Ctx, la: Launch) -> bool:
    """Some argument of the launch is a next_power_of_2 (or bit_length) of a size: the block
    holds the whole row."""
    assigns = {**ctx.module_assigns, **ctx.assigns(la.func)}
    return any(
        isinstance(n, cst.Call)
        and dotted(n.func).split(".")[-1] in ("next_power_of_2", "bit_length")
        for a in la.call.args
        for e in closure(a.value, assigns)
        for n in walk(e)
    )


def _statements(block: cst.BaseSuite) -> list[Any]:
    """The statements of a block (a one-line `if c: stmt` suite becomes one statement line)."""
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    assert isinstance(block, cst.SimpleStatementSuite)
    return [cst.SimpleStatementLine(body=list(block.body))]


@dataclass
class _Dispatch:
    node: cst.If
    func: cst.FunctionDef
    single_in_body: bool
    single: list[Any]  # statements
    looped: list[Any]
    single_kernels: list[str]
    looped_kernels: list[str]


def _launches_in(ctx: Ctx, stmts: list[Any]) -> list[Launch]:
    calls = {id(n) for s in stmts for n in walk(s)}
    return [la for la in ctx.launches if id(la.call) in calls]


def _dispatches(ctx: Ctx) -> list[_Dispatch]:
    out: list[_Dispatch] = []
    funcs = {id(la.func): la.func for la in ctx.launches}
    seen: set[int] = set()
    for func in funcs.values():
        for n in walk(func.body):
            if not (isinstance(n, cst.If) and isinstance(n.orelse, cst.Else)) or id(n) in seen:
                continue
            seen.add(id(n))
            body, other = _statements(n.body), _statements(n.orelse.body)
            kinds = []
            for stmts in (body, other):
                las = _launches_in(ctx, stmts)
                if not las or any(la.kernel not in ctx.kernels for la in las):
                    break
                single = all(
                    not looped(ctx.kernels[la.kernel]) and _whole_row(ctx, la) for la in las
                )
                kinds.append(
                    (
                        [la.kernel for la in las],
                        single,
                        any(looped(ctx.kernels[la.kernel]) for la in las),
                    )
                )
            if len(kinds) != 2:
                continue
            (bn, b_single, b_looped), (on, o_single, o_looped) = kinds
            if b_single and o_looped:
                out.append(_Dispatch(n, func, True, body, other, bn, on))
            elif o_single and b_looped:
                out.append(_Dispatch(n, func, False, other, body, on, bn))
    return out


def _refs(module: cst.Module, name: str) -> int:
    defs = sum(1 for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == name)
    return sum(1 for n in walk(module) if isinstance(n, cst.Name) and n.value == name) - defs


def _neighbour(body: list[Any], i: int) -> str | None:
    s = body[i] if 0 <= i < len(body) else None
    return s.name.value if isinstance(s, cst.FunctionDef | cst.ClassDef) else None


def _plan(ctx: Ctx, d: _Dispatch) -> tuple[cst.Module, dict[str, Any]]:
    """The module with the dispatch replaced by its single-block branch (and the looped
    kernels nothing else launches removed), and the params that restore it."""
    first = d.single[0].with_changes(
        leading_lines=[*d.node.leading_lines, *d.single[0].leading_lines]
    )
    placeholder = [cst.SimpleStatementLine([cst.Pass()])]
    tpl = d.node.with_changes(leading_lines=[])
    if d.single_in_body:
        tpl = tpl.with_changes(body=tpl.body.with_changes(body=placeholder))
    else:
        orelse = tpl.orelse
        assert isinstance(orelse, cst.Else)
        tpl = tpl.with_changes(
            orelse=orelse.with_changes(body=orelse.body.with_changes(body=placeholder))
        )
    module = ctx.module.deep_replace(d.node, cst.FlattenSentinel([first, *d.single[1:]]))  # type: ignore[type-var]
    assert isinstance(module, cst.Module)
    removed = []
    for k in dict.fromkeys(d.looped_kernels):
        body = list(module.body)
        idx = [
            i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == k
        ]
        if len(idx) != 1 or _refs(module, k) > 0:
            continue
        i = idx[0]
        removed.append(
            {
                "name": k,
                "code": module.code_for_node(body[i]),
                "after": _neighbour(body, i - 1),
                "before": _neighbour(body, i + 1),
            }
        )
        module = module.with_changes(body=body[:i] + body[i + 1 :])
    params = {
        "condition": code(d.node.test),
        "looped_branch": cst.Module(body=d.looped).code,
        "single_in_body": d.single_in_body,
        "single_kernel": d.single_kernels[0],
        "looped_kernels": d.looped_kernels,
        "template": cst.Module(body=[tpl]).code,
        "leading": len(d.node.leading_lines),
        "single_len": len(d.single),
        "launch_offset": next(i for i, s in enumerate(d.single) if _launches_in(ctx, [s])),
        "removed_kernels": removed,
    }
    return module, params


def _free(stmts: list[Any]) -> set[str]:
    """Names the statements read that they do not bind themselves."""
    bound = {x for st in stmts for x in bound_names(st)}
    return {x for st in stmts for x in names_in(st)} - bound


@register
class OnlineReduction(RewritePass):
    NAME = "online_reduction"
    DESCRIPTION = (
        "Dispatch rows longer than one block to a looped kernel (running max/sum or chunked "
        "statistics over fixed chunks) instead of holding the whole row in one block: no "
        "register spills, bounded compile size, any row length."
    )
    CATEGORY = "control-flow"
    STRUCTURAL = True
    ANCHOR = "launcher: if <row fits one block>: single-block launch else: looped launch"

    def backward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            ctx = Ctx(source)
            out = []
            for i, d in enumerate(_dispatches(ctx)):
                _, params = _plan(ctx, d)
                out.append(
                    self.site(
                        "backward",
                        i,
                        ctx.line(d.node),
                        d.func.name.value,
                        f"if {code(d.node.test)}: {', '.join(d.single_kernels)} "
                        f"else: {', '.join(d.looped_kernels)} (looped)",
                        **params,
                    )
                )
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            ctx = Ctx(source)
            found = _dispatches(ctx)
            if site.index >= len(found):
                only = [
                    la.kernel
                    for la in ctx.launches
                    if la.kernel in ctx.kernels and looped(ctx.kernels[la.kernel])
                ]
                why = (
                    f": {', '.join(dict.fromkeys(only))} is looped with no single-block "
                    "variant to fall back to"
                    if only
                    else ""
                )
                return RewriteResult.skip(
                    f"no single-block/looped launch dispatch #{site.index} here{why}", site
                )
            d = found[site.index]
            module, params = _plan(ctx, d)
            removed = [r["name"] for r in params["removed_kernels"]]
            gone = f"; removed the unused {', '.join(removed)}" if removed else ""
            return RewriteResult(
                True,
                f"kept the single-block {', '.join(d.single_kernels)} for every row length in "
                f"{d.func.name.value} (dropped `if {code(d.node.test)}` and its looped "
                f"branch{gone})",
                module.code,
                site,
            )

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            ctx = Ctx(source)
            return [
                self.site(
                    "forward",
                    i,
                    ctx.line(la.call),
                    la.func.name.value,
                    f"{la.kernel} holds a whole row in one block for every row length",
                    single_kernel=la.kernel,
                )
                for i, la in enumerate(self._single_launches(ctx))
            ]

        result = self.safe(run)
        return result if isinstance(result, list) else []

    @staticmethod
    def _single_launches(ctx: Ctx) -> list[Launch]:
        dispatched = {id(n) for d in _dispatches(ctx) for n in walk(d.node)}
        return [
            la
            for la in ctx.launches
            if la.kernel in ctx.kernels
            and not looped(ctx.kernels[la.kernel])
            and _whole_row(ctx, la)
            and id(la.call) not in dispatched
        ]

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = {**site.params, **(params or {})}

        def run() -> RewriteResult:
            if "template" not in p and not ("condition" in p and "looped_branch" in p):
                return RewriteResult.skip(
                    "needs the expert's dispatch in params: condition and looped_branch "
                    "(or template), as a backward site's simplify records them",
                    site,
                )
            ctx = Ctx(source)
            launches = self._single_launches(ctx)
            if site.index >= len(launches):
                return RewriteResult.skip(
                    f"no undispatched single-block launch #{site.index}", site
                )
            la = launches[site.index]
            block, pos = self._container(la)
            if block is None:
                return RewriteResult.skip(
                    "the launch is not a statement of an indented block", site
                )
            start = pos - int(p.get("launch_offset", 0))
            end = start + int(p.get("single_len", 1))
            stmts = list(block.body)
            if start < 0 or end > len(stmts) or start > pos or end <= pos:
                return RewriteResult.skip(
                    f"the recorded branch ({p.get('single_len')} statements, launch at "
                    f"{p.get('launch_offset')}) does not fit around the launch here",
                    site,
                )
            region: list[Any] = stmts[start:end]
            lead = int(p.get("leading", 0))
            outer = list(region[0].leading_lines[:lead])
            region[0] = region[0].with_changes(leading_lines=region[0].leading_lines[lead:])
            node = self._if(p, region).with_changes(leading_lines=outer)
            module = ctx.module.deep_replace(
                block, block.with_changes(body=[*stmts[:start], node, *stmts[end:]])
            )
            assert isinstance(module, cst.Module)
            module = self._restore_kernels(
                module, p.get("removed_kernels") or [], la.func.name.value
            )
            looped_block = node.orelse.body if p.get("single_in_body", True) else node.body  # type: ignore[union-attr]
            missing = _free(list(looped_block.body)) - known_names(module, la.func)
            if missing:
                return RewriteResult.skip(
                    f"the looped branch uses {', '.join(sorted(missing))}, which this launcher "
                    "does not define (restore the looped kernels with params['removed_kernels'])",
                    site,
                )
            return RewriteResult(
                True,
                f"dispatched long rows in {la.func.name.value} to the looped branch "
                f"(if {p.get('condition', code(node.test))})",
                module.code,
                site,
            )

        return self.safe(run)

    @staticmethod
    def _container(la: Launch) -> tuple[cst.IndentedBlock | None, int]:
        for n in walk(la.func):
            if isinstance(n, cst.IndentedBlock):
                for i, s in enumerate(n.body):
                    if isinstance(s, cst.SimpleStatementLine) and any(
                        x is la.call for x in walk(s)
                    ):
                        return n, i
        return None, -1

    @staticmethod
    def _if(p: dict[str, Any], region: list[Any]) -> cst.If:
        single_in_body = bool(p.get("single_in_body", True))
        if "template" in p:
            tpl = cst.parse_module(str(p["template"])).body[0]
        else:
            looped_code = "".join(
                "    " + ln if ln.strip() else ln
                for ln in str(p["looped_branch"]).splitlines(keepends=True)
            )
            text = (
                f"if {p['condition']}:\n    pass\nelse:\n{looped_code}"
                if single_in_body
                else f"if {p['condition']}:\n{looped_code}else:\n    pass\n"
            )
            tpl = cst.parse_module(text).body[0]
        assert isinstance(tpl, cst.If) and isinstance(tpl.orelse, cst.Else)
        if single_in_body:
            return tpl.with_changes(body=tpl.body.with_changes(body=region))
        return tpl.with_changes(
            orelse=tpl.orelse.with_changes(body=tpl.orelse.body.with_changes(body=region))
        )

    @staticmethod
    def _restore_kernels(
        module: cst.Module, removed: list[dict[str, Any]], launcher: str
    ) -> cst.Module:
        for r in removed:
            body = list(module.body)
            if any(isinstance(s, cst.FunctionDef) and s.name.value == r["name"] for s in body):
                continue
            node = cst.parse_module("pass\n" + r["code"]).body[1]
            names = [
                s.name.value if isinstance(s, cst.FunctionDef | cst.ClassDef) else None
                for s in body
            ]
            if r.get("before") and r["before"] in names:
                at = names.index(r["before"])
            elif r.get("after") and r["after"] in names:
                at = names.index(r["after"]) + 1
            else:
                at = names.index(launcher) if launcher in names else len(body)
            module = module.with_changes(body=[*body[:at], node, *body[at:]])
        return module
