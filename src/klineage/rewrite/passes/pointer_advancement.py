"""Pointer advancement: step a pointer tile by a constant each loop iteration.

An expert builds the 2-D pointer tile once before the loop (`a_ptrs = a_ptr + offs_m * s_m +
offs_k * s_k`) and adds a scalar per iteration (`a_ptrs += BLOCK_K * stride_ak`) instead of
recomputing base + per-element offsets every iteration: one scalar add instead of per-element
multiplies and adds, and a simple induction variable for the software pipeliner. It pays off in
K loops (matmul) and K/V loops (attention), where the address arithmetic competes with the loads.

Backward (meaning kept): `P_base = P` before the loop, the `+=` deleted, and
`P = P_base + (k - start) // step * (STEP)` as the first statement of the loop body, read from
the loop variable before anything can reassign it (`k * (STEP)` for range(0, n)). Skipped with a
reason when the advance is conditional, the step or the range bounds change in the loop, P is
written twice, read after its advance, or live after the loop, or the body has continue/break.
Forward is the reverse when `P = base + <iteration> * STEP` appears in a loop body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_call_to,
    is_triton_jit,
    names_under,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.passes.rows_per_program import walk
from klineage.rewrite.registry import register

Found = tuple[cst.For, cst.FunctionDef, list[cst.For]]


def _unparen(node: cst.BaseExpression) -> str:
    return _code(node.with_changes(lpar=[], rpar=[]))


def _atom(code: str) -> str:
    e = cst.parse_expression(code)
    simple = (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)
    return code if isinstance(e, simple) else f"({code})"


def _assigned(node: cst.CSTNode) -> set[str]:
    """Names written under node (assignments of every kind, loop targets)."""
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)):
                out.update(names_under(n.target))
            return True

    node.visit(V())
    return out


def _has(node: cst.CSTNode, kinds: tuple[type, ...]) -> bool:
    hit: list[cst.CSTNode] = []

    class V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            hit.extend([n] if isinstance(n, kinds) else [])
            return not hit

    node.visit(V())
    return bool(hit)


def _range(loop: cst.For) -> tuple[str, str, str] | None:
    """(loop variable, start, step) of `for v in range / tl.range / tl.static_range(...)`."""
    it = loop.iter
    if not (isinstance(loop.target, cst.Name) and isinstance(it, cst.Call)):
        return None
    pos = [_unparen(a.value) for a in it.args if a.keyword is None]
    if dotted(it.func).split(".")[-1] not in ("range", "static_range") or not 1 <= len(pos) <= 3:
        return None
    kw = [_unparen(a.value) for a in it.args if a.keyword and a.keyword.value == "step"]
    step = pos[2] if len(pos) == 3 else kw[0] if kw else "1"
    return loop.target.value, pos[0] if len(pos) >= 2 else "0", step


def _index(var: str, start: str, step: str) -> str:
    """The iteration number of `var` as code: k, k // s, (k - a), (k - a) // s."""
    idx = var if start == "0" else f"({var} - {_atom(start)})"
    return idx if step == "1" else f"{idx} // {_atom(step)}"


def _is_index(node: cst.BaseExpression, var: str, start: str, step: str) -> bool:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.FloorDivide):
        if _unparen(node.right) != step:
            return False
        node, step = node.left, "1"
    if step != "1":
        return False
    if isinstance(node, cst.Name):
        return node.value == var and start == "0"
    return (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.Subtract)
        and _code(node.left) == var
        and _unparen(node.right) == start
    )


def _recompute(
    stmt: cst.BaseStatement, loop: cst.For
) -> tuple[str, cst.BaseExpression, str] | None:
    """(P, base, STEP) when stmt is `P = base + <iteration of loop> * STEP` (either order)."""
    rng = _range(loop)
    a = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    if rng is None or not isinstance(a, cst.Assign) or len(a.targets) != 1:
        return None
    target, v = a.targets[0].target, a.value
    if not (isinstance(target, cst.Name) and isinstance(v, cst.BinaryOperation)):
        return None
    prod = v.right
    if isinstance(v.operator, cst.Add) and isinstance(prod, cst.BinaryOperation):
        for idx, step in ((prod.left, prod.right), (prod.right, prod.left)):
            if isinstance(prod.operator, cst.Multiply) and _is_index(idx, *rng):
                return target.value, v.left, _unparen(step)
    return None


class _Loops(cst.CSTVisitor):
    """Every for loop inside a @triton.jit function, with its function and enclosing loops."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.fns: list[cst.FunctionDef] = []
        self.loops: list[cst.For] = []
        self.found: list[Found] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.fns.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.fns.pop()

    def visit_For(self, node: cst.For) -> None:
        fn = next((f for f in reversed(self.fns) if any(map(is_triton_jit, f.decorators))), None)
        if fn is not None:
            self.found.append((node, fn, list(self.loops)))
        self.loops.append(node)

    def leave_For(self, original_node: cst.For) -> None:
        self.loops.pop()


def _analyse(source: str) -> tuple[cst.Module, list[Found], Any]:
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    loops = _Loops()
    wrapper.visit(loops)
    return module, loops.found, wrapper.resolve(PositionProvider)


def _advances(loop: cst.For) -> list[cst.AugAssign]:
    """`P += STEP` owned by this loop (not a nested one), P in a tl.load/tl.store pointer."""
    ptrs = {
        n
        for c in walk(loop.body)
        if isinstance(c, cst.Call) and is_call_to(c, "tl.load", "tl.store") and c.args
        for n in names_under(c.args[0].value)
    }
    out: list[cst.AugAssign] = []

    class V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> bool:
            return n is loop

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            if isinstance(n.operator, cst.AddAssign) and _code(n.target) in ptrs:
                out.append(n)

    loop.visit(V())
    return out


def _live_after(found: Found, name: str, pos: Any) -> bool:
    """`name` appears after the loop, or an enclosing loop carries it into its next pass."""
    loop, fn, outer = found
    end = pos[loop].end
    later = [
        n
        for n in _name_nodes(fn.body, name)
        if (pos[n].start.line, pos[n].start.column) > (end.line, end.column)
    ]
    resets = [
        any(pos[s].end.line < pos[loop].start.line and name in _assigned(s) for s in o.body.body)
        for o in outer
    ]
    return bool(later) or not all(resets)


def _name_nodes(node: cst.CSTNode, name: str) -> list[cst.Name]:
    found: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.extend([n] if n.value == name else [])

    node.visit(V())
    return found


def _unsafe(found: Found, p: str, k: int, pos: Any) -> str | None:
    """Why trading P's `+=` at body[k] for a recomputation would change the kernel, or None."""
    loop, body = found[0], list(found[0].body.body)
    if _range(loop) is None:
        return f"the loop at line {pos[loop].start.line} is not `for <name> in range(...)`"
    if _has(loop.body, (cst.Continue, cst.Break)):
        return "the loop body has continue/break"
    if sum(p in _assigned(s) for s in body) != 1:
        return f"{p} is assigned more than once in the loop"
    if any(p in names_under(s) for s in body[k + 1 :]):
        return f"{p} is read after its advance in the same iteration"
    if _live_after(found, p, pos):
        return f"{p} is used after the loop (it would hold a different value there)"
    return None


class _Edit(cst.CSTTransformer):
    """Edit `loop`'s body with edit_body and the block holding it with edit_block."""

    def __init__(self, loop: cst.For, edit_body: Any, edit_block: Any) -> None:
        self.loop, self.edit_body, self.edit_block = loop, edit_body, edit_block

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: Any) -> Any:
        at = next((i for i, s in enumerate(original_node.body) if s is self.loop), None)
        if at is None:
            return updated_node
        body = list(updated_node.body)
        loop = body[at]
        body[at] = loop.with_changes(
            body=loop.body.with_changes(body=self.edit_body(list(loop.body.body)))
        )
        return updated_node.with_changes(body=self.edit_block(body, at))


def _body(loop: cst.For) -> list[cst.BaseStatement]:
    return list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []


def _only(stmt: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    """The statement of a one-statement line, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def _put_before(body: list[Any], at: int, code: str) -> list[Any]:
    """body with `code` inserted before body[at], which hands it its leading lines."""
    stmt = cst.parse_statement(code + "\n").with_changes(leading_lines=body[at].leading_lines)
    return [*body[:at], stmt, body[at].with_changes(leading_lines=()), *body[at:][1:]]


# A site found in a loop: the statement it stands at, its description, its params, and what
# simplify/apply needs to rewrite it.
Hit = tuple[cst.CSTNode, str, dict[str, Any], Any]


def _advance_hits(found: Found, pos: Any) -> Iterator[Hit]:
    """Backward: each `P += STEP` of the loop, with (found, the advance, its index in the loop
    body or None when it is nested in a block)."""
    loop = found[0]
    for adv in _advances(loop):
        p, step = _code(adv.target), _code(adv.value)
        k = next((i for i, s in enumerate(_body(loop)) if _only(s) is adv), None)
        tail = len(loop.body.body) - 1 - k if k is not None else 0
        what = f"{p} += {step} in the loop at line {pos[loop].start.line}"
        yield adv, what, {"pointer": p, "step": step, "tail_offset": tail}, (found, adv, k)


def _recompute_hits(found: Found, pos: Any) -> Iterator[Hit]:
    """Forward: each `P = base + <iteration> * STEP` of the loop body that an advance can
    replace, with (found, its index in the loop body, base)."""
    loop = found[0]
    for k, stmt in enumerate(_body(loop)):
        m = _recompute(stmt, loop)
        if m is None:
            continue
        p, base, step = m
        variant = _assigned(loop.body) | {loop.target.value}  # type: ignore[attr-defined]
        uses = set(names_under(base)) | set(names_under(cst.parse_expression(step)))
        if (
            p in names_under(base)
            or uses & variant
            or any(p in names_under(s) for s in loop.body.body[:k])
        ):
            continue
        if _unsafe(found, p, len(loop.body.body) - 1, pos) is None:
            what = f"{p} recomputed from the loop index each iteration"
            yield stmt, what, {"pointer": p, "step": step}, (found, k, base)


@register
class PointerAdvancement(RewritePass):
    NAME = "pointer_advancement"
    DESCRIPTION = (
        "Build the pointer tile once before the loop and advance it by a constant each iteration"
        " (a_ptrs += BLOCK_K * stride_ak) instead of recomputing base + per-element offsets:"
        " one scalar add per iteration, and a simple induction variable for the pipeliner."
    )
    CATEGORY = "arithmetic"
    ANCHOR = "loop-carried tl.load / tl.store pointer (K loop, K/V loop)"

    def _hits(
        self, direction: str, source: str, find: Callable[[Found, Any], Iterator[Hit]]
    ) -> tuple[cst.Module, list[tuple[Site, Any]], Any]:
        """The sites find(found, positions) yields in each loop, numbered across the source and
        each with what simplify/apply needs; the module and positions they were found in."""
        module, loops, pos = _analyse(source)
        out: list[tuple[Site, Any]] = []
        for found in loops:
            for node, what, params, hit in find(found, pos):
                line, fn = pos[node].start.line, found[1].name.value
                out.append((self.site(direction, len(out), line, fn, what, **params), hit))
        return module, out, pos

    def _backward(self, source: str) -> tuple[cst.Module, list[tuple[Site, Any]], Any]:
        return self._hits("backward", source, _advance_hits)

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(lambda: [s for s, _ in self._backward(source)[1]])

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            module, sites, pos = self._backward(source)
            if site.index >= len(sites):
                return RewriteResult.skip(f"no pointer advance #{site.index} here", site)
            found, adv, k = sites[site.index][1]
            loop, fn = found[0], found[1]
            p, step, rng = _code(adv.target), _code(adv.value), _range(loop)
            if k is None:
                return RewriteResult.skip(
                    f"{p} is advanced conditionally (inside a nested block)", site
                )
            if rng is None:
                return RewriteResult.skip(
                    f"the loop at line {pos[loop].start.line} is not `for <name> in range(...)`",
                    site,
                )
            if set(names_under(adv.value)) & (_assigned(loop.body) | {rng[0]}):
                return RewriteResult.skip(
                    f"the step `{step}` changes inside the loop (not constant)", site
                )
            bounds = cst.parse_expression(f"({rng[1]}, {rng[2]})")
            if set(names_under(bounds)) & _assigned(loop.body):
                return RewriteResult.skip(
                    "the range start or step is reassigned inside the loop", site
                )
            reason = _unsafe(found, p, k, pos)
            if reason is not None:
                return RewriteResult.skip(reason, site)
            taken, base = set(names_under(fn)), f"{p}_base"
            while base in taken:
                base += "_"
            recompute = cst.parse_statement(f"{p} = {base} + {_index(*rng)} * {_atom(step)}\n")

            def edit_body(body: list[Any]) -> list[Any]:
                del body[k]
                top = 0  # after recomputations already there, keeping the pointers' order
                while top < len(body) and _recompute(body[top], loop) is not None:
                    top += 1
                return [*body[:top], recompute, *body[top:]]

            edit = _Edit(loop, edit_body, lambda body, at: _put_before(body, at, f"{base} = {p}"))
            reason = f"{p} recomputed from {rng[0]} instead of advanced by {step}"
            return RewriteResult(True, reason, module.visit(edit).code, site)

        return self.safe(run)

    def _forward(self, source: str) -> tuple[cst.Module, list[tuple[Site, Any]]]:
        module, out, _ = self._hits("forward", source, _recompute_hits)
        return module, out

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(lambda: [s for s, _ in self._forward(source)[1]])

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def rewrite(module: cst.Module, hit: tuple[Site, Any]) -> RewriteResult:
            fs, (found, k, base) = hit
            p, step, base_code = fs.params["pointer"], fs.params["step"], _code(base)
            tail = max(int((params or {}).get("tail_offset", 0)), 0)
            alone = isinstance(base, cst.Name) and names_under(found[1]).count(base_code) == 2

            def edit_body(body: list[Any]) -> list[Any]:
                del body[k]
                reads = [i for i, s in enumerate(body) if p in names_under(s)]
                at = max(len(body) - tail, reads[-1] + 1 if reads else 0)
                return [*body[:at], cst.parse_statement(f"{p} += {step}\n"), *body[at:]]

            def edit_block(body: list[Any], at: int) -> list[Any]:
                for j in range(at - 1, -1, -1):  # `base = P` above the loop: delete it
                    s = body[j]
                    if (
                        alone
                        and _code(s.with_changes(leading_lines=())).strip() == f"{base_code} = {p}"
                    ):
                        nxt = body[j + 1].with_changes(
                            leading_lines=[*s.leading_lines, *body[j + 1].leading_lines]
                        )
                        return [*body[:j], nxt, *body[j + 2 :]]
                    if {p, base_code} & _assigned(s):
                        break
                return _put_before(body, at, f"{p} = {base_code}")

            new = module.visit(_Edit(found[0], edit_body, edit_block)).code
            return RewriteResult(True, f"{p} advanced by {step} each iteration", new, site)

        return self.rewrite_at(lambda: self._forward(source), site, "recomputed pointer", rewrite)
