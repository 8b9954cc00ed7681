"""Golden tests for multiple_of_hints: before/after on small snippets, forward, skips."""

from __future__ import annotations

from klineage.rewrite import get_pass

BEFORE = """import triton
import triton.language as tl


@triton.jit
def _k(A, C, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    offs_m = tl.max_contiguous(
        tl.multiple_of(pid * BLOCK_M + tl.arange(0, BLOCK_M), BLOCK_M),
        BLOCK_M,
    )
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k = tl.multiple_of(k, BLOCK_K)
        # one column of the slab
        acc += tl.load(A + offs_m * K + k)
    tl.store(C + tl.multiple_of(pid * BLOCK_M, 16) + tl.arange(0, BLOCK_M), acc)
"""

NO_OFFS_HINT = BEFORE.replace(
    """tl.max_contiguous(
        tl.multiple_of(pid * BLOCK_M + tl.arange(0, BLOCK_M), BLOCK_M),
        BLOCK_M,
    )""",
    "pid * BLOCK_M + tl.arange(0, BLOCK_M)",
)
NO_LOOP_HINT = BEFORE.replace("        k = tl.multiple_of(k, BLOCK_K)\n", "")
NO_STORE_HINT = BEFORE.replace("tl.multiple_of(pid * BLOCK_M, 16)", "pid * BLOCK_M")


def test_backward_one_site_per_hint_chain() -> None:
    p = get_pass("multiple_of_hints")
    sites = p.backward_sites(BEFORE)
    assert [(s.function, s.line) for s in sites] == [("_k", 8), ("_k", 14), ("_k", 17)]
    assert sites[0].params["hints"] == [["max_contiguous", "BLOCK_M"], ["multiple_of", "BLOCK_M"]]
    assert sites[1].params["statement"] == "k = tl.multiple_of(k, BLOCK_K)"
    expected = [NO_OFFS_HINT, NO_LOOP_HINT, NO_STORE_HINT]
    for s, after in zip(sites, expected, strict=True):
        r = p.simplify(BEFORE, s)
        assert r.applied and r.source == after, s


def test_forward_restores_offsets_and_loop_hints() -> None:
    p = get_pass("multiple_of_hints")
    sites = p.backward_sites(BEFORE)
    for backward in sites[:2]:
        simplified = p.simplify(BEFORE, backward).source
        assert simplified is not None
        site = next(s for s in p.forward_sites(simplified) if abs(s.line - backward.line) <= 1)
        r = p.apply(simplified, site, backward.params)
        assert r.applied and r.source == BEFORE


NAIVE = """import triton
import triton.language as tl


@triton.jit
def _k(X, n, step, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for i in tl.range(offs[0], n, BLOCK):
        tl.store(X + i, 0.0)
    for j in range(0, n, step):  # a runtime step cannot be a hint value
        tl.store(X + j, 0.0)
"""


def test_forward_generic_hints_and_unproven_loops_say_so() -> None:
    p = get_pass("multiple_of_hints")
    sites = p.forward_sites(NAIVE)
    assert [(s.line, s.params["kind"]) for s in sites] == [(7, "offsets"), (8, "loop")]
    assert sites[1].params["proven"] is False and "assumes" in sites[1].description
    r = p.apply(NAIVE, sites[0])
    assert r.applied and r.source == NAIVE.replace(
        "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "offs = tl.max_contiguous(tl.multiple_of(tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)",
    )
    r = p.apply(NAIVE, sites[1])
    assert r.applied and r.source == NAIVE.replace(
        "BLOCK):\n        tl.store(X + i",
        "BLOCK):\n        i = tl.multiple_of(i, BLOCK)\n        tl.store(X + i",
    )


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("multiple_of_hints")
    site = p.backward_sites(BEFORE)[2]
    r = p.simplify(NO_STORE_HINT, site)
    assert not r.applied and "no hint call #2" in r.reason
    assert p.backward_sites(NAIVE) == []
    (fwd, *_) = p.forward_sites(NAIVE)
    r = p.apply(BEFORE.replace("for k in range(0, K, BLOCK_K)", "for k in range(K)"), fwd)
    assert not r.applied and "no offsets/loop anchor #0" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
