"""Warps per program chosen for the block size (num_warps=), instead of Triton's default 4.

What it is: `kernel[grid](..., num_warps=W)` at a launch, or `triton.Config(..., num_warps=W)` in
an autotune table, sets how many 32-thread warps run one program. The work of a BLOCK-sized tile
is spread over 32 * W threads: too few and each thread holds too many values (register spills,
few loads in flight per thread); too many and reductions cross more warps through shared memory
for little work each. Experts size it from the tile, e.g. ~32 elements a thread for a row
kernel (`min(max(BLOCK // 1024, 4), 16)`), or 8 warps (two warpgroups) for a 128x256 matmul tile.

When it pays off: large tiles (rows of 8k-64k elements, big matmul/attention tiles) where 4
warps leave 64+ values a thread; nothing at small blocks, where 4 is already right.

Backward: a launch's num_warps= is removed (the default 4 applies) and a Config's becomes 4;
one site per occurrence, params keep the expression's code. Already-4 values are not sites.
Forward: a launch of a plain @triton.jit kernel (not autotuned) or a Config without a non-default
num_warps gets `num_warps=<expr>`: the expert's expression from params, else one sized from the
launch's BLOCK* arguments (32 elements a thread, 4..16 warps), else 8.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    find_calls,
    is_triton_jit,
    kwarg,
    parse,
    replace_nth_call,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.passes.rows_per_program import bound_names, names_in, walk
from klineage.rewrite.registry import register

DEFAULT = "4"  # Triton's default num_warps


def _is_config(call: cst.Call) -> bool:
    name = dotted(call.func)
    return name in ("triton.Config", "Config") or (
        name.endswith(".Config") and name.startswith("triton.")
    )


def _is_launch(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Subscript)  # kernel[grid](...)


def _warps_arg(call: cst.Call) -> tuple[int, cst.Arg] | None:
    """(position, argument) of num_warps: a keyword, or a Config's second positional."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == "num_warps":
            return i, a
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if _is_config(call) and len(positional) >= 2:
        return call.args.index(positional[1]), positional[1]
    return None


def _has_warps(call: cst.Call) -> bool:
    found = (_is_config(call) or _is_launch(call)) and _warps_arg(call)
    return bool(found) and _code(found[1].value).strip() != DEFAULT  # type: ignore[index]


def _plain_kernels(module: cst.Module) -> set[str]:
    """Module-level @triton.jit functions without an autotuner (which owns num_warps)."""
    return {
        node.name.value
        for node in module.body
        if isinstance(node, cst.FunctionDef)
        and any(is_triton_jit(d) for d in node.decorators)
        and not any("autotune" in _code(d.decorator) for d in node.decorators)
    }


def _without(call: cst.Call, i: int) -> cst.Call:
    """The call without argument i; a removed last argument leaves its comma (and the line
    break before ')') to the new last one."""
    args = list(call.args)
    gone = args.pop(i)
    if args and i == len(args):
        args[-1] = args[-1].with_changes(comma=gone.comma)
    return call.with_changes(args=args)


def _with(call: cst.Call, i: int, arg: cst.Arg) -> cst.Call:
    """The call with `arg` inserted at position i, commas laid out like its neighbours'."""
    args = list(call.args)
    i = min(i, len(args))
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if i < len(args):
        arg = arg.with_changes(comma=args[i - 1].comma if i > 0 else space)
    elif args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):  # trailing comma: the new arg takes it over
            arg = arg.with_changes(comma=last.comma)
            sep = args[-2].comma if len(args) >= 2 else space
            args[-1] = last.with_changes(comma=sep)
        else:
            args[-1] = last.with_changes(comma=space)
    args.insert(i, arg)
    return call.with_changes(args=args)


def _keyword(expr: str) -> cst.Arg:
    no_space = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    return cst.Arg(cst.parse_expression(expr), keyword=cst.Name("num_warps"), equal=no_space)


def _sized_from_blocks(call: cst.Call) -> str | None:
    """num_warps for ~32 elements a thread, from the launch's BLOCK* keyword values (the
    output tile's: a reduction BLOCK_K is left out)."""
    blocks = [
        a.value
        for a in call.args
        if a.keyword
        and "BLOCK" in a.keyword.value.upper()
        and not a.keyword.value.upper().endswith("K")
    ]
    if not blocks:
        return None
    literal = [int(b.value, 0) for b in blocks if isinstance(b, cst.Integer)]
    if len(literal) == len(blocks):
        elems = 1
        for n in literal:
            elems *= n
        return str(min(max(elems // 1024, 4), 16))
    atoms = (cst.Name, cst.Integer, cst.Attribute, cst.Call, cst.Subscript)
    elems_code = " * ".join(_code(b) if isinstance(b, atoms) else f"({_code(b)})" for b in blocks)
    return f"min(max({elems_code} // 1024, 4), 16)"


@register
class NumWarps(RewritePass):
    NAME = "num_warps"
    DESCRIPTION = "Size num_warps to the tile (about 32 elements a thread for row kernels, 8 warps for 128x256 matmul tiles) instead of the default 4, so threads neither spill registers nor idle."
    CATEGORY = "tuning"
    ANCHOR = "kernel launch kernel[grid](...) or triton.Config(...)"

    def backward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            out = []
            for i, m in enumerate(find_calls(source, _has_warps, kernels_only=False)):
                pos, arg = _warps_arg(m.node) or (0, m.node.args[0])
                kind = "config" if _is_config(m.node) else "launch"
                expr = _code(arg.value).strip()
                target = (
                    dotted(m.node.func.value)
                    if isinstance(m.node.func, cst.Subscript)
                    else "Config"
                )
                desc = f"num_warps={expr} on {'a triton.Config' if kind == 'config' else f'the launch of {target}'}"
                params = {
                    "kind": kind,
                    "expr": expr,
                    "position": pos,
                    "keyword": arg.keyword is not None,
                }
                out.append(self.site("backward", i, m.line, m.function, desc, **params))
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def default(call: cst.Call) -> cst.Call:
            pos, arg = _warps_arg(call) or (0, call.args[0])
            if _is_config(call):
                args = list(call.args)
                args[pos] = arg.with_changes(value=cst.Integer(DEFAULT))
                return call.with_changes(args=args)
            return _without(call, pos)

        def run() -> RewriteResult:
            new = replace_nth_call(source, _has_warps, site.index, default, kernels_only=False)
            if new is None:
                return RewriteResult.skip(
                    f"no launch/Config with a non-default num_warps #{site.index} here", site
                )
            return RewriteResult(True, f"{site.description} -> default {DEFAULT}", new, site)

        return self.safe(run)

    def _forward_predicate(self, source: str) -> Any:
        kernels = _plain_kernels(parse(source))

        def absent(call: cst.Call) -> bool:
            if _is_config(call):
                found = _warps_arg(call)
                return found is None or _code(found[1].value).strip() == DEFAULT
            launch = _is_launch(call) and dotted(call.func.value) in kernels  # type: ignore[attr-defined]
            return launch and kwarg(call, "num_warps") is None

        return absent

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            out = []
            for i, m in enumerate(
                find_calls(source, self._forward_predicate(source), kernels_only=False)
            ):
                kind = "config" if _is_config(m.node) else "launch"
                expr = "8" if kind == "config" else (_sized_from_blocks(m.node) or "8")
                desc = f"{kind} at the default num_warps; suggest num_warps={expr}"
                out.append(self.site("forward", i, m.line, m.function, desc, kind=kind, expr=expr))
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = {**site.params, **(params or {})}
        expr = str(p.get("expr", "8"))

        def add(call: cst.Call) -> cst.Call:
            found = _warps_arg(call)
            if found is not None:  # a Config's num_warps=4: set it
                args = list(call.args)
                args[found[0]] = found[1].with_changes(value=cst.parse_expression(expr))
                return call.with_changes(args=args)
            default_pos = 1 if _is_config(call) else len(call.args)
            return _with(call, int(p.get("position", default_pos)), _keyword(expr))

        def run() -> RewriteResult:
            try:
                parsed = cst.parse_expression(expr)
            except cst.ParserSyntaxError:
                return RewriteResult.skip(f"num_warps expression {expr!r} does not parse", site)
            missing = set(names_in(parsed)) - _defined(parse(source))
            if missing:
                # A skill's expression names its expert's variable (`num_warps=num_warps`): on
                # the H200 (2026-12-04) it reached a table as `num_warps=num_warps`, a
                # NameError the gate caught at load, one gate call spent.
                return RewriteResult.skip(
                    f"num_warps expression {expr!r} reads {', '.join(sorted(missing))}, which "
                    "this file does not define",
                    site,
                )
            new = replace_nth_call(
                source, self._forward_predicate(source), site.index, add, kernels_only=False
            )
            if new is None:
                return RewriteResult.skip(
                    f"no launch/Config at the default num_warps #{site.index} here", site
                )
            return RewriteResult(
                True,
                f"num_warps={expr} at {site.function or 'module level'}:{site.line}",
                new,
                site,
            )

        return self.safe(run)


def _defined(module: cst.Module) -> set[str]:
    """Every name the file binds anywhere (assignments, parameters, functions, classes,
    imports) and the builtins: what an expression placed in it may read."""
    import builtins

    out = bound_names(module) | set(dir(builtins))
    for n in walk(module):
        if isinstance(n, cst.Param | cst.FunctionDef | cst.ClassDef):
            out.add(n.name.value)
        elif isinstance(n, cst.ImportAlias):
            target = n.asname.name if n.asname else n.name
            out.add(dotted(target).split(".")[0])
    return out
