"""Golden tests for software_pipelining: before/after on snippets, forward, skips with reasons."""

from __future__ import annotations

from dataclasses import replace

from klineage.rewrite import get_pass

BEFORE = """import triton
import triton.language as lang

DEPTH = 1
CONFIGS = [
    triton.Config({"BLOCK": 64}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK": 32}, num_warps=4, num_stages=DEPTH),
]


@triton.jit
def _k(X, n, STAGES: lang.constexpr):
    for i in lang.range(0, n, 16, num_stages=STAGES):
        pass
    for j in range(0, n):
        pass


def launch(x, n):
    _k[(1,)](x, n, STAGES=2, num_warps=4, num_stages=3)
"""

CONFIG_AFTER = BEFORE.replace("num_warps=4, num_stages=4)", "num_warps=4, num_stages=1)")
RANGE_AFTER = BEFORE.replace("lang.range(0, n, 16, num_stages=STAGES)", "lang.range(0, n, 16)")
LAUNCH_AFTER = BEFORE.replace("num_warps=4, num_stages=3)", "num_warps=4, num_stages=1)")


def test_backward_finds_configs_ranges_and_launches() -> None:
    p = get_pass("software_pipelining")
    sites = p.backward_sites(BEFORE)
    # num_stages=DEPTH resolves to 1: not pipelined, not a site.
    assert [(s.params["kind"], s.line, s.function) for s in sites] == [
        ("config", 6, ""),
        ("range", 13, "_k"),
        ("launch", 20, "launch"),
    ]
    assert [s.params["num_stages"] for s in sites] == [4, "STAGES", 3]


def test_each_site_is_simplified_alone() -> None:
    p = get_pass("software_pipelining")
    sites = p.backward_sites(BEFORE)
    for site, after in zip(sites, (CONFIG_AFTER, RANGE_AFTER, LAUNCH_AFTER), strict=True):
        r = p.simplify(BEFORE, site)
        assert r.applied and r.source == after, site


def test_forward_restores_the_experts_depth() -> None:
    p = get_pass("software_pipelining")
    for backward in p.backward_sites(BEFORE):
        simplified = p.simplify(BEFORE, backward).source
        assert simplified is not None
        site = next(
            s
            for s in p.forward_sites(simplified)
            if s.line == backward.line and s.params["kind"] == backward.params["kind"]
        )
        r = p.apply(simplified, site, backward.params)
        assert r.applied and r.source == BEFORE


def test_forward_turns_a_kernel_range_loop_into_a_pipelined_tl_range() -> None:
    p = get_pass("software_pipelining")
    site = next(s for s in p.forward_sites(BEFORE) if s.line == 15)
    assert "becomes tl.range" in site.description and site.params["num_stages"] == 2
    r = p.apply(BEFORE, site)
    assert r.applied and r.source is not None
    assert "for j in lang.range(0, n, num_stages=2):" in r.source


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("software_pipelining")
    config, rng, _ = p.backward_sites(BEFORE)
    r = p.simplify(BEFORE, replace(rng, index=9))
    assert not r.applied and "no num_stages site #9" in r.reason
    r = p.simplify(CONFIG_AFTER, config)  # index 0 is now the tl.range
    assert not r.applied and "is a tl.range loop, not a triton.Config" in r.reason
    forward = next(s for s in p.forward_sites(CONFIG_AFTER) if s.params["kind"] == "config")
    r = p.apply(CONFIG_AFTER, forward, {"kind": "config", "num_stages": 1})
    assert not r.applied and "does not pipeline" in r.reason
    r = p.apply(CONFIG_AFTER, forward, {"kind": "launch", "num_stages": 3})
    assert not r.applied and "params are for a kernel launch" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", config)
    assert not r.applied and "does not parse" in r.reason
