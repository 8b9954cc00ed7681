"""Golden tests for cache_eviction_hints: before/after on small snippets, and skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass

BEFORE = """import triton
import triton.language as tl


@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, eviction_policy="evict_first")
    tl.store(Y + offs, x, mask=offs < n)


def launcher(x):
    return tl.load(x, eviction_policy="evict_last")  # not a kernel: never touched
"""

AFTER = BEFORE.replace(', eviction_policy="evict_first")', ")", 1)


def test_backward_finds_only_kernel_sites_and_removes_the_hint() -> None:
    p = get_pass("cache_eviction_hints")
    sites = p.backward_sites(BEFORE)
    assert [(s.function, s.line) for s in sites] == [("_k", 8)]
    assert sites[0].params == {"eviction_policy": '"evict_first"'}
    r = p.simplify(BEFORE, sites[0])
    assert r.applied and r.source == AFTER


def test_forward_restores_the_hint_with_the_experts_value() -> None:
    p = get_pass("cache_eviction_hints")
    (backward,) = p.backward_sites(BEFORE)
    simplified = p.simplify(BEFORE, backward).source
    assert simplified is not None
    site = next(s for s in p.forward_sites(simplified) if s.line == backward.line)
    r = p.apply(simplified, site, backward.params)
    assert r.applied and r.source == BEFORE


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("cache_eviction_hints")
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(AFTER, site)
    assert not r.applied and "no hinted load/store #0" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
