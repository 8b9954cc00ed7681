"""Golden tests for tma_descriptors: guard -> constant, forward restores it, skips."""

from __future__ import annotations

from klineage.rewrite import get_pass

BEFORE = """import torch
import triton
import triton.language as tl


@triton.jit
def _copy_ptr(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _copy_tma(X, Y, n, BLOCK: tl.constexpr):
    xd = tl.make_tensor_descriptor(X, shape=[n], strides=[1], block_shape=[BLOCK])
    yd = tl.make_tensor_descriptor(Y, shape=[n], strides=[1], block_shape=[BLOCK])
    yd.store([tl.program_id(0) * BLOCK], xd.load([tl.program_id(0) * BLOCK]))


def _tma_ok(x):
    if not x.is_cuda:
        return False
    return torch.cuda.get_device_capability()[0] >= 9


def copy(x):
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 128),)
    if _tma_ok(x):  # Hopper: TMA
        _copy_tma[grid](x, y, x.numel(), BLOCK=128)
    else:
        _copy_ptr[grid](x, y, x.numel(), BLOCK=128)
    return y
"""

AFTER = BEFORE.replace("if _tma_ok(x):  #", "if False:  #")

INVERTED = (
    BEFORE.replace("if _tma_ok(x):", "if not _tma_ok(x):")
    .replace("        _copy_tma[grid](x, y, x.numel(), BLOCK=128)\n", "@@")
    .replace("        _copy_ptr[grid](x, y, x.numel(), BLOCK=128)\n", "##")
    .replace("@@", "        _copy_ptr[grid](x, y, x.numel(), BLOCK=128)\n")
    .replace("##", "        _copy_tma[grid](x, y, x.numel(), BLOCK=128)\n")
)

HOST = """import triton
from triton.tools.tensor_descriptor import TensorDescriptor


def _launch_tma(x, y):
    _copy_desc[(1,)](TensorDescriptor.from_tensor(x, [128]), TensorDescriptor.from_tensor(y, [128]))


def copy(x, y, use_tma):
    if use_tma:
        _launch_tma(x, y)
    else:
        _copy_ptr[(1,)](x, y)
"""


def test_backward_makes_the_dispatch_take_the_pointer_path() -> None:
    p = get_pass("tma_descriptors")
    (site,) = p.backward_sites(BEFORE)
    assert (site.function, site.line) == ("copy", 28)
    assert site.params == {"guard": "_tma_ok(x)", "tma_branch": "body", "guard_function": "_tma_ok"}
    r = p.simplify(BEFORE, site)
    assert r.applied and r.source == AFTER


def test_forward_restores_the_guard() -> None:
    p = get_pass("tma_descriptors")
    (backward,) = p.backward_sites(BEFORE)
    (site,) = p.forward_sites(AFTER)
    assert site.line == backward.line
    r = p.apply(AFTER, site, backward.params)
    assert r.applied and r.source == BEFORE


def test_tma_in_the_else_branch_becomes_if_true() -> None:
    p = get_pass("tma_descriptors")
    (site,) = p.backward_sites(INVERTED)
    assert site.params["tma_branch"] == "orelse"
    r = p.simplify(INVERTED, site)
    assert r.applied and r.source == INVERTED.replace("if not _tma_ok(x):", "if True:")
    (fwd,) = p.forward_sites(r.source)
    assert p.apply(r.source, fwd, site.params).source == INVERTED


def test_host_descriptors_through_a_launcher_helper() -> None:
    p = get_pass("tma_descriptors")
    (site,) = p.backward_sites(HOST)
    assert site.params["guard"] == "use_tma" and "_launch_tma" in site.description
    r = p.simplify(HOST, site)
    assert r.applied and r.source == HOST.replace("if use_tma:", "if False:")


def test_skips_have_reasons() -> None:
    p = get_pass("tma_descriptors")
    (site,) = p.backward_sites(BEFORE)
    (fwd,) = p.forward_sites(AFTER)
    r = p.apply(AFTER, fwd)
    assert not r.applied and "needs the guard" in r.reason
    no_tma = AFTER.replace("tl.make_tensor_descriptor", "tl.load")
    assert p.backward_sites(no_tma) == [] and p.forward_sites(no_tma) == []
    r = p.apply(no_tma, fwd, site.params)
    assert not r.applied and "no TMA kernel here" in r.reason and "out of scope" in r.reason
    r = p.simplify(AFTER, site)
    assert not r.applied and "no guarded TMA dispatch #0" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
