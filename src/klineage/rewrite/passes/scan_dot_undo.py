"""scan_dot's backward direction: a kernel's `_scan_by_dot(A, AXIS, REVERSE)` becomes the
`tl.cumsum(A.to(tl.float32), axis=AXIS, reverse=REVERSE)` it stands for (the helper's own
fallback, so the meaning is kept on every input), and the helpers go once no kernel calls them.
scan_dot's forward rewrite takes `A.to(tl.float32)` of a name loaded once back to the call, so a
walk's step and the skill it becomes are the same edit both ways."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import code_of, is_triton_jit, parse, positions


@dataclass
class Call:
    kernel: str
    line: int
    node: cst.Call


def kernels(module: cst.Module, helpers: tuple[str, ...]) -> list[cst.FunctionDef]:
    """The module's @triton.jit functions other than scan_dot's helpers."""
    return [
        s
        for s in module.body
        if isinstance(s, cst.FunctionDef)
        and s.name.value not in helpers
        and any(is_triton_jit(d) for d in s.decorators)
    ]


def calls(source: str, helper: str, helpers: tuple[str, ...]) -> list[Call | tuple[str, str]]:
    """Each call of `helper` with three positional arguments in a @triton.jit kernel that is not
    one of `helpers`; (kernel, why not) for a call of another form."""
    module = parse(source)
    _, lines = positions(module)
    out: list[Call | tuple[str, str]] = []
    for stmt in kernels(module, helpers):
        for node in _helper_calls(stmt, helper):
            if len(node.args) != 3 or any(a.keyword is not None for a in node.args):
                out.append((stmt.name.value, f"{code_of(node)}: not (values, AXIS, REVERSE)"))
                continue
            out.append(Call(stmt.name.value, lines[node].start.line, node))
    return out


def _helper_calls(fn: cst.FunctionDef, helper: str) -> list[cst.Call]:
    found: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == helper:
                found.append(node)

    fn.visit(V())
    return found


def undo(source: str, at: Call, helper: str, helpers: tuple[str, ...]) -> str:
    """`at` as the tl.cumsum it stands for; the helpers removed if nothing else calls them."""
    values, axis, reverse = (code_of(a.value) for a in at.node.args)
    backwards = "" if reverse == "False" else f", reverse={reverse}"
    scan = cst.parse_expression(f"tl.cumsum({values}.to(tl.float32), axis={axis}{backwards})")

    class T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return scan if original is at.node else updated

    module = parse(source).visit(T())
    if any(isinstance(c, Call) for c in calls(module.code, helper, helpers)):
        return module.code
    body = list(module.body)
    first = next(
        (
            i
            for i, s in enumerate(body)
            if isinstance(s, cst.FunctionDef) and s.name.value in helpers
        ),
        None,
    )
    kept = [s for s in body if not (isinstance(s, cst.FunctionDef) and s.name.value in helpers)]
    if first is not None and first < len(kept):
        # the comments above the first helper go back to what follows the helpers
        lead = body[first].leading_lines
        kept[first] = kept[first].with_changes(leading_lines=lead)
    return module.with_changes(body=kept).code
