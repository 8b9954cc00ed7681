"""Cache eviction hints on loads and stores (eviction_policy=, cache_modifier=).

Forward: a streaming load gets eviction_policy="evict_first" (data read once should not push
reused lines out of L2); reused data gets "evict_last". Backward: the hint is removed; the
result is the same, only the cache policy changes.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    code_of,
    find_calls,
    is_call_to,
    kwarg,
    replace_nth_call,
    without_kwargs,
)
from klineage.rewrite.registry import register

HINTS = {"eviction_policy", "cache_modifier"}


def _memory_op(node: cst.Call) -> bool:
    return is_call_to(node, "tl.load", "tl.store")


def _hinted(node: cst.Call) -> bool:
    return _memory_op(node) and any(kwarg(node, h) is not None for h in HINTS)


def _unhinted_load(node: cst.Call) -> bool:
    return is_call_to(node, "tl.load") and not any(kwarg(node, h) is not None for h in HINTS)


@register
class CacheEvictionHints(RewritePass):
    NAME = "cache_eviction_hints"
    DESCRIPTION = "Give streaming loads eviction_policy='evict_first' (and reused ones 'evict_last') so L2 keeps what is read again."
    CATEGORY = "memory"
    ANCHOR = "tl.load / tl.store in a kernel"

    def backward_sites(self, source: str) -> list[Site]:
        result = self.safe(self._backward_sites, source)
        return result if isinstance(result, list) else []

    def _backward_sites(self, source: str) -> list[Site]:
        out = []
        for i, m in enumerate(find_calls(source, _hinted)):
            found = {h: kwarg(m.node, h) for h in HINTS}
            hints = {h: code_of(a.value) for h, a in found.items() if a is not None}
            out.append(
                self.site(
                    "backward",
                    i,
                    m.line,
                    m.function,
                    f"{', '.join(f'{k}={v}' for k, v in hints.items())} on a {m.node.func.attr.value if isinstance(m.node.func, cst.Attribute) else 'memory op'}",
                    **hints,
                )
            )
        return out

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            new = replace_nth_call(source, _hinted, site.index, lambda c: without_kwargs(c, HINTS))
            if new is None:
                return RewriteResult.skip(f"no hinted load/store #{site.index} here", site)
            return RewriteResult(True, f"removed {site.description} in {site.function}", new, site)

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            return [
                self.site("forward", i, m.line, m.function, "tl.load without a cache hint")
                for i, m in enumerate(find_calls(source, _unhinted_load))
            ]

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        policy = (params or {}).get("eviction_policy", "'evict_first'")
        policy_code = policy if str(policy).startswith(("'", '"')) else repr(policy)

        def add(call: cst.Call) -> cst.Call:
            args = list(call.args)
            args[-1] = args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            args.append(
                cst.Arg(
                    keyword=cst.Name("eviction_policy"),
                    value=cst.parse_expression(policy_code),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                )
            )
            return call.with_changes(args=args)

        def run() -> RewriteResult:
            new = replace_nth_call(source, _unhinted_load, site.index, add)
            if new is None:
                return RewriteResult.skip(f"no unhinted load #{site.index} here", site)
            return RewriteResult(
                True, f"added eviction_policy={policy_code} to a load in {site.function}", new, site
            )

        return self.safe(run)
