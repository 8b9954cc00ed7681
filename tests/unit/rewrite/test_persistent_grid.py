"""Golden tests for persistent_grid: before/after on small launchers, forward, and skips."""

from __future__ import annotations

from klineage.rewrite import get_pass

KERNEL = """import triton
import triton.language as tl

NUM_SMS = 132


@triton.jit
def _k(X, Y, n_blocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    for blk in tl.range(pid, n_blocks, step, num_stages=2):
        x = tl.load(X + blk * BLOCK + offs)
        tl.store(Y + blk * BLOCK + offs, x * 2)

"""

BEFORE = (
    KERNEL
    + """
def launch(x, y):
    n_blocks = x.numel() // 64
    grid = n_blocks
    if n_blocks > 1000:
        # persistent: a few programs per SM
        grid = min(n_blocks, NUM_SMS * 4)
    _k[(grid,)](x, y, n_blocks, BLOCK=64)
"""
)

AFTER = BEFORE.replace("grid = min(n_blocks, NUM_SMS * 4)", "grid = n_blocks")


def test_backward_uncaps_the_grid() -> None:
    p = get_pass("persistent_grid")
    (site,) = p.backward_sites(BEFORE)
    assert (site.function, site.line) == ("launch", 22)
    assert site.params == {
        "count": "n_blocks",
        "kernel": "_k",
        "assign_name": "grid",
        "assign_index": 1,
        "expr": "min(n_blocks, NUM_SMS * 4)",
    }
    r = p.simplify(BEFORE, site)
    assert r.applied and r.source == AFTER


def test_forward_restores_the_cap_at_the_same_assignment() -> None:
    p = get_pass("persistent_grid")
    (backward,) = p.backward_sites(BEFORE)
    assert p.backward_sites(AFTER) == []
    (site,) = p.forward_sites(AFTER)
    assert site.line == backward.line
    r = p.apply(AFTER, site, backward.params)
    assert r.applied and r.source == BEFORE


def test_cap_inside_the_launch_and_a_bare_sm_grid() -> None:
    p = get_pass("persistent_grid")
    inline = KERNEL + (
        "\ndef launch(x, y, sm_count):\n"
        "    nb = x.numel() // 64\n"
        "    _k[(min(sm_count * 8, nb),)](x, y, nb, BLOCK=64)\n"
    )
    (site,) = p.backward_sites(inline)
    assert site.params["expr"] == "min(sm_count * 8, nb)" and "assign_name" not in site.params
    r = p.simplify(inline, site)
    assert r.applied and r.source == inline.replace("min(sm_count * 8, nb)", "nb")
    (fwd,) = p.forward_sites(r.source)
    back = p.apply(r.source, fwd, site.params)
    assert back.applied and back.source == inline

    bare = inline.replace("min(sm_count * 8, nb)", "NUM_SMS")
    (site,) = p.backward_sites(bare)
    r = p.simplify(bare, site)
    assert r.applied and r.source == inline.replace("min(sm_count * 8, nb)", "nb")


def test_a_kernel_without_the_strided_loop_is_not_a_site() -> None:
    source = BEFORE.replace("tl.range(pid, n_blocks, step, num_stages=2)", "tl.range(pid, pid + 1)")
    p = get_pass("persistent_grid")
    assert p.backward_sites(source) == []
    assert p.forward_sites(source) == []


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("persistent_grid")
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(AFTER, site)
    assert not r.applied and "no persistent grid #0" in r.reason
    (fwd,) = p.forward_sites(AFTER)
    r = p.apply(AFTER, fwd, {})
    assert not r.applied and "needs params['expr']" in r.reason
    r = p.apply(AFTER, fwd, {"expr": "min(n_blocks, num_sms * 4)"})
    assert not r.applied and "uses num_sms, not defined here" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
