"""A kept structural rewrite's value (split_k's split, multi_row's rows a program) measured at its
neighbours (no kernels run): RewritePass.scaled and the klineage policy's `_values` (optimize/structural.py)."""

from __future__ import annotations

from collections.abc import Iterator

from klineage.optimize.materialize import mechanical
from klineage.optimize.policies import Context, Proposal, get_policy
from klineage.rewrite import all_passes
from tests.conftest import ROOT, heldout_context

HELDOUT = ROOT / "src" / "klineage" / "heldout"
LONG_K = HELDOUT / "matmul_long_k_small_mn"


def test_split_k_scales_the_programs_it_aims_at_and_its_cap() -> None:
    split_k = all_passes()["split_k"]
    assert split_k.scaled({}, 0.5) == {"programs": 264, "max_split": 256}
    assert split_k.scaled({"programs": 264, "max_split": 256}, 0.5) == {
        "programs": 132,
        "max_split": 128,
    }
    assert split_k.scaled({}, 2.0) == {"programs": 1056, "max_split": 1024}
    # a skill's params describe the expert's site: its program count is a name there
    assert split_k.scaled({"kernel": "k", "programs": "N", "step": "128"}, 2.0) == {
        "programs": 1056,
        "max_split": 1024,
    }
    assert split_k.scaled({"split": 64}, 2.0) == {"split": 128}
    assert split_k.scaled({}, 1e6)["max_split"] == 65535  # grid axis 1
    # a split given as a launcher expression keeps its value; the default's terms are scaled
    assert split_k.scaled({"split": "S"}, 2.0) == {"programs": 1056, "max_split": 1024}
    assert all_passes()["num_warps"].scaled({}, 2.0) is None  # no structural value


def test_multi_row_scales_its_rows_through_the_tile_cap_and_floor() -> None:
    multi_row = all_passes()["multi_row"]
    assert multi_row.scaled({"rows": 8}, 0.5) == {"rows": 4}
    assert multi_row.scaled({"kernel": "k", "tile": 4096}, 2.0) == {"tile": 4096, "scale": 2.0}
    assert multi_row.scaled({"scale": 2.0}, 2.0) == {"scale": 4.0}
    naive = (HELDOUT / "reverse_cumsum_rows" / "naive.py").read_text()

    def rows_line(params: dict) -> str:
        made = mechanical(naive, "multi_row", params).source
        assert made is not None
        return next(x.strip() for x in made.splitlines() if x.strip().startswith("ROWS ="))

    # a chunked row scan's default tile is 256 elements (4 rows of 64): 2 and 8 rows around it
    assert rows_line({}) == "ROWS = min(64, max(1, 256 // 64), triton.next_power_of_2(rows))"
    assert (
        rows_line({"scale": 0.5})
        == "ROWS = min(32, max(1, 128 // 64), triton.next_power_of_2(rows))"
    )
    assert (
        rows_line({"scale": 2.0})
        == "ROWS = min(128, max(1, 512 // 64), triton.next_power_of_2(rows))"
    )
    # a looped reduction keeps its programs floor, divided by the scale
    floored = rows_line({"tile": 4096, "programs": 528, "scale": 2.0})
    assert floored == (
        "ROWS = min(128, max(1, 8192 // 64), triton.next_power_of_2(rows), "
        "triton.next_power_of_2(max(1, rows // 528)))"
    )
    p = all_passes()["multi_row"]
    site = p.forward_sites(naive)[0]
    r = p.apply(naive, site, {"scale": 3})
    assert not r.applied and "params['scale']=3: expected a power of two" in r.reason


def _context() -> Context:
    return heldout_context("matmul_long_k_small_mn", ("k1m_bf16", "k512k_fp32"))


def _split_line(ctx: Context, prop: Proposal) -> str:
    made = mechanical(
        prop.source or ctx.best_source, prop.pass_name or "", prop.params, then=prop.then
    )
    assert made.source is not None, made.reason
    return next(x.strip() for x in made.source.splitlines() if x.strip().startswith("SPLIT ="))


def _to_the_kept_split(ctx: Context) -> tuple[Iterator[Proposal], Proposal, str]:
    """The klineage policy on the long-K matmul's naive kernel up to its kept tiling + split
    (as on the H200, 2026-12-04: the tiling alone correct and slower, the pair 33x)."""
    naive = ctx.best_source
    proposals = get_policy("klineage").proposals(ctx)
    first = next(proposals)
    assert first.pass_name == "output_tiling" and not first.then, first.key
    ctx.last_accepted = True  # correct, not faster
    both = next(proposals)
    assert [s for s, _ in both.then] == ["split_k"] and not both.source, both.key
    assert "min(512, triton.cdiv(4 * 132," in _split_line(ctx, both)
    made = mechanical(naive, both.pass_name or "", both.params, then=both.then).source
    assert made is not None
    ctx.best_source = made  # kept
    return proposals, both, naive


def test_a_kept_split_is_measured_at_half_and_a_faster_half_goes_one_step_further() -> None:
    ctx = _context()
    proposals, both, naive = _to_the_kept_split(ctx)
    half = next(proposals)
    assert half.source == naive and half.key.startswith(both.key + "*0.5@")
    assert "1/2 its structural value" in half.label
    assert "min(256, triton.cdiv(264," in _split_line(ctx, half)
    ctx.best_source = (
        mechanical(naive, half.pass_name or "", half.params, then=half.then).source or ""
    )
    quarter = next(proposals)  # kept: one more halving
    assert quarter.source == naive and "min(128, triton.cdiv(132," in _split_line(ctx, quarter)
    # not kept: that direction ends, and the other is not tried (one best value on the line)
    rest = [p.key for p in proposals]
    assert not any("*" in k for k in rest), rest
    assert any(k.startswith("tunables:") for k in rest), rest


def test_a_slower_half_is_followed_by_the_double_once() -> None:
    ctx = _context()
    proposals, both, naive = _to_the_kept_split(ctx)
    half = next(proposals)
    assert half.key.startswith(both.key + "*0.5@")
    double = next(proposals)  # the half was not faster
    assert double.key.startswith(both.key + "*2@") and double.source == naive
    assert "min(1024, triton.cdiv(1056," in _split_line(ctx, double)
    rest = [p.key for p in proposals]  # not faster either: no further step either way
    assert not any("*" in k for k in rest), rest


def test_no_neighbour_on_the_cpu_where_a_kept_rewrite_was_predicted_not_measured() -> None:
    """On the CPU a correct rewrite whose skill predicts a gain is kept (nothing is timed), and
    its neighbours would be kept on the same prediction: they are measurements, so none."""
    ctx = _context()
    ctx.device = "cpu"
    proposals, _, _ = _to_the_kept_split(ctx)
    rest = [p.key for p in proposals]
    assert not any("*" in k for k in rest), rest


def test_no_neighbour_when_a_regime_dispatch_after_the_rewrite_was_kept_instead() -> None:
    """The best kernel changed after the tiling + split, but not to the kernel they make (as
    when the regime dispatch that follows a trial is kept): nothing of theirs to measure."""
    ctx = _context()
    naive = ctx.best_source
    proposals = get_policy("klineage").proposals(ctx)
    next(proposals)
    ctx.last_accepted = True
    both = next(proposals)
    assert [s for s, _ in both.then] == ["split_k"]
    made = mechanical(naive, both.pass_name or "", both.params, then=both.then).source
    assert made is not None
    ctx.best_source = made + "\n# two kernels, one file\n"
    rest = [p.key for p in proposals]
    assert not any("*" in k for k in rest), rest


def test_a_dispatch_kept_after_the_double_does_not_send_the_value_further() -> None:
    """As on an H100 (2026-12-06): the column mean's double split was 1.02x, its regime
    dispatch was kept, and a 4x split (0.75x) followed as if the double had been kept."""
    ctx = _context()
    proposals, both, _ = _to_the_kept_split(ctx)
    next(proposals)  # the half: not faster
    double = next(proposals)
    assert double.key.startswith(both.key + "*2@")
    ctx.best_source += "\n# a regime dispatch of the double and the default\n"
    rest = [p.key for p in proposals]
    assert not any("*" in k for k in rest), rest
