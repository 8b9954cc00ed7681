"""exp2 / log2 with log2(e) folded in, instead of exp / log.

What it is: exp(x) = exp2(x * log2(e)) and ln(x) = log2(x) * ln(2). GPUs have base-2 units only
(MUFU.EX2 / LG2): `tl.exp(x)` lowers to a multiply by log2(e) and an ex2. Written as `exp2`, the
multiply folds into work the kernel already does: into a scale computed once (attention's
qk_scale = sm_scale * log2(e)) or into the subtraction of a row max as one FFMA per element
(`x * LOG2E - m * LOG2E`, with `m * LOG2E` a per-row scalar).

When it pays off: exponential-heavy kernels (softmax, attention, cross-entropy, log-sum-exp)
where non-matmul instructions per element bound the kernel (FA3: MUFU throughput, not MMA, limits
Hopper attention). Elsewhere it is ~free and ~useless.

Backward: `exp2(E)` becomes `exp(E * ln2)`, or the cleaner `exp(A)` / `exp(A - B / LOG2E)` when E
is `A * LOG2E` / `A * LOG2E - B` with a recognisable log2(e) (a name like LOG2E / RCP_LN2, or a
literal or module constant equal to 1.44269504...); `log2(E)` becomes `log(E) * log2(e)`, or just
`log(E)` where it was multiplied by ln(2). Forward is the reverse (exp -> exp2 with log2(e)
distributed over a sum, log -> log2 * ln2); given a backward site's params it restores the
expert's exact text.
"""

from __future__ import annotations

import math
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_triton_jit,
    names_under,
    parse,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
_SWAP = {"exp2": "exp", "log2": "log", "exp": "exp2", "log": "log2"}
_ATOMIC = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.Tuple,
    cst.List,
)


def _prec(node: cst.CSTNode) -> int:
    """Python binding strength of an expression (higher binds tighter); 100 for atoms."""
    if isinstance(node, _ATOMIC) or getattr(node, "lpar", None):
        return 100
    if isinstance(node, cst.UnaryOperation):
        return 1 if isinstance(node.operator, cst.Not) else 10
    if isinstance(node, cst.BinaryOperation):
        op = node.operator
        if isinstance(op, cst.Power):
            return 11
        if isinstance(op, (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo)):
            return 9
        return 8 if isinstance(op, (cst.Add, cst.Subtract)) else 5
    return 0


def _wrap(node: cst.BaseExpression, need: int) -> str:
    return _code(node) if _prec(node) >= need else f"({_code(node)})"


def _bare(node: cst.BaseExpression) -> str:
    """The expression as a sole call argument: its own redundant parentheses dropped."""
    if isinstance(node, cst.Tuple) or not getattr(node, "lpar", None):
        return _code(node)
    return _code(node.with_changes(lpar=[], rpar=[]))


def _need(parent: cst.CSTNode | None, child: cst.CSTNode) -> int:
    """How tightly an expression put in `child`'s place must bind."""
    if isinstance(parent, cst.BinaryOperation):
        return _prec(parent) + (0 if parent.left is child else 1)
    if isinstance(parent, cst.UnaryOperation):
        return 10
    if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is child:
        return 100
    if isinstance(parent, cst.Call) and parent.func is child:
        return 100
    return 8 if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)) else 0


def _const_value(node: cst.BaseExpression) -> float | None:
    """A number written as a literal, tl.constexpr(literal) or math.log(2)-style arithmetic."""
    if isinstance(node, (cst.Float, cst.Integer)):
        return float(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        v = _const_value(node.expression)
        return None if v is None else -v
    if isinstance(node, cst.Attribute) and dotted(node) == "math.e":
        return math.e
    if isinstance(node, cst.BinaryOperation) and isinstance(
        node.operator, (cst.Multiply, cst.Divide)
    ):
        a, b = _const_value(node.left), _const_value(node.right)
        if a is None or b is None or (isinstance(node.operator, cst.Divide) and b == 0):
            return None
        return a * b if isinstance(node.operator, cst.Multiply) else a / b
    if isinstance(node, cst.Call) and len(node.args) == 1:
        v = _const_value(node.args[0].value)
        fn = dotted(node.func)
        if v is None or (fn in ("math.log", "math.log2") and v <= 0):
            return None
        if fn == "math.log":
            return math.log(v)
        if fn == "math.log2":
            return math.log2(v)
        return v if fn.endswith("constexpr") or fn == "float" else None
    return None


def _local(alias: cst.ImportAlias, name: str) -> str:
    asname = alias.asname.name if alias.asname is not None else None
    return asname.value if isinstance(asname, cst.Name) else name


class _Context:
    """What a module calls triton.language, and its numeric constants."""

    def __init__(self, module: cst.Module) -> None:
        self.prefixes = {"tl", "tl.math", "triton.language", "triton.language.math"}
        self.imported: list[str] = []  # prefixes this file really imports, aliases first
        self.direct: dict[str, str] = {}  # bare name -> triton.language function
        self.constants: dict[str, float] = {}
        for line in module.body:
            for s in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                self._statement(s)

    def _statement(self, s: cst.BaseSmallStatement) -> None:
        if isinstance(s, cst.Import):
            for a in s.names:
                name = dotted(a.name)
                local = _local(a, name)
                if name == "triton.language" or (name == "triton" and a.asname is None):
                    head = "triton.language" if name == "triton" and a.asname is None else local
                    self.prefixes |= {head, f"{head}.math"}
                    self.imported.insert(len(self.imported) if "." in head else 0, head)
        elif isinstance(s, cst.ImportFrom) and s.module is not None:
            mod = dotted(s.module)
            for a in s.names if not isinstance(s.names, cst.ImportStar) else ():
                orig = dotted(a.name)
                local = _local(a, orig)
                if mod == "triton" and orig == "language":
                    self.prefixes |= {local, f"{local}.math"}
                    self.imported.insert(0, local)
                elif mod in ("triton.language", "triton.language.math"):
                    self.direct[local] = orig
        elif isinstance(s, (cst.Assign, cst.AnnAssign)) and s.value is not None:
            targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]
            value = _const_value(s.value)
            for t in targets:
                if isinstance(t, cst.Name) and value is not None:
                    self.constants[t.value] = value

    def op(self, call: cst.Call) -> str:
        """'exp2', 'exp', 'log2' or 'log' for a one-argument Triton call of it, else ''."""
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return ""
        callee = dotted(call.func)
        head, _, tail = callee.rpartition(".")
        if tail in _SWAP and (
            head in self.prefixes or head.startswith(("tl.", "triton.language."))
        ):
            return tail
        return self.direct.get(callee, "") if self.direct.get(callee, "") in _SWAP else ""

    def spell(self, call: cst.Call, new: str) -> str | None:
        if isinstance(call.func, cst.Attribute):
            return f"{_code(call.func.value)}.{new}"
        return f"{self.imported[0]}.{new}" if self.imported else None

    def is_const(self, node: cst.BaseExpression, target: float) -> bool:
        value = _const_value(node)
        if value is None and isinstance(node, (cst.Name, cst.Attribute)):
            name = node.value if isinstance(node, cst.Name) else node.attr.value
            value = self.constants.get(name)
            if value is None:  # a parameter or an import: trust an unambiguous name
                up = name.upper()
                if any(k in up for k in ("LOG2E", "LOG2_E", "RCP_LN2", "INV_LN2")):
                    value = LOG2E
                elif "LN2" in up or "LN_2" in up:
                    value = LN2
        return value is not None and abs(value - target) <= 1e-6 * target


class _Scan(cst.CSTVisitor):
    def __init__(self, ctx: _Context, ops: set[str]) -> None:
        self.ctx, self.ops = ctx, ops
        self.stack: list[tuple[str, bool]] = []
        self.found: list[tuple[cst.Call, str, str]] = []  # call, op, function

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append((node.name.value, any(is_triton_jit(d) for d in node.decorators)))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if any(jit for _, jit in self.stack) and self.ctx.op(node) in self.ops:
            self.found.append((node, self.ctx.op(node), self.stack[-1][0]))


class _Replace(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new: cst.CSTNode) -> None:
        self.target, self.new = target, new

    def on_leave(self, original_node: Any, updated_node: Any) -> Any:
        return self.new if original_node is self.target else updated_node


class _Source:
    """A parsed file with its calls of `ops` in kernels, positions and parents."""

    def __init__(self, source: str, ops: set[str]) -> None:
        self.module = parse(source)
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        self.pos = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.ctx = _Context(self.module)
        scan = _Scan(self.ctx, ops)
        self.module.visit(scan)
        self.found = scan.found

    def place(
        self, target: cst.BaseExpression, code: str, verbatim: bool = False
    ) -> tuple[str, str]:
        """(new file, new expression text) with `code` put where `target` is."""
        new = cst.parse_expression(code)
        if not verbatim:
            if target.lpar and _prec(new) < 100:  # keep the author's parentheses if needed
                new = new.with_changes(lpar=target.lpar, rpar=target.rpar)
            elif _prec(new) < _need(self.parents.get(target), target):
                new = new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return self.module.visit(_Replace(target, new)).code, _code(new)


def _names(node: cst.CSTNode | None) -> list[str]:
    return names_under(node) if node is not None else []


def _carried(loop: cst.For | cst.While) -> set[str]:
    """Names a loop carries from one step to the next: assigned in its body and read there
    before that (`m_new = tl.maximum(m, ...)` ... `m = m_new` carries m; `a = tl.load(...)`
    does not carry a)."""
    first: dict[str, str] = {}  # name -> "read" or "write", whichever its body does first
    written: set[str] = set()

    def see(reads: list[str], writes: list[str]) -> None:
        for n in reads:
            first.setdefault(n, "read")
        for n in writes:
            first.setdefault(n, "write")
        written.update(writes)

    def walk(block: cst.BaseSuite) -> None:
        for stmt in block.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        targets = [n for t in small.targets for n in _names(t.target)]
                        see(_names(small.value), targets)
                    elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                        target = _names(small.target)
                        extra = target if isinstance(small, cst.AugAssign) else []
                        see(extra + _names(small.value), target)
                    else:
                        see(_names(small), [])
            elif isinstance(stmt, (cst.If, cst.For, cst.While)):
                head = stmt.iter if isinstance(stmt, cst.For) else stmt.test
                see(_names(head), _names(stmt.target) if isinstance(stmt, cst.For) else [])
                walk(stmt.body)
                orelse = getattr(stmt, "orelse", None)
                while orelse is not None:
                    if isinstance(orelse, cst.If):
                        see(_names(orelse.test), [])
                    walk(orelse.body)
                    orelse = getattr(orelse, "orelse", None) if isinstance(orelse, cst.If) else None
            else:
                see(_names(stmt), [])

    walk(loop.body)
    return {n for n in written if first[n] == "read"}


def _compounds(src: _Source, call: cst.Call, e: cst.BaseExpression) -> bool:
    """Whether exp(e) sits in a loop and e reads a name the loop carries: a rescale factor
    (`l = l * exp(m - m_new)`, `alpha = exp(m_i - m_new)`) applied once a step. Its error then
    compounds over the steps instead of staying one rounding: with FMA contraction (Triton's
    default on GPUs, not in the interpreter) `m * LOG2E - m_new * LOG2E` is the rounding residue
    of `m * LOG2E`, not 0, when m == m_new: the column softmax's 2048-step walk of 32x logits
    (m * LOG2E near 600, an fp32 ulp 6e-5 there) was 4% off on an H100 (2026-12-06;
    benchmarks/fma_rescale.py emulates it). `(m - m_new) * LOG2E` is exactly 0 there."""
    node: cst.CSTNode | None = src.parents.get(call)
    while node is not None and not isinstance(node, cst.FunctionDef):
        if isinstance(node, (cst.For, cst.While)):
            return bool(set(_names(e)) & _carried(node))
        node = src.parents.get(node)
    return False


def _inv(k: float) -> float:
    return LOG2E if k == LN2 else LN2


def _scaled(
    ctx: _Context, node: cst.BaseExpression, k: float, need: int, divide_by: Any = None
) -> tuple[str, cst.BaseExpression | None, cst.BaseExpression | None]:
    """Code for node * k binding at least `need`; when a factor 1/k in node cancels, also the
    operand left and the constant that cancelled. `divide_by`: write node / it instead."""
    if isinstance(node, cst.BinaryOperation) and not node.lpar:
        if isinstance(node.operator, cst.Divide) and ctx.is_const(node.right, k):
            return _wrap(node.left, need), node.left, node.right
        if isinstance(node.operator, cst.Multiply):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if ctx.is_const(b, _inv(k)):
                    return _wrap(a, need), a, b
    if divide_by is not None:
        return f"{_wrap(node, 9)} / {_code(divide_by)}", None, None
    return f"{_wrap(node, 9)} * {k!r}", None, None


@register
class Exp2Log2e(RewritePass):
    NAME = "exp2_log2e"
    DESCRIPTION = "Write exp/log as exp2/log2 with log2(e) folded into an existing scale or FFMA (x*LOG2E - m*LOG2E), saving one FP32 multiply per element before each MUFU.EX2; factored, (m - m_new)*LOG2E, in a loop's carried rescale, where the FMA's rounding residue would compound."
    CATEGORY = "arithmetic"
    ANCHOR = "tl.exp / tl.exp2 / tl.log / tl.log2 call in a kernel"

    def _plan(self, src: _Source, call: cst.Call, op: str) -> tuple[cst.BaseExpression, str] | str:
        """(node to replace, its replacement) rebasing `op` (exp2 <-> exp, log2 <-> log)."""
        callee = src.ctx.spell(call, _SWAP[op])
        if callee is None:
            return f"{op} is imported bare and no triton.language alias spells {_SWAP[op]}"
        ctx, e = src.ctx, call.args[0].value
        if op.startswith("log"):  # log2(E) = log(E) * log2(e); log(E) = log2(E) * ln(2)
            k = LOG2E if op == "log2" else LN2
            parent = src.parents.get(call)
            if isinstance(parent, cst.BinaryOperation) and isinstance(
                parent.operator, cst.Multiply
            ):
                other = parent.right if parent.left is call else parent.left
                if ctx.is_const(other, _inv(k)):
                    return parent, f"{callee}({_bare(e)})"
            return call, f"{callee}({_bare(e)}) * {k!r}"
        k = LN2 if op == "exp2" else LOG2E  # exp2(E) = exp(E * ln(2)); exp(E) = exp2(E * log2(e))
        code, rest, _ = _scaled(ctx, e, k, 0)
        if rest is not None:
            return call, f"{callee}({_bare(rest)})"
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Add, cst.Subtract)):
            left, cancelled, const = _scaled(ctx, e.left, k, 8)
            # forward distributes (FFMA form) except in a carried rescale, where it compounds
            distribute = op == "exp" and not _compounds(src, call, e)
            if distribute or cancelled is not None:
                right = _scaled(ctx, e.right, k, 9, const if op == "exp2" else None)[0]
                sign = " - " if isinstance(e.operator, cst.Subtract) else " + "
                return call, f"{callee}({left}{sign}{right})"
        return call, f"{callee}({code})"

    def _sites(self, source: str, direction: str, ops: set[str]) -> list[Site]:
        def run() -> list[Site]:
            src, out = _Source(source, ops), []
            for i, (call, op, fn) in enumerate(src.found):
                plan = self._plan(src, call, op)
                if isinstance(plan, str):
                    continue
                original, simplified = _code(plan[0]), src.place(*plan)[1]
                params = {"op": op}
                if direction == "backward":  # what forward needs to restore this exact text
                    params.update(original=original, simplified=simplified)
                line = src.pos[call].start.line
                desc = f"{original} -> {simplified}"
                out.append(self.site(direction, i, line, fn, desc, **params))
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def _rewrite(
        self, source: str, site: Site, ops: set[str], params: dict[str, Any]
    ) -> RewriteResult:
        src = _Source(source, ops)
        if site.index >= len(src.found):
            return RewriteResult.skip(
                f"no {'/'.join(sorted(ops))} call #{site.index} in a kernel here", site
            )
        call, op, fn = src.found[site.index]
        if site.direction == "backward" and site.params.get("op", op) != op:
            return RewriteResult.skip(f"call #{site.index} is {op}, not {site.params['op']}", site)
        # Forward at the place a backward step simplified: the expert's own text, verbatim.
        node: cst.CSTNode | None = call
        for _ in range(3 if site.direction == "forward" and params.get("original") else 0):
            if isinstance(node, cst.BaseExpression) and _code(node) == params.get("simplified"):
                new, _ = src.place(node, params["original"], verbatim=True)
                return RewriteResult(True, f"restored {params['original']} in {fn}", new, site)
            node = src.parents.get(node) if node is not None else None
        plan = self._plan(src, call, op)
        if isinstance(plan, str):
            return RewriteResult.skip(plan, site)
        new, text = src.place(*plan)
        return RewriteResult(True, f"{_code(plan[0])} -> {text} in {fn}", new, site)

    def backward_sites(self, source: str) -> list[Site]:
        return self._sites(source, "backward", {"exp2", "log2"})

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return self.safe(self._rewrite, source, site, {"exp2", "log2"}, {})

    def forward_sites(self, source: str) -> list[Site]:
        return self._sites(source, "forward", {"exp", "log"})

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        return self.safe(self._rewrite, source, site, {"exp", "log"}, params or {})
