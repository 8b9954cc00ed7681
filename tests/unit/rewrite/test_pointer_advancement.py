"""Golden tests for pointer_advancement: before/after snippets, forward, skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass
from klineage.rewrite.base import Site

BEFORE = """import triton
import triton.language as tl


@triton.jit
def _k(a_ptr, b_ptr, c_ptr, K, stride_ak, stride_bk, BLOCK_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs * stride_ak
    b_ptrs = b_ptr + offs * stride_bk
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs < K - k * BLOCK_K, other=0.0)
        acc += a * b
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptr + offs, acc)
"""

AFTER_A = """import triton
import triton.language as tl


@triton.jit
def _k(a_ptr, b_ptr, c_ptr, K, stride_ak, stride_bk, BLOCK_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs * stride_ak
    b_ptrs = b_ptr + offs * stride_bk
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    a_ptrs_base = a_ptrs
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a_ptrs = a_ptrs_base + k * (BLOCK_K * stride_ak)
        a = tl.load(a_ptrs, mask=offs < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs < K - k * BLOCK_K, other=0.0)
        acc += a * b
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptr + offs, acc)
"""

AFTER_BOTH = (
    AFTER_A.replace(
        "    a_ptrs_base = a_ptrs\n", "    a_ptrs_base = a_ptrs\n    b_ptrs_base = b_ptrs\n"
    )
    .replace(
        "        a_ptrs = a_ptrs_base + k * (BLOCK_K * stride_ak)\n",
        "        a_ptrs = a_ptrs_base + k * (BLOCK_K * stride_ak)\n"
        "        b_ptrs = b_ptrs_base + k * (BLOCK_K * stride_bk)\n",
    )
    .replace("        b_ptrs += BLOCK_K * stride_bk\n", "")
)

# Attention-style: a start and a step, and the loop variable reassigned after the recomputation.
KV = """import triton
import triton.language as lang


@triton.jit
def _inner(acc, k_ptrs, stride_kn, lo, hi, BLOCK_N: lang.constexpr):
    k_ptrs += lo * stride_kn
    for start_n in lang.range(lo, hi, step=BLOCK_N, num_stages=2):
        start_n = lang.multiple_of(start_n, BLOCK_N)
        acc += lang.load(k_ptrs)
        k_ptrs += BLOCK_N * stride_kn
    return acc
"""


def test_backward_recomputes_the_pointer_from_the_loop_index() -> None:
    p = get_pass("pointer_advancement")
    sites = p.backward_sites(BEFORE)
    assert [(s.function, s.line, s.params) for s in sites] == [
        ("_k", 15, {"pointer": "a_ptrs", "step": "BLOCK_K * stride_ak", "tail_offset": 1}),
        ("_k", 16, {"pointer": "b_ptrs", "step": "BLOCK_K * stride_bk", "tail_offset": 0}),
    ]
    r = p.simplify(BEFORE, sites[0])
    assert r.applied and r.source == AFTER_A
    (left,) = p.backward_sites(AFTER_A)
    r = p.simplify(AFTER_A, left)  # the second pointer keeps the first one's order
    assert r.applied and r.source == AFTER_BOTH


def test_forward_restores_the_advance_where_the_expert_had_it() -> None:
    p = get_pass("pointer_advancement")
    backward = p.backward_sites(BEFORE)[0]
    (site,) = p.forward_sites(AFTER_A)
    assert (site.line, site.params) == (13, {"pointer": "a_ptrs", "step": "BLOCK_K * stride_ak"})
    r = p.apply(AFTER_A, site, backward.params)
    assert r.applied and r.source == BEFORE
    # Without the expert's placement the advance goes last in the body.
    r = p.apply(AFTER_A, site)
    assert r.applied and r.source is not None
    assert r.source.endswith("        b_ptrs += BLOCK_K * stride_bk\n        a_ptrs += BLOCK_K * stride_ak\n    tl.store(c_ptr + offs, acc)\n")  # fmt: skip


def test_range_start_and_step_and_a_reassigned_loop_variable() -> None:
    p = get_pass("pointer_advancement")
    (site,) = p.backward_sites(KV)
    r = p.simplify(KV, site)
    assert r.applied and r.source == KV.replace(
        "    for start_n", "    k_ptrs_base = k_ptrs\n    for start_n"
    ).replace(
        "        start_n = lang.multiple_of",
        "        k_ptrs = k_ptrs_base + (start_n - lo) // BLOCK_N * (BLOCK_N * stride_kn)\n"
        "        start_n = lang.multiple_of",
    ).replace("        k_ptrs += BLOCK_N * stride_kn\n", "")
    (fwd,) = p.forward_sites(r.source)
    back = p.apply(r.source, fwd, site.params)
    assert back.applied and back.source == KV


def test_forward_on_a_hand_written_recomputation() -> None:
    src = """import triton
import triton.language as tl


@triton.jit
def _k(x, y, n, BLOCK: tl.constexpr):
    row = x + tl.program_id(0) * n + tl.arange(0, BLOCK)
    for i in range(4):
        p = row + i * BLOCK
        tl.store(y + i, tl.sum(tl.load(p)))
"""
    p = get_pass("pointer_advancement")
    (site,) = p.forward_sites(src)
    r = p.apply(src, site)
    assert r.applied and r.source == src.replace(
        "    for i in range(4):\n        p = row + i * BLOCK\n",
        "    p = row\n    for i in range(4):\n",
    ).replace("tl.load(p)))\n", "tl.load(p)))\n        p += BLOCK\n")


def _skip_reason(src: str) -> str:
    p = get_pass("pointer_advancement")
    (site,) = p.backward_sites(src)
    r = p.simplify(src, site)
    assert not r.applied
    return r.reason


def test_unsafe_advances_are_skipped_with_a_reason() -> None:
    loop = BEFORE.replace("        b_ptrs += BLOCK_K * stride_bk\n", "")
    conditional = loop.replace(
        "        a_ptrs += BLOCK_K * stride_ak\n",
        "        if k > 0:\n            a_ptrs += BLOCK_K * stride_ak\n",
    )
    assert "advanced conditionally" in _skip_reason(conditional)
    used_after = loop.replace("tl.store(c_ptr + offs, acc)", "tl.store(a_ptrs, acc)")
    assert "used after the loop" in _skip_reason(used_after)
    varying = loop.replace("a_ptrs += BLOCK_K * stride_ak", "a_ptrs += k * stride_ak")
    assert "not constant" in _skip_reason(varying)
    read_after = loop.replace(
        "        a_ptrs += BLOCK_K * stride_ak\n",
        "        a_ptrs += BLOCK_K * stride_ak\n        acc += tl.load(a_ptrs)\n",
    )
    assert "read after its advance" in _skip_reason(read_after)
    twice = loop.replace(
        "        acc += a * b\n",
        "        acc += a * b\n        a_ptrs = tl.multiple_of(a_ptrs, 16)\n",
    )
    assert "assigned more than once" in _skip_reason(twice)
    while_loop = loop.replace("for k in range(0, tl.cdiv(K, BLOCK_K)):", "for k in ks:")
    assert "not `for <name> in range(...)`" in _skip_reason(while_loop)


def test_accumulators_are_not_pointers_and_errors_are_reasons() -> None:
    p = get_pass("pointer_advancement")
    acc_only = BEFORE.replace("        a_ptrs += BLOCK_K * stride_ak\n", "").replace(
        "        b_ptrs += BLOCK_K * stride_bk\n", ""
    )
    assert p.backward_sites(acc_only) == []  # `acc += a * b` feeds no load/store pointer
    site = p.backward_sites(BEFORE)[0]
    r = p.simplify(acc_only, site)
    assert not r.applied and "no pointer advance #0" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
    r = p.apply(BEFORE, Site("pointer_advancement", "forward", 0, 1, "_k", ""), {})
    assert not r.applied and "no recomputed pointer #0" in r.reason
