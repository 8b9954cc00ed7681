"""A scan over a chunk loaded back to front, loaded in ascending addresses and scanned in reverse.

A suffix sum (a reverse cumsum, returns-to-go) written the first way that comes to mind walks
its row from the end and loads each chunk back to front, `pos = (n - 1 - done) -
tl.arange(0, CHUNK)`, so that a forward `tl.cumsum` over the lanes gives suffix sums. Lane i
then reads the address before lane i - 1's: the loads and stores cannot be vectorized (each
thread moves one element at a time). The same chunk loaded in ascending addresses, `pos = (n -
1 - done - (CHUNK - 1)) + tl.arange(0, CHUNK)`, with `tl.cumsum(..., reverse=True)`, computes the
same suffix sums over the same positions with vector loads and stores.

Forward only. A site is a kernel with one assignment `p = A - tl.arange(0, C)` (or its
`[None, :]`, the scanned axis 1 of a 2-D tile), A free of tl.arange, where every value that
depends on p's lane order (read from the structure, never from names) is only:
- combined lane by lane (arithmetic, comparisons, `.to`, tl.where, tl.maximum/minimum, tl.exp
  and the other elementwise functions) with values free of that order or of the other axis,
- loaded or stored at (tl.load / tl.store),
- reduced over that axis (tl.sum / tl.max / tl.min: order-free, up to rounding, as any tree),
- or scanned over that axis (tl.cumsum / tl.cumprod, which the rewrite turns around).
Why it is sound: after the rewrite lane i holds the position lane C - 1 - i held; everything
lane by lane moves with its position, a reduction sees the same values, and a scan turned
around sums, for each position, the same positions as before. Anything else that could read
the lane order (another tl.arange of that axis meeting p's values, a subscript, a reshape, an
argmax, a call the analysis does not know) makes the kernel no site, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from klineage.rewrite.base import ForwardOnly, RewriteResult, Site, dotted, is_triton_jit, parse
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register

# tl functions that work lane by lane
ELEMENTWISE = set(
    [
        "where",
        "maximum",
        "minimum",
        "exp",
        "exp2",
        "log",
        "log2",
        "abs",
        "sqrt",
        "rsqrt",
        "sigmoid",
        "fma",
        "clamp",
        "cast",
        "erf",
        "sin",
        "cos",
        "fdiv",
        "div_rn",
        "floor",
        "ceil",
    ]
)
REDUCE = {"sum", "max", "min"}
SCAN = {"cumsum", "cumprod"}


class NoSite(Exception):
    """Why a kernel is not a site."""


def _arange(node: cst.BaseExpression) -> tuple[cst.Call, int] | None:
    """`tl.arange(0, C)` -> (call, axis 0); `tl.arange(0, C)[None, :]` -> axis 1; else None."""
    if isinstance(node, cst.Call) and dotted(node.func).split(".")[-1] == "arange":
        return node, 0
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Call):
        inner = _arange(node.value)
        text = _code(node)[len(_code(node.value)) :].replace(" ", "")
        if inner and text == "[None,:]":
            return inner[0], 1
        if inner and text == "[:,None]":
            return inner[0], -1  # the other axis of a 2-D tile
    return None


@dataclass
class _Flow:
    """Which names carry p's lane order (mine) or another arange's on the same axis (other)."""

    axis: int
    mine: set[str] = field(default_factory=set)
    other: set[str] = field(default_factory=set)
    scans: list[cst.Call] = field(default_factory=list)

    def axis_of(self, call: cst.Call) -> int:
        for i, a in enumerate(call.args):
            if (a.keyword and a.keyword.value == "axis") or (a.keyword is None and i == 1):
                if isinstance(a.value, cst.Integer):
                    return int(a.value.value)
                raise NoSite(f"{_code(call)}: axis is not a literal")
        return 0

    def dep(self, node: cst.CSTNode) -> tuple[bool, bool]:
        """(reads p's order, reads another same-axis order) for an expression."""
        if isinstance(node, cst.Name):
            return node.value in self.mine, node.value in self.other
        found = _arange(node) if isinstance(node, cst.BaseExpression) else None
        if found is not None:
            # a 1-D tl.arange beside a [None, :] chunk broadcasts along the chunk's axis too
            return False, found[1] == self.axis or (self.axis == 1 and found[1] == 0)
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.Subscript):
            m, o = self.dep(node.value)
            if m:
                raise NoSite(f"{_code(node)}: a subscript of a value in p's lane order")
            if _code(node)[len(_code(node.value)) :].replace(" ", "") == "[:,None]":
                return False, False  # a column: the other axis of p's [None, :] tile
            return m, o
        if isinstance(node, cst.Attribute):
            return self.dep(node.value)
        if isinstance(node, cst.Arg):
            return self.dep(node.value)
        m = o = False
        for child in node.children:
            cm, co = self.dep(child)
            m, o = m or cm, o or co
        if m and o:
            raise NoSite(f"{_code(node)}: p's lanes meet another tl.arange's of the same axis")
        return m, o

    def _call(self, call: cst.Call) -> tuple[bool, bool]:
        name = dotted(call.func)
        tail = call.func.attr.value if isinstance(call.func, cst.Attribute) else name
        tail = tail.split(".")[-1]
        parts = [self.dep(a.value) for a in call.args]
        m = any(p[0] for p in parts)
        o = any(p[1] for p in parts)
        if isinstance(call.func, cst.Attribute) and not name.startswith(("tl.", "triton.")):
            m2, o2 = self.dep(call.func.value)  # x.to(...)
            m, o = m or m2, o or o2
            if tail != "to" and m:
                raise NoSite(f"{_code(call)}: a method of a value in p's lane order")
        elif not m and not o:
            return False, False
        elif tail in ("load", "store") or tail in ELEMENTWISE or tail == "to":
            pass
        elif tail in REDUCE:
            if self.axis_of(call) != self.axis:
                raise NoSite(f"{_code(call)}: reduced over another axis than p's")
            return False, False
        elif tail in SCAN:
            if self.axis_of(call) != self.axis:
                raise NoSite(f"{_code(call)}: scanned over another axis than p's")
            if m:
                self.scans.append(call)
        else:
            raise NoSite(f"{_code(call)}: {tail} of a value in p's lane order is not known")
        if m and o:
            raise NoSite(f"{_code(call)}: p's lanes meet another tl.arange's of the same axis")
        return m, o


@dataclass
class Found:
    kernel: str
    line: int
    assign: cst.Assign
    arange: cst.Call
    scans: list[cst.Call]


def _targets(s: cst.BaseSmallStatement) -> list[str]:
    if isinstance(s, cst.Assign):
        return [t.target.value for t in s.targets if isinstance(t.target, cst.Name)]
    if isinstance(s, (cst.AugAssign, cst.AnnAssign)) and isinstance(s.target, cst.Name):
        return [s.target.value]
    return []


def _smalls(body: cst.CSTNode) -> list[cst.CSTNode]:
    """Every small statement and compound header of a kernel body, in order (loops twice, so
    a value carried around a loop is seen on its second pass)."""
    out: list[cst.CSTNode] = []
    for stmt in getattr(body, "body", []):
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend(stmt.body)
        elif isinstance(stmt, (cst.For, cst.While)):
            out.append(stmt.iter if isinstance(stmt, cst.For) else stmt.test)
            inner = _smalls(stmt.body)
            out.extend(inner + inner)
        elif isinstance(stmt, cst.If):
            out.append(stmt.test)
            out.extend(_smalls(stmt.body))
            if stmt.orelse is not None:
                out.extend(_smalls(stmt.orelse.body) if isinstance(stmt.orelse, cst.Else) else [])
                if isinstance(stmt.orelse, cst.If):
                    raise NoSite("an elif chain")
        else:
            raise NoSite(f"a {type(stmt).__name__} statement")
    return out


def _two_dimensional(fn: cst.FunctionDef) -> bool:
    """Whether a kernel builds a 2-D value: a `[None, :]` / `[:, None]`, or tl.zeros / tl.full
    / tl.reshape / tl.broadcast_to with a shape of two or more sizes."""
    found = False

    class V(cst.CSTVisitor):
        def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
            nonlocal found
            if isinstance(node.slice, cst.Index) and isinstance(node.slice.value, cst.Name):
                found = found or node.slice.value.value == "None"

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            tail = dotted(node.func).split(".")[-1]
            if tail in ("zeros", "full", "reshape", "broadcast_to", "expand_dims"):
                shape = node.args[1].value if tail == "reshape" and len(node.args) > 1 else None
                shape = shape or (node.args[0].value if node.args else None)
                if tail == "expand_dims" or (
                    isinstance(shape, (cst.Tuple, cst.List)) and len(shape.elements) >= 2
                ):
                    found = True

    fn.visit(V())
    return found


def _kernel(fn: cst.FunctionDef) -> tuple[cst.Assign, cst.Call, list[cst.Call]]:
    flipped = [
        (s, a)
        for s in _smalls(fn.body)
        if isinstance(s, cst.Assign)
        and isinstance(s.value, cst.BinaryOperation)
        and isinstance(s.value.operator, cst.Subtract)
        and (a := _arange(s.value.right)) is not None
        and a[1] in (0, 1)
    ]
    assigns = list(dict.fromkeys(s for s, _ in flipped))
    if not assigns:
        raise NoSite("no `p = A - tl.arange(0, C)` (a chunk loaded back to front)")
    if len(assigns) > 1:
        raise NoSite("more than one chunk loaded back to front")
    assign, (arange, axis) = flipped[0]
    if axis == 0 and _two_dimensional(fn):
        raise NoSite(
            "a 2-D tile beside a 1-D chunk (which axis the chunk's lanes end on is not read)"
        )
    flow = _Flow(axis)
    end = assign.value
    assert isinstance(end, cst.BinaryOperation)
    if "arange" in _code(end.left):
        raise NoSite(f"{_code(end.left)}: the chunk's end reads a tl.arange")
    names = _targets(assign)
    if len(names) != 1 or len(assign.targets) != 1:
        raise NoSite("p is not assigned to one name")
    flow.mine.add(names[0])
    for s in _smalls(fn.body):
        if s is assign:
            continue
        if isinstance(s, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            value = s.value
            m, o = flow.dep(value) if value is not None else (False, False)
            for t in _targets(s):
                if isinstance(s, cst.AugAssign):
                    m, o = m or t in flow.mine, o or t in flow.other
                (flow.mine.add if m else flow.mine.discard)(t)
                (flow.other.add if o else flow.other.discard)(t)
            if not _targets(s) and m:
                raise NoSite(f"{_code(s)}: assigns p's lanes to something other than a name")
        elif isinstance(s, cst.Expr):
            flow.dep(s.value)
        elif isinstance(s, cst.BaseExpression):  # a loop's range, an if's test
            if flow.dep(s)[0]:
                raise NoSite(f"{_code(s)}: control flow reads p's lanes")
        elif not isinstance(s, (cst.Pass, cst.Return)):
            raise NoSite(f"a {type(s).__name__} statement")
    return assign, arange, list(dict.fromkeys(flow.scans))


def analyse(source: str) -> tuple[cst.Module, list[Found | tuple[str, str]]]:
    from libcst.metadata import MetadataWrapper, PositionProvider

    module = parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    lines = wrapper.resolve(PositionProvider)
    out: list[Found | tuple[str, str]] = []
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and any(is_triton_jit(d) for d in stmt.decorators):
            try:
                assign, arange, scans = _kernel(stmt)
            except NoSite as e:
                out.append((stmt.name.value, str(e)))
                continue
            line = lines[assign].start.line if assign in lines else lines[stmt].start.line
            out.append(Found(stmt.name.value, line, assign, arange, scans))
    return module, out


def _turned(call: cst.Call) -> cst.Call:
    """The scan turned around: `reverse=True` added, or a literal `reverse=True` removed."""
    was = next((a for a in call.args if a.keyword and a.keyword.value == "reverse"), None)
    if was is not None and not (
        isinstance(was.value, cst.Name) and was.value.value in ("True", "False")
    ):
        raise NoSite(f"{_code(call)}: reverse is not a literal")
    backward = was is not None and isinstance(was.value, cst.Name) and was.value.value == "True"
    text = ", ".join(
        _code(a.value) if a.keyword is None else f"{a.keyword.value}={_code(a.value)}"
        for a in call.args
        if a is not was
    )
    text += "" if backward else ", reverse=True"
    new = cst.parse_expression(f"{_code(call.func)}({text})")
    assert isinstance(new, cst.Call)
    return new


def _terms(node: cst.BaseExpression, sign: int = 1) -> list[tuple[int, cst.BaseExpression]]:
    """A sum's signed terms: `(n - 1 - done)` -> [(+1, n), (-1, 1), (-1, done)]."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        right = -sign if isinstance(node.operator, cst.Subtract) else sign
        return _terms(node.left, sign) + _terms(node.right, right)
    return [(sign, node)]


def _start(end: cst.BaseExpression, extent: str) -> str:
    """The first position of the chunk that ends at `end`: end - (C - 1), its integer literals
    folded (`(n - 1 - done)` -> `(n - done - CHUNK)`), so that the compiler can still read the
    address's alignment (n and done multiples of 16) and vectorize."""
    terms = _terms(end)
    constant = sum(s * int(t.value) for s, t in terms if isinstance(t, cst.Integer)) + 1
    rest = [(s, t) for s, t in terms if not isinstance(t, cst.Integer)]
    text = ""
    for s, t in rest:
        code = _code(t) if not isinstance(t, cst.BinaryOperation) else f"({_code(t)})"
        text += (" - " if s < 0 else " + ") + code if text else ("-" if s < 0 else "") + code
    if constant:
        text += f" {'+' if constant > 0 else '-'} {abs(constant)}" if text else str(constant)
    return f"({text} - {extent})" if text else f"(-{extent})"


def rewrite(module: cst.Module, found: Found) -> str:
    value = found.assign.value
    assert isinstance(value, cst.BinaryOperation)
    extent = (
        found.arange.args[1].value if len(found.arange.args) > 1 else found.arange.args[0].value
    )
    start = _start(value.left, _code(extent))
    new_value = cst.parse_expression(f"{start} + {_code(value.right)}")
    turned = {id(c): _turned(c) for c in found.scans}

    class T(cst.CSTTransformer):
        def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
            return updated.with_changes(value=new_value) if original is found.assign else updated

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            new = turned.get(id(original))
            return updated.with_changes(args=new.args) if new is not None else updated

    return module.visit(T()).code


@register
class AscendingScan(ForwardOnly):
    NAME = "ascending_scan"
    DESCRIPTION = (
        "Load a chunk scanned back to front (p = A - tl.arange(0, C)) in ascending addresses "
        "and scan it with tl.cumsum(..., reverse=True): the same suffix sums over the same "
        "positions, with loads and stores that can be vectorized."
    )
    CATEGORY = "memory"
    ANCHOR = "a chunk loaded back to front (A - tl.arange(0, C)) and scanned with tl.cumsum"
    IN_PROGRAM = True
    NO_BACKWARD = "no expert loads its chunks back to front"

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            _, found = analyse(source)
            sites = [f for f in found if isinstance(f, Found)]
            return [
                self.site(
                    "forward",
                    i,
                    f.line,
                    f.kernel,
                    f"{f.kernel}: {_code(f.assign)}",
                    kernel=f.kernel,
                )
                for i, f in enumerate(sites)
            ]

        return self.safe_sites(run)

    def why_not(self, source: str) -> list[str]:
        return self.reasons(lambda: analyse(source)[1], Found)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            module, found = analyse(source)
            mine = [
                f for f in found if isinstance(f, Found) and f.kernel == site.params.get("kernel")
            ]
            if not mine:
                why = next(
                    (
                        w
                        for k, w in (f for f in found if isinstance(f, tuple))
                        if k == site.params.get("kernel")
                    ),
                    "",
                )
                return RewriteResult.skip(
                    f"no back-to-front scan in {site.params.get('kernel')}: {why}", site
                )
            return RewriteResult(
                True,
                f"{mine[0].kernel}: ascending loads, reversed scan",
                rewrite(module, mine[0]),
                site,
            )

        return self.safe(run)
