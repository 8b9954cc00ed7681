"""Golden tests for num_warps: before/after on small snippets, forward, skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass

BEFORE = """import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK": 256}, num_warps=4),
    triton.Config({"BLOCK": 2048}, 16),
]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def _tuned(X, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def _row(X, n, BLOCK: tl.constexpr):
    pass


def launch(x, n):
    block = triton.next_power_of_2(n)
    _tuned[(1,)](x, n)
    _row[(1,)](x, n, BLOCK=block, num_warps=min(max(block // 1024, 4), 16))
    _row[(1,)](
        x,
        n,
        num_warps=2,
        BLOCK=block,
    )
"""


def test_backward_one_site_per_non_default_num_warps() -> None:
    p = get_pass("num_warps")
    sites = p.backward_sites(BEFORE)
    assert [(s.line, s.function, s.params["kind"], s.params["expr"]) for s in sites] == [
        (5, "", "config", "8"),
        (7, "", "config", "16"),
        (25, "launch", "launch", "min(max(block // 1024, 4), 16)"),
        (26, "launch", "launch", "2"),
    ]
    after = [
        BEFORE.replace("num_warps=8, num_stages=3", "num_warps=4, num_stages=3"),
        BEFORE.replace('{"BLOCK": 2048}, 16)', '{"BLOCK": 2048}, 4)'),
        BEFORE.replace(", num_warps=min(max(block // 1024, 4), 16))", ")"),
        BEFORE.replace("        num_warps=2,\n", ""),
    ]
    for s, expected in zip(sites, after, strict=True):
        r = p.simplify(BEFORE, s)
        assert r.applied and r.source == expected, s


def test_forward_restores_the_experts_expression_and_position() -> None:
    p = get_pass("num_warps")
    for backward in p.backward_sites(BEFORE):
        simplified = p.simplify(BEFORE, backward).source
        assert simplified is not None
        site = next(s for s in p.forward_sites(simplified) if s.line == backward.line)
        r = p.apply(simplified, site, backward.params)
        assert r.applied and r.source == BEFORE, backward


NAIVE = """import triton
import triton.language as tl


@triton.jit
def _k(X, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass


def launch(x, m, n):
    _k[(m,)](x, n, BLOCK_M=4, BLOCK_N=triton.next_power_of_2(n))
"""


def test_forward_sizes_warps_from_the_launch_blocks() -> None:
    p = get_pass("num_warps")
    (site,) = p.forward_sites(NAIVE)
    assert site.params["expr"] == "min(max(4 * triton.next_power_of_2(n) // 1024, 4), 16)"
    r = p.apply(NAIVE, site)
    assert r.applied and r.source == NAIVE.replace(
        "triton.next_power_of_2(n))",
        "triton.next_power_of_2(n), num_warps=min(max(4 * triton.next_power_of_2(n) // 1024, 4), 16))",
    )
    r = p.apply(NAIVE, site, {"expr": "8"})
    assert r.applied and r.source == NAIVE.replace("(n))\n", "(n), num_warps=8)\n")


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("num_warps")
    site = p.backward_sites(BEFORE)[3]
    r = p.simplify(BEFORE.replace("        num_warps=2,\n", ""), site)
    assert not r.applied and "#3" in r.reason
    # autotuned launches are not forward sites: the Config owns num_warps there
    assert all(s.line != 24 for s in p.forward_sites(BEFORE))
    (fwd,) = p.forward_sites(NAIVE)
    r = p.apply(NAIVE, fwd, {"expr": "8 +"})
    assert not r.applied and "'8 +' does not parse" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason


def test_an_expression_naming_what_the_file_does_not_define_is_skipped() -> None:
    """A skill's expression names its expert's variable (`num_warps=num_warps`); in a target
    without it the rewrite would be a NameError at load (a gate call spent on the H200,
    2026-12-04), so it is a skip that says which name is missing."""
    p = get_pass("num_warps")
    (fwd,) = p.forward_sites(NAIVE)
    r = p.apply(NAIVE, fwd, {"expr": "num_warps"})
    assert not r.applied and "reads num_warps, which this file does not define" in r.reason
    # names the file does bind (a launcher parameter, an import) are fine
    r = p.apply(NAIVE, fwd, {"expr": "max(4, m // 1024)"})
    assert r.applied and r.source is not None and "num_warps=max(4, m // 1024)" in r.source
