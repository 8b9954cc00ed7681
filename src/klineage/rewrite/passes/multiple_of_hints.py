"""Alignment and contiguity hints: tl.multiple_of / tl.max_contiguous (/ tl.max_constancy).

What it is: `tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)` tells Triton's axis analysis
that `offs` is runs of BLOCK consecutive integers starting at a multiple of BLOCK. Where the
offset arithmetic hides that (a `%` wrap, a loop induction variable, an argument), the hint
lets the compiler prove 16-byte vector loads, coalesced accesses and TMA/cp.async-friendly
shared-memory layouts; the value itself is unchanged (a hint is an identity).

When it pays off: matmul/attention tiles whose offsets the analysis cannot see through (the
Triton matmul tutorial's `% M` wrap, `start_n = tl.multiple_of(start_n, BLOCK_N)` in flash
attention's K loop). ~0 where the analysis already infers it (`pid * BLOCK + tl.arange(0,
BLOCK)`). A FALSE hint (the value is not really a multiple) is silently wrong on the GPU.

Backward: each outermost hint call becomes its input (nested hints count as one site);
`x = tl.multiple_of(x, N)` disappears. Forward: an offsets assignment `o = X * B + tl.arange(0,
B)` gets `tl.max_contiguous(tl.multiple_of(..., B), B)`, and a `for v in range(lo, hi, STEP)`
loop gets `v = tl.multiple_of(v, STEP)` first (true only if lo is a multiple of STEP: the
site says whether that is proven). With a backward site's params the expert's text returns.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from klineage.rewrite.base import RewritePass, RewriteResult, Site, dotted, is_triton_jit, parse
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register

HINTS = ("multiple_of", "max_contiguous", "max_constancy")
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)


def _prec(node: Any) -> int:
    """Python binding strength of an expression (higher binds tighter); 100 for atoms."""
    if isinstance(node, _ATOMIC) or getattr(node, "lpar", None):
        return 100
    if isinstance(node, cst.UnaryOperation):
        return 1 if isinstance(node.operator, cst.Not) else 10
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power):
            return 11
        if isinstance(node.operator, (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo)):
            return 9
        return 8 if isinstance(node.operator, (cst.Add, cst.Subtract)) else 5
    return 0


def _need(parent: Any, child: cst.CSTNode) -> int:
    """How tightly an expression put in `child`'s place must bind."""
    if isinstance(parent, cst.BinaryOperation):
        return _prec(parent) + (0 if parent.left is child else 1)
    if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is child:
        return 100
    return 10 if isinstance(parent, cst.UnaryOperation) else 0


def _lang_names(module: cst.Module) -> tuple[set[str], dict[str, str], str]:
    """Prefixes that name triton.language here, functions imported from it bare, and how
    new code should spell it."""
    prefixes, direct, spell = {"tl", "triton.language"}, {}, ""
    for line in module.body:
        for s in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            names = s.names if isinstance(s, (cst.Import, cst.ImportFrom)) else ()
            mod = dotted(s.module) if isinstance(s, cst.ImportFrom) and s.module else ""
            for a in names if not isinstance(names, cst.ImportStar) else ():
                asname = a.asname.name if a.asname is not None else None
                local = asname.value if isinstance(asname, cst.Name) else dotted(a.name)
                if (isinstance(s, cst.Import) and dotted(a.name) == "triton.language") or (
                    mod == "triton" and dotted(a.name) == "language"
                ):
                    prefixes.add(local)
                    spell = spell or local
                elif mod == "triton.language":
                    direct[local] = dotted(a.name)
    return prefixes, direct, spell or "tl"


class _Source:
    """A parsed file: hint chains and forward anchors in its kernels, positions and parents."""

    def __init__(self, source: str) -> None:
        self.module = parse(source)
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        self.pos = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.prefixes, self.direct, self.tl = _lang_names(self.module)
        self.chains: list[tuple[cst.Call, str]] = []  # outermost hint calls, their function
        self.anchors: list[tuple[cst.CSTNode, str, dict[str, Any]]] = []  # forward
        stack: list[tuple[str, bool]] = []
        constexprs: list[set[str]] = []
        outer = self

        class Scan(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                stack.append((node.name.value, any(is_triton_jit(d) for d in node.decorators)))
                params = (*node.params.params, *node.params.kwonly_params)
                ann = {
                    p.name.value
                    for p in params
                    if p.annotation and "constexpr" in _code(p.annotation.annotation)
                }
                constexprs.append(ann)

            def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
                stack.pop()
                constexprs.pop()

            def visit_Call(self, node: cst.Call) -> None:
                arg = outer.parents.get(node)
                parent = outer.parents.get(arg) if arg is not None else None  # Call<-Arg<-Call
                if any(j for _, j in stack) and outer.hint(node) and not outer.hint(parent):
                    outer.chains.append((node, stack[-1][0]))

            def visit_Assign(self, node: cst.Assign) -> None:
                if any(j for _, j in stack) and (p := outer.offsets(node)) is not None:
                    outer.anchors.append((node, stack[-1][0], p))

            def visit_For(self, node: cst.For) -> None:
                if any(j for _, j in stack) and (p := outer.loop(node, constexprs[-1])) is not None:
                    outer.anchors.append((node, stack[-1][0], p))

        self.module.visit(Scan())

    def hint(self, node: Any) -> str:
        if not isinstance(node, cst.Call) or not node.args:
            return ""
        head, _, tail = dotted(node.func).rpartition(".")
        if tail in HINTS and (head in self.prefixes or head.startswith("tl.")):
            return tail
        return self.direct.get(tail, "") if not head and self.direct.get(tail) in HINTS else ""

    def arange_block(self, node: cst.BaseExpression) -> str | None:
        if (
            isinstance(node, cst.Call)
            and dotted(node.func).endswith("arange")
            and len(node.args) == 2
        ):
            lo, hi = node.args
            if isinstance(lo.value, cst.Integer) and lo.value.value == "0":
                return _code(hi.value)
        return None

    def offsets(self, node: cst.Assign) -> dict[str, Any] | None:
        """`o = X * B + arange(0, B)` (any order): provably runs of B from a multiple of B."""
        e = node.value
        if len(node.targets) != 1 or not isinstance(e, cst.BinaryOperation):
            return None
        if not isinstance(e.operator, cst.Add) or e.lpar:
            return None
        for ar, other in ((e.right, e.left), (e.left, e.right)):
            block = self.arange_block(ar)
            if not block or not isinstance(other, cst.BinaryOperation):
                continue
            if isinstance(other.operator, cst.Multiply) and block in (
                _code(other.left),
                _code(other.right),
            ):
                return {"kind": "offsets", "block": block, "target": _code(node.targets[0].target)}
        return None

    def loop(self, node: cst.For, constexprs: set[str]) -> dict[str, Any] | None:
        """`for v in [tl.]range(lo, hi, STEP)`, STEP a constexpr, v not hinted (or set) first."""
        it = node.iter
        if not isinstance(node.target, cst.Name) or not isinstance(it, cst.Call):
            return None
        if not dotted(it.func).endswith("range") or len(it.args) < 3 or it.args[2].keyword:
            return None
        var, lo, step = node.target.value, it.args[0].value, _code(it.args[2].value)
        if step not in constexprs and not isinstance(it.args[2].value, cst.Integer):
            return None  # hint values must be compile-time constants
        first = node.body.body[0] if isinstance(node.body, cst.IndentedBlock) else None
        stmt = first.body[0] if isinstance(first, cst.SimpleStatementLine) else None
        if isinstance(stmt, cst.Assign) and _code(stmt.targets[0].target) == var:
            return None  # already hinted, or v is reassigned
        proven = (isinstance(lo, cst.Integer) and lo.value == "0") or (
            isinstance(lo, cst.BinaryOperation)
            and isinstance(lo.operator, cst.Multiply)
            and step in (_code(lo.left), _code(lo.right))
        )
        return {"kind": "loop", "var": var, "step": step, "proven": proven}

    def unwrap(self, call: cst.Call) -> tuple[cst.BaseExpression, list[list[str]]]:
        """The hinted value under a chain of hints, and the hints outermost first."""
        hints: list[list[str]] = []
        node: cst.BaseExpression = call
        while isinstance(node, cst.Call) and (fn := self.hint(node)):
            values = [a for a in node.args if a.keyword is None or a.keyword.value == "values"]
            value = next(a for a in node.args if a.keyword is None or a.keyword.value == "input")
            hints.append([fn, _code(values[-1].value)])
            node = value.value
        return node, hints


class _Edit(cst.CSTTransformer):
    """Replace one node by identity; or drop one statement line (comments move to the next)."""

    def __init__(self, target: Any, new: Any) -> None:
        self.target: Any = target
        self.new: Any = new

    def on_leave(self, original_node: Any, updated_node: Any) -> Any:
        if self.new is not None and original_node is self.target:
            return self.new
        if self.new is None and isinstance(updated_node, (cst.IndentedBlock, cst.Module)):
            body: list[Any] = list(updated_node.body)
            for i, stmt in enumerate(original_node.body):
                if stmt is self.target:
                    del body[i]
                    if i < len(body):
                        lead = [*stmt.leading_lines, *body[i].leading_lines]
                        body[i] = body[i].with_changes(leading_lines=lead)
                    return updated_node.with_changes(
                        body=body or [cst.SimpleStatementLine([cst.Pass()])]
                    )
        return updated_node


@register
class MultipleOfHints(RewritePass):
    NAME = "multiple_of_hints"
    DESCRIPTION = "State tile offsets' alignment and contiguity (tl.max_contiguous(tl.multiple_of(offs, B), B), loop starts multiple_of STEP) so Triton proves 16-byte vector loads and coalesced layouts."
    CATEGORY = "hardware"
    ANCHOR = "offsets assignment (X * BLOCK + tl.arange(0, BLOCK)) or K-loop induction variable"

    def backward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            src, out = _Source(source), []
            for i, (call, fn) in enumerate(src.chains):
                inner, hints = src.unwrap(call)
                desc = " + ".join(f"{h}({v})" for h, v in hints) + f" on {_code(inner)}"
                params = {"hints": hints, "original": _code(call), "simplified": _code(inner)}
                if (stmt := self._self_assignment(src, call, inner)) is not None:
                    params["statement"] = _code(stmt.with_changes(leading_lines=[])).strip()
                out.append(self.site("backward", i, src.pos[call].start.line, fn, desc, **params))
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    @staticmethod
    def _self_assignment(src: _Source, call: cst.Call, inner: cst.BaseExpression) -> Any:
        """The statement line of `v = hint(v, ...)`, which backward deletes outright."""
        assign = src.parents.get(call)
        line = src.parents.get(assign) if assign is not None else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        same = _code(assign.targets[0].target) == _code(inner)
        return (
            line
            if same and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
            else None
        )

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            src = _Source(source)
            if site.index >= len(src.chains):
                return RewriteResult.skip(f"no hint call #{site.index} in a kernel here", site)
            call, fn = src.chains[site.index]
            inner, hints = src.unwrap(call)
            what = " + ".join(h for h, _ in hints)
            if (stmt := self._self_assignment(src, call, inner)) is not None:
                new = src.module.visit(_Edit(stmt, None)).code
                return RewriteResult(
                    True, f"removed {_code(call)} (a self-assignment) in {fn}", new, site
                )
            value = inner
            if _prec(inner) < _need(src.parents.get(call), call):
                value = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            new = src.module.visit(_Edit(call, value)).code
            return RewriteResult(True, f"removed {what} around {_code(inner)} in {fn}", new, site)

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            src, out = _Source(source), []
            for i, (node, fn, p) in enumerate(src.anchors):
                if p["kind"] == "offsets":
                    desc = f"offsets {p['target']}: max_contiguous(multiple_of(., {p['block']}))"
                else:
                    proof = "" if p["proven"] else " (assumes the loop starts at a multiple)"
                    desc = f"loop variable {p['var']}: multiple_of(., {p['step']}){proof}"
                out.append(self.site("forward", i, src.pos[node].start.line, fn, desc, **p))
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            src = _Source(source)
            if site.index >= len(src.anchors):
                return RewriteResult.skip(f"no offsets/loop anchor #{site.index} here", site)
            node, fn, anchor = src.anchors[site.index]
            p, tl = params or {}, src.tl
            # A backward site's params fit the same kind of anchor: a deleted `v = hint(v, ..)`
            # line (it has "statement") a loop, a hinted value an offsets assignment.
            hints = p.get("hints") if ("statement" in p) == isinstance(node, cst.For) else None
            if isinstance(node, cst.For):
                var, stmt = anchor["var"], p.get("statement", "")
                if not stmt.startswith(f"{var} ="):  # not this loop's own line: build it
                    fn_, values = (hints or [["multiple_of", anchor["step"]]])[-1]
                    stmt = f"{var} = {tl}.{fn_}({var}, {values})"
                rest = list(node.body.body)
                if len(rest) == 1 and _code(rest[0]).strip() == "pass":
                    rest = []  # the body backward left empty
                body = node.body.with_changes(body=[cst.parse_statement(stmt), *rest])
                new = src.module.visit(_Edit(node.body, body)).code
                return RewriteResult(True, f"added {stmt} in {fn}", new, site)
            assert isinstance(node, cst.Assign)
            if p.get("original") and _code(node.value) == p.get("simplified"):
                code = p["original"]  # the expert's exact text
            else:
                block = anchor["block"]
                code = _code(node.value)
                default = [["max_contiguous", block], ["multiple_of", block]]
                for fn_, values in reversed(hints or default):
                    code = f"{tl}.{fn_}({code}, {values})"
            new = src.module.visit(_Edit(node.value, cst.parse_expression(code))).code
            return RewriteResult(True, f"hinted {anchor['target']} in {fn}", new, site)

        return self.safe(run)
