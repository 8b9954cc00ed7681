"""Hopper TMA loads through tensor descriptors, dispatched at launch by a capability guard.

A tensor descriptor (`tl.make_tensor_descriptor` in the kernel, or a host-side
`TensorDescriptor`) lets the tensor memory accelerator (compute capability >= 9) move a whole
tile global -> shared memory in one instruction issued by one thread: no per-thread address
arithmetic or predicates, hardware zero-fill out of bounds, a swizzled layout ready for wgmma.
It frees registers and issue slots for the tensor-core pipeline (~5-15% on large bf16 matmuls
in Triton's tutorials). Experts keep a separate TMA kernel next to the pointer kernel and pick
one in the launcher with a guard (`if _use_tma(a, b, c): ... else: ...`) that checks the GPU
generation, dtypes, alignment and that the interpreter is not running.

Backward replaces the guard in the dispatching `if` with the constant that always takes the
pointer path (False; True when the TMA kernel is in the `else` branch); params record the guard
text and the branch. The TMA kernel and the guard function stay in the file, dead. Forward
restores the guard from params; a file with no TMA kernel is skipped (writing a TMA kernel from
a pointer kernel is out of scope).

On the CPU the TMA path never runs (the interpreter has no TMA; the expert's guard says False
there), so gating either direction on the CPU checks the pointer path, which is what runs
anyway: the pass's effect can only be measured on a GPU of compute capability >= 9.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_triton_jit,
    parse,
    positions,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.passes.causal_block_skipping_analysis import _names, _walk
from klineage.rewrite.registry import register

_DESCRIPTOR_CALLS = ("make_tensor_descriptor", "_experimental_make_tensor_descriptor")
_HOST_DESCRIPTOR = "TensorDescriptor"


def _jit(fn: cst.FunctionDef) -> bool:
    return any(is_triton_jit(d) for d in fn.decorators)


def _tma_names(module: cst.Module) -> set[str]:
    """TMA kernels (jit functions building descriptors), the host descriptor class, and every
    function that reaches one of them (a launcher helper)."""
    fns = [n for n in _walk(module) if isinstance(n, cst.FunctionDef)]
    names = {
        f.name.value
        for f in fns
        if _jit(f)
        and any(
            isinstance(c, cst.Call) and dotted(c.func).split(".")[-1] in _DESCRIPTOR_CALLS
            for c in _walk(f.body)
        )
    }
    if _HOST_DESCRIPTOR in _names(module):
        names.add(_HOST_DESCRIPTOR)
    grown = True
    while grown and names:
        grown = False
        for f in fns:
            if f.name.value not in names and not _jit(f) and _names(f.body) & names:
                names.add(f.name.value)
                grown = True
    return names


@dataclass
class _Dispatch:
    node: cst.If
    function: str
    tma_branch: str  # "body" or "orelse"
    kernels: list[str]


def _dispatches(module: cst.Module, tma: set[str]) -> list[_Dispatch]:
    """`if` statements in host code with TMA in one branch and not in the other."""
    out: list[_Dispatch] = []

    def visit(node: cst.CSTNode, function: str) -> None:
        if isinstance(node, cst.FunctionDef):
            if _jit(node):
                return
            function = node.name.value
        if isinstance(node, cst.If) and function:
            body = _names(node.body) & tma
            orelse = _names(node.orelse) & tma if node.orelse is not None else set()
            if body and not orelse:
                out.append(_Dispatch(node, function, "body", sorted(body)))
            elif orelse and not body and isinstance(node.orelse, cst.Else):
                out.append(_Dispatch(node, function, "orelse", sorted(orelse)))
        for child in node.children:
            visit(child, function)

    visit(module, "")
    return out


def _pointer_constant(d: _Dispatch) -> str:
    return "False" if d.tma_branch == "body" else "True"


@register
class TmaDescriptors(RewritePass):
    NAME = "tma_descriptors"
    DESCRIPTION = (
        "On Hopper (sm >= 90), dispatch to a kernel that moves tiles through tensor descriptors "
        "(TMA: one instruction per tile, no address math or masks), guarded at launch."
    )
    CATEGORY = "hardware"
    ANCHOR = (
        "launcher `if guard(...):` picking a tl.make_tensor_descriptor kernel over a pointer one"
    )

    def _found(self, source: str, direction: str) -> tuple[cst.Module, list[_Dispatch]]:
        module = parse(source)
        found = []
        for d in _dispatches(module, _tma_names(module)):
            test = _code(d.node.test)
            if direction == "backward":
                keep = test not in ("True", "False")
            else:
                keep = test == _pointer_constant(d)
            if keep:
                found.append(d)
        return module, found

    def _sites(self, source: str, direction: str) -> list[Site]:
        module, found = self._found(source, direction)
        _, pos = positions(module)
        out = []
        for i, d in enumerate(found):
            test = _code(d.node.test)
            kernels = ", ".join(d.kernels)
            if direction == "backward":
                params: dict[str, Any] = {"guard": test, "tma_branch": d.tma_branch}
                if isinstance(d.node.test, cst.Call):
                    params["guard_function"] = dotted(d.node.test.func)
                desc = f"`if {test}:` dispatches to {kernels}"
            else:
                params, desc = {"tma_branch": d.tma_branch}, f"`if {test}:` never reaches {kernels}"
            out.append(self.site(direction, i, pos[d.node].start.line, d.function, desc, **params))
        return out

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "backward")

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "forward")

    def _replace_test(
        self, source: str, site: Site, direction: str, guard: str | None
    ) -> RewriteResult:
        """Backward (guard None): the test becomes the pointer-path constant; forward: guard."""
        module, found = self._found(source, direction)
        if not _tma_names(module):
            return RewriteResult.skip(
                "no TMA kernel here (no tl.make_tensor_descriptor / TensorDescriptor): "
                "generating one from a pointer kernel is out of scope",
                site,
            )
        if guard is None and direction == "forward":
            return RewriteResult.skip(
                "restoring the TMA dispatch needs the guard from a backward site "
                "(params guard='_use_tma(a, b, c)' or similar)",
                site,
            )
        if site.index >= len(found):
            what = "guarded" if direction == "backward" else "disabled"
            return RewriteResult.skip(f"no {what} TMA dispatch #{site.index} here", site)
        d = found[site.index]
        if site.params.get("tma_branch", d.tma_branch) != d.tma_branch:
            return RewriteResult.skip(
                f"the TMA launch is in the {d.tma_branch} branch here, "
                f"not the {site.params['tma_branch']}",
                site,
            )
        test = guard if guard is not None else _pointer_constant(d)
        new = cast(
            cst.Module, cast(Any, module).deep_replace(d.node.test, cst.parse_expression(test))
        )
        verb = "always takes the pointer path" if guard is None else f"is guarded by `{test}` again"
        return RewriteResult(True, f"dispatch in {d.function} {verb}", new.code, site)

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return self.safe(self._replace_test, source, site, "backward", None)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        guard = (params or {}).get("guard")
        return self.safe(self._replace_test, source, site, "forward", str(guard) if guard else None)
