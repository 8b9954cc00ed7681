"""Golden tests for online_reduction: before/after on a small dispatch, forward, and skips."""

from __future__ import annotations

from klineage.rewrite import get_pass

KERNELS = """import triton
import triton.language as tl

LIMIT = 4096


@triton.jit
def _one_block(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + tl.program_id(0) * N + cols, mask=cols < N, other=0.0)
    tl.store(Y + tl.program_id(0) * N + cols, x / tl.sum(x, axis=0), mask=cols < N)


@triton.jit
def _looped(X, Y, N, CHUNK: tl.constexpr):
    cols = tl.arange(0, CHUNK)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, N, CHUNK):
        acc += tl.load(X + tl.program_id(0) * N + start + cols, mask=start + cols < N, other=0.0)
    total = tl.sum(acc, axis=0)
    for start in range(0, N, CHUNK):
        x = tl.load(X + tl.program_id(0) * N + start + cols, mask=start + cols < N, other=0.0)
        tl.store(Y + tl.program_id(0) * N + start + cols, x / total, mask=start + cols < N)
"""

LAUNCHER = """

def launch(x, y):
    M, N = x.shape
    # long rows take the looped kernel
    if N <= LIMIT:  # one block
        BLOCK = triton.next_power_of_2(N)
        _one_block[(M,)](x, y, N, BLOCK=BLOCK)
    else:
        _looped[(M,)](x, y, N, CHUNK=1024)
    return y
"""

BEFORE = KERNELS + LAUNCHER

AFTER = (
    KERNELS[: KERNELS.index("\n\n@triton.jit\ndef _looped")]
    + """

def launch(x, y):
    M, N = x.shape
    # long rows take the looped kernel
    BLOCK = triton.next_power_of_2(N)
    _one_block[(M,)](x, y, N, BLOCK=BLOCK)
    return y
"""
)


def test_backward_keeps_the_single_block_branch_and_drops_the_looped_kernel() -> None:
    p = get_pass("online_reduction")
    (site,) = p.backward_sites(BEFORE)
    assert (site.function, site.line) == ("launch", 29)
    assert site.params["condition"] == "N <= LIMIT"
    assert site.params["looped_branch"] == "_looped[(M,)](x, y, N, CHUNK=1024)\n"
    assert site.params["single_in_body"] is True
    assert [r["name"] for r in site.params["removed_kernels"]] == ["_looped"]
    r = p.simplify(BEFORE, site)
    assert r.applied and r.source == AFTER


def test_forward_restores_the_dispatch_and_the_looped_kernel() -> None:
    p = get_pass("online_reduction")
    (backward,) = p.backward_sites(BEFORE)
    assert p.backward_sites(AFTER) == []
    (site,) = p.forward_sites(AFTER)
    assert (site.function, site.params["single_kernel"]) == ("launch", "_one_block")
    r = p.apply(AFTER, site, backward.params)
    assert r.applied and r.source == BEFORE


def test_reversed_dispatch_round_trips() -> None:
    launcher = """

def launch(x, y):
    M, N = x.shape
    if N > LIMIT:
        _looped[(M,)](x, y, N, CHUNK=1024)
    else:
        _one_block[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
"""
    source = KERNELS + launcher
    p = get_pass("online_reduction")
    (site,) = p.backward_sites(source)
    assert site.params["single_in_body"] is False
    r = p.simplify(source, site)
    assert r.applied and r.source is not None
    assert r.source.endswith(
        "    M, N = x.shape\n    _one_block[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))\n"
    )
    (fwd,) = p.forward_sites(r.source)
    back = p.apply(r.source, fwd, site.params)
    assert back.applied and back.source == source


def test_only_a_looped_kernel_is_a_reason_not_a_site() -> None:
    # Cross-entropy's shape: the looped kernel is launched unconditionally.
    source = KERNELS + "\n\ndef launch(x, y):\n    _looped[(4,)](x, y, 9000, CHUNK=1024)\n"
    p = get_pass("online_reduction")
    assert p.backward_sites(source) == []
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(source, site)
    assert not r.applied and "_looped is looped with no single-block variant" in r.reason


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("online_reduction")
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(AFTER, site)
    assert not r.applied and "no single-block/looped launch dispatch #0" in r.reason
    (fwd,) = p.forward_sites(AFTER)
    r = p.apply(AFTER, fwd, {})
    assert not r.applied and "needs the expert's dispatch" in r.reason
    params = {**site.params, "removed_kernels": []}
    r = p.apply(AFTER, fwd, params)
    assert not r.applied and "the looped branch uses _looped, which this launcher" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason


def test_the_experts_branch_does_not_fit_another_launcher() -> None:
    # The expert's looped branch reads launcher names (M, N, x, y) a different launcher lacks.
    p = get_pass("online_reduction")
    (site,) = p.backward_sites(BEFORE)
    other = KERNELS[: KERNELS.index("\n\n@triton.jit\ndef _looped")] + (
        "\n\ndef run(a, b):\n"
        "    _one_block[(a.shape[0],)](a, b, a.shape[1], BLOCK=triton.next_power_of_2(a.shape[1]))\n"
    )
    (fwd,) = p.forward_sites(other)
    r = p.apply(other, fwd, site.params)
    assert not r.applied and "the recorded branch (2 statements, launch at 1)" in r.reason
    r = p.apply(other, fwd, {**site.params, "single_len": 1, "launch_offset": 0})
    assert not r.applied and "uses M, N, x, y" in r.reason


def test_forward_from_condition_and_looped_branch_alone() -> None:
    # Without the recorded template the dispatch is rebuilt from the condition and the branch.
    p = get_pass("online_reduction")
    (site,) = p.backward_sites(BEFORE)
    (fwd,) = p.forward_sites(AFTER)
    params = {k: v for k, v in site.params.items() if k != "template"}
    r = p.apply(AFTER, fwd, params)
    assert r.applied and r.source == BEFORE.replace(
        "    if N <= LIMIT:  # one block\n", "    if N <= LIMIT:\n"
    )
