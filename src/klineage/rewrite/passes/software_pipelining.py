"""Software pipelining: num_stages > 1, so the loads of later loop iterations overlap compute.

With num_stages = S the compiler keeps S - 1 future tiles in flight (cp.async / TMA into a ring
of shared-memory buffers) while the current one is consumed, hiding global-memory latency
(~600-800 cycles) behind the tensor cores or the reductions. It pays off in loops that stream
tiles (matmul K loops, attention K/V loops, persistent loops over row blocks) when the extra
shared memory per stage still fits; it changes only the schedule, never the result.

Backward, one site at a time:
- `triton.Config(..., num_stages=N)` with N > 1: set to 1;
- a launch `kernel[grid](..., num_stages=N)` with N > 1: set to 1 (dropping the keyword would
  leave Triton's default, 3 on NVIDIA, which still pipelines);
- `tl.range(..., num_stages=N)` in a kernel: the keyword is removed (the loop then follows the
  kernel-wide setting, which Triton applies to dot loops only).
Values that are names the pass cannot resolve (e.g. a constexpr parameter) count as > 1.
Forward: the same places at 1 (or a tl.range without num_stages) get the expert's value back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import (
    FunctionTracker,
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    kwarg,
    parse,
    without_kwargs,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register

KW = "num_stages"
DEFAULTS = {"config": 3, "launch": 3, "range": 2}


class _Replacer(cst.CSTTransformer):
    """Replace nodes of the tree by identity (the nodes found by a visitor of the same tree)."""

    def __init__(self, mapping: dict[int, cst.CSTNode]) -> None:
        self.mapping = mapping

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return self.mapping.get(id(original_node), updated_node)


def _language_aliases(module: cst.Module) -> list[str]:
    """Names under which triton.language is imported (tl, lang, ...), imports first."""
    names: list[str] = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for a in small.names:
                    if dotted(a.name) == "triton.language" and a.asname is not None:
                        names.append(dotted(a.asname.name))
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and dotted(small.module) == "triton"
                and not isinstance(small.names, cst.ImportStar)
            ):
                for a in small.names:
                    if dotted(a.name) == "language":
                        alias = a.asname.name if a.asname is not None else a.name
                        names.append(dotted(alias))
    return [*names, "tl", "triton.language"]


def _int_constants(module: cst.Module) -> dict[str, int]:
    out: dict[str, int] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Integer)
                ):
                    out[small.targets[0].target.value] = int(small.value.evaluated_value)
    return out


@dataclass
class _Stage:
    kind: str  # "config", "launch" or "range"
    call: cst.Call
    line: int
    function: str
    value: cst.BaseExpression | None  # the num_stages value, None when absent
    stages: int | None  # its integer value when known
    builtin: bool = False  # a kernel `for ... in range(...)` (forward only: becomes tl.range)


class _Collector(FunctionTracker):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, aliases: list[str], consts: dict[str, int]) -> None:
        super().__init__()
        self.aliases = aliases
        self.consts = consts
        self.found: list[_Stage] = []

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        if self.in_kernel and isinstance(it, cst.Call) and dotted(it.func) == "range":
            line = self.get_metadata(PositionProvider, it).start.line
            self.found.append(_Stage("range", it, line, self.function, None, None, builtin=True))

    def visit_Call(self, node: cst.Call) -> None:
        callee = dotted(node.func)
        kind = ""
        if callee == "Config" or callee.endswith(".Config"):
            kind = "config"
        elif isinstance(node.func, cst.Subscript) and not self.in_kernel:
            kind = "launch"
        elif self.in_kernel and "." in callee and callee.rsplit(".", 1)[0] in self.aliases:
            kind = "range" if callee.rsplit(".", 1)[1] == "range" else ""
        if not kind:
            return
        arg = kwarg(node, KW)
        value = arg.value if arg is not None else None
        stages: int | None = None
        if isinstance(value, cst.Integer):
            stages = int(value.evaluated_value)
        elif isinstance(value, cst.Name):
            stages = self.consts.get(value.value)
        line = self.get_metadata(PositionProvider, node).start.line
        self.found.append(_Stage(kind, node, line, self.function, value, stages))


def _stages(module: cst.Module) -> list[_Stage]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    collector = _Collector(_language_aliases(module), _int_constants(module))
    wrapper.visit(collector)
    return collector.found


def _pipelined(s: _Stage) -> bool:
    return s.value is not None and (s.stages is None or s.stages > 1)


def _unpipelined(s: _Stage) -> bool:
    if s.kind == "range" and s.value is None:
        return True
    return s.value is not None and s.stages is not None and s.stages <= 1


_WHAT = {"config": "triton.Config", "launch": "kernel launch", "range": "tl.range loop"}


@register
class SoftwarePipelining(RewritePass):
    NAME = "software_pipelining"
    DESCRIPTION = (
        "Set num_stages > 1 (per config, launch or tl.range loop) so the next tiles' loads are "
        "in flight in a shared-memory ring while the current tile is computed, hiding latency."
    )
    CATEGORY = "memory"
    ANCHOR = "num_stages= on triton.Config, a kernel launch or tl.range"

    def _sites(self, source: str, direction: str) -> list[Site]:
        keep = _pipelined if direction == "backward" else _unpipelined
        out = []
        for i, s in enumerate(x for x in _stages(parse(source)) if keep(x)):
            now = _code(s.value) if s.value is not None else ""
            what = "for-range loop (becomes tl.range)" if s.builtin else _WHAT[s.kind]
            if direction == "backward":
                value: Any = s.stages if isinstance(s.value, cst.Integer) else now
            else:
                value = DEFAULTS[s.kind]
            desc = f"num_stages={now} on a {what}" if now else f"no num_stages on a {what}"
            out.append(
                self.site(direction, i, s.line, s.function, desc, kind=s.kind, num_stages=value)
            )
        return out

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "backward")

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "forward")

    def _nth(self, module: cst.Module, site: Site, keep: Any) -> _Stage | str:
        found = [s for s in _stages(module) if keep(s)]
        if site.index >= len(found):
            return f"no num_stages site #{site.index} here ({len(found)} found)"
        s = found[site.index]
        kind = site.params.get("kind")
        if kind and kind != s.kind:
            return f"site #{site.index} is a {_WHAT[s.kind]}, not a {_WHAT.get(kind, kind)}"
        return s

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            module = parse(source)
            s = self._nth(module, site, _pipelined)
            if isinstance(s, str):
                return RewriteResult.skip(s, site)
            assert s.value is not None
            old = _code(s.value)
            if s.kind == "range":
                new = module.visit(_Replacer({id(s.call): without_kwargs(s.call, {KW})}))
                how = f"removed num_stages={old} from"
            else:
                new = module.visit(_Replacer({id(s.value): cst.Integer("1")}))
                how = f"set num_stages={old} to 1 on"
            where = f" in {s.function}" if s.function else ""
            return RewriteResult(True, f"{how} a {_WHAT[s.kind]}{where}", new.code, site)

        return self.safe(run)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            p = params or site.params
            module = parse(source)
            s = self._nth(module, site, _unpipelined)
            if isinstance(s, str):
                return RewriteResult.skip(s, site)
            if p.get("kind") and p["kind"] != s.kind:
                return RewriteResult.skip(
                    f"params are for a {_WHAT.get(p['kind'], p['kind'])}, the site is a {_WHAT[s.kind]}",
                    site,
                )
            value = cst.parse_expression(str(p.get("num_stages", DEFAULTS[s.kind])))
            if isinstance(value, cst.Integer) and int(value.evaluated_value) <= 1:
                return RewriteResult.skip(f"num_stages={_code(value)} does not pipeline", site)
            if s.value is not None:
                mapping: dict[int, cst.CSTNode] = {id(s.value): value}
            else:
                args = list(s.call.args)
                if args:
                    args[-1] = args[-1].with_changes(
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    )
                eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
                args.append(cst.Arg(keyword=cst.Name(KW), value=value, equal=eq))
                call = s.call.with_changes(args=args)
                if s.builtin:  # range(...) -> tl.range(..., num_stages=N), the module's alias
                    imported = _language_aliases(module)[:-2]
                    alias = imported[0] if imported else "triton.language"
                    call = call.with_changes(func=cst.parse_expression(f"{alias}.range"))
                mapping = {id(s.call): call}
            new = module.visit(_Replacer(mapping))
            where = f" in {s.function}" if s.function else ""
            return RewriteResult(
                True, f"set num_stages={_code(value)} on a {_WHAT[s.kind]}{where}", new.code, site
            )

        return self.safe(run)
