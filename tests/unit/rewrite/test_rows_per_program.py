"""Golden tests for rows_per_program: before/after on small launchers, forward, and skips."""

from __future__ import annotations

from klineage.rewrite import get_pass

KERNEL = """import triton
import triton.language as tl


@triton.jit
def _k(X, Y, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(X + rows[:, None] * N + cols[None, :], mask=mask)
    tl.store(Y + rows[:, None] * N + cols[None, :], x, mask=mask)

"""

BEFORE = (
    KERNEL
    + """
def launch(x, y):
    M, N = x.shape
    BLOCK_N = triton.next_power_of_2(N)
    # several rows per program
    BLOCK_M = min(max(4096 // BLOCK_N, 1), triton.next_power_of_2(M))
    grid = (triton.cdiv(M, BLOCK_M),)
    _k[grid](x, y, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
"""
)

AFTER = BEFORE.replace(
    "    BLOCK_M = min(max(4096 // BLOCK_N, 1), triton.next_power_of_2(M))\n",
    "    BLOCK_M = 1\n",
)


def test_backward_finds_the_rows_per_program_name_and_sets_it_to_one() -> None:
    p = get_pass("rows_per_program")
    (site,) = p.backward_sites(BEFORE)
    assert (site.function, site.line) == ("launch", 18)
    assert site.params == {
        "name": "BLOCK_M",
        "keyword": "BLOCK_M",
        "kernel": "_k",
        "rows": "M",
        "expr": "min(max(4096 // BLOCK_N, 1), triton.next_power_of_2(M))",
    }
    r = p.simplify(BEFORE, site)
    assert r.applied and r.source == AFTER


def test_forward_restores_the_expression_or_builds_one_from_a_tile() -> None:
    p = get_pass("rows_per_program")
    (backward,) = p.backward_sites(BEFORE)
    assert p.backward_sites(AFTER) == []
    (site,) = p.forward_sites(AFTER)
    assert site.line == backward.line
    r = p.apply(AFTER, site, backward.params)
    assert r.applied and r.source == BEFORE
    r = p.apply(AFTER, site, {"tile": 2048})
    assert r.applied and r.source == BEFORE.replace("4096 // BLOCK_N", "2048 // BLOCK_N")


def test_other_names_alias_and_hand_written_ceil_division() -> None:
    source = (
        KERNEL.replace("BLOCK_M", "R").replace("tl.", "lang.").replace("as tl", "as lang")
        + """
class Runner:
    def go(self, x, y):
        m, n = x.shape
        rows_per_prog = max(2048 // n, 1)
        _k[((m + rows_per_prog - 1) // rows_per_prog,)](x, y, m, n, R=rows_per_prog, BLOCK_N=n)
"""
    )
    p = get_pass("rows_per_program")
    (site,) = p.backward_sites(source)
    assert (site.function, site.params["name"], site.params["rows"]) == ("go", "rows_per_prog", "m")
    r = p.simplify(source, site)
    assert r.applied and r.source == source.replace("max(2048 // n, 1)", "1")


def test_not_a_grid_divisor_is_not_a_site() -> None:
    # BLOCK_N is a constexpr kwarg but the grid is one program per row: nothing to remove.
    source = KERNEL + (
        "\ndef launch(x, y):\n"
        "    M, N = x.shape\n"
        "    BLOCK_N = triton.next_power_of_2(N)\n"
        "    _k[(M,)](x, y, M, N, BLOCK_M=1, BLOCK_N=BLOCK_N)\n"
    )
    p = get_pass("rows_per_program")
    assert p.backward_sites(source) == []
    assert p.forward_sites(source) == []


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("rows_per_program")
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(AFTER, site)
    assert not r.applied and "no rows-per-program launch #0" in r.reason
    (fwd,) = p.forward_sites(AFTER)
    r = p.apply(AFTER, fwd, {})
    assert not r.applied and "needs params" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason


def test_a_column_block_the_grid_also_divides_by_is_not_rows_per_program() -> None:
    # The colsum expert's BLOCK_N (grid `cdiv(N, BLOCK_N)`, its aranges only on the tile's last
    # axis) was a site: setting it to 1 is one column a program, not one row, and on the CPU
    # the walk's gate calls of bias_gelu's BLOCK_N = 1 timed out. bias_gelu's rows still are
    # one; colsum's BLOCK_M is its walk's step (below).
    p = get_pass("rows_per_program")
    columns = BEFORE.replace(
        "grid = (triton.cdiv(M, BLOCK_M),)",
        "grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))",
    ).replace(
        "BLOCK_N = triton.next_power_of_2(N)", "BLOCK_N = min(triton.next_power_of_2(N), 1024)"
    )
    assert columns != BEFORE
    assert [s.params["name"] for s in p.backward_sites(columns)] == ["BLOCK_M"]
    from tests.conftest import KERNELS

    expected = {
        "colsum": [],
        "bias_gelu": ["BLOCK_M"],
        "cumsum": ["BLOCK_M"],
        "softmax": ["BLOCK_M"],
    }
    for family, want in expected.items():
        expert = (KERNELS / family / "expert.py").read_text()
        names = [s.params["name"] for s in p.backward_sites(expert)]
        assert names == want, (family, names)


def test_a_size_a_loop_steps_by_is_a_walks_chunk_not_rows_per_program() -> None:
    # The cumsum expert's looped chunk (grid `cdiv(cdiv(n_cols, n_chunks), LOOP_BLOCK_N)`, a
    # 1-D arange, `tl.range(start, end, BLOCK_N)`) and the colsum expert's row step: one row or
    # column a step is not one row a program.
    p = get_pass("rows_per_program")
    walked = BEFORE.replace(
        "    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n",
        "    for r0 in range(tl.program_id(0) * BLOCK_M, M, BLOCK_M):\n        pass\n"
        "    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n",
    )
    assert walked != BEFORE and p.backward_sites(BEFORE)
    assert p.backward_sites(walked) == []
