"""ascending_scan (rewrite/passes/ascending_scan.py): a chunk loaded back to front becomes one
loaded in ascending addresses with its scans turned around; golden before/after on kernels
written for the purpose, and the kernels it must leave alone, each with its reason."""

from __future__ import annotations

from pathlib import Path

from klineage.rewrite import all_passes
from tests.conftest import apply_at_every_site

PASS = all_passes()["ascending_scan"]
HELDOUT = Path(__file__).resolve().parents[3] / "src" / "klineage" / "heldout"

SUFFIX = """
import triton
import triton.language as tl


@triton.jit
def suffix(x_ptr, y_ptr, n, STEP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carried = 0.0
    for done in range(0, n, STEP):
        at = (n - 1 - done) - tl.arange(0, STEP)
        ok = at >= 0
        v = tl.load(x_ptr + row * n + at, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n + at, carried + tl.cumsum(v, axis=0), mask=ok)
        carried += tl.sum(v, axis=0)
"""


def _apply(source: str) -> str:
    return apply_at_every_site("ascending_scan", source)


def test_a_suffix_walk_loads_ascending_and_scans_in_reverse() -> None:
    out = _apply(SUFFIX)
    assert "at = (n - done - STEP) + tl.arange(0, STEP)" in out
    assert "carried + tl.cumsum(v, axis=0, reverse=True)" in out
    assert "carried += tl.sum(v, axis=0)" in out  # an order-free reduction stays
    assert (
        out.replace("(n - done - STEP) + ", "(n - 1 - done) - ").replace(", reverse=True", "")
        == SUFFIX
    )
    assert PASS.forward_sites(out) == []  # nothing loads back to front any more


def test_a_scan_already_reversed_is_turned_forward_and_other_literals_fold() -> None:
    source = SUFFIX.replace("(n - 1 - done)", "(n + 3 - done)").replace(
        "tl.cumsum(v, axis=0)", "tl.cumsum(v, axis=0, reverse=True)"
    )
    out = _apply(source)
    assert "at = (n - done + 4 - STEP) + tl.arange(0, STEP)" in out
    assert "tl.cumsum(v, axis=0), mask=ok)" in out and "reverse" not in out


def test_the_reverse_cumsums_kernels_of_every_shape_are_sites() -> None:
    naive = (HELDOUT / "reverse_cumsum_rows" / "naive.py").read_text()
    assert len(PASS.forward_sites(naive)) == 1
    rows = all_passes()["multi_row"]
    made = rows.apply(naive, rows.forward_sites(naive)[0], {}).source
    assert made is not None
    out = _apply(made)
    assert "pos = (n - done - CHUNK) + tl.arange(0, CHUNK)[None, :]" in out
    assert "tl.cumsum(v, axis=1, reverse=True)" in out


def test_kernels_that_read_the_lane_order_otherwise_are_left_alone() -> None:
    cases = [
        # a store at ascending addresses of values loaded back to front: a reversal
        (
            "tl.store(y_ptr + row * n + at, carried",
            "tl.store(y_ptr + row * n + done + tl.arange(0, STEP), carried",
        ),
        # the scan over another axis than the chunk's
        ("tl.cumsum(v, axis=0)", "tl.cumsum(v, axis=1)"),
        # an operation the analysis does not know (its lanes' order may matter)
        ("carried += tl.sum(v, axis=0)", "carried += tl.argmax(v, axis=0)"),
        # a subscript of the chunk's values
        ("carried += tl.sum(v, axis=0)", "carried += tl.sum(v[None, :], axis=1)"),
    ]
    for old, new in cases:
        source = SUFFIX.replace(old, new)
        assert source != SUFFIX, old
        assert PASS.forward_sites(source) == [], new
        [why] = PASS.why_not(source)
        assert why.startswith("suffix: "), why
    # a 1-D chunk beside a 2-D tile: which axis its lanes end on is not read
    tiled = SUFFIX.replace(
        "    carried = 0.0\n", "    carried = 0.0\n    acc = tl.zeros((4, STEP), tl.float32)\n"
    )
    assert PASS.forward_sites(tiled) == [] and "2-D tile" in PASS.why_not(tiled)[0]
    # a [None, :] chunk meets a 1-D tl.arange, which broadcasts along the same axis
    rows = all_passes()["multi_row"]
    naive = (HELDOUT / "reverse_cumsum_rows" / "naive.py").read_text()
    made = rows.apply(naive, rows.forward_sites(naive)[0], {}).source
    assert made is not None and PASS.forward_sites(made)
    meets = made.replace("inside = pos >= 0", "inside = pos >= tl.arange(0, CHUNK) - CHUNK")
    assert meets != made and PASS.forward_sites(meets) == []
    assert "another tl.arange" in PASS.why_not(meets)[0]
    forward = SUFFIX.replace("(n - 1 - done) - tl.arange(0, STEP)", "done + tl.arange(0, STEP)")
    assert PASS.why_not(forward) == [
        "suffix: no `p = A - tl.arange(0, C)` (a chunk loaded back to front)"
    ]


def test_the_shipped_hints_skill_is_written_by_ascending_scan_where_a_chunk_is_loaded_back_to_front() -> (
    None
):
    """retrieve's FIRST_FORMS: multiple_of_hints finds offsets to hint in the reverse cumsum's
    naive kernel, but hints cannot make a descending load vectorize; ascending_scan writes the
    skill there, and on a kernel loaded forward the hints skill keeps its own pass."""
    from klineage.problem.shapes import features, regime_shapes
    from klineage.skills.library import load_library
    from klineage.skills.retrieve import retrieve

    shipped, _ = load_library(None)
    where = HELDOUT / "reverse_cumsum_rows"
    shapes = regime_shapes(where / "problem.py")
    gpu = ("short_rows_fp16", "mid_fp32")
    naive = (where / "naive.py").read_text()
    forward = naive.replace("(n - 1 - done) - tl.arange(0, CHUNK)", "done + tl.arange(0, CHUNK)")
    assert forward != naive
    assert all_passes()["multiple_of_hints"].forward_sites(naive)
    written = {}
    for name, source in (("naive", naive), ("forward", forward)):
        found = retrieve(shipped, where / "problem.py", where / "naive.py", "cuda", "9.0",
                         source=source, target={r: features(shapes[r]) for r in gpu},
                         shapes={r: shapes[r]["shapes"] for r in gpu})  # fmt: skip
        r = next(x for x in found if x.skill.rewrite.pass_name == "multiple_of_hints")
        assert r.materializer == "mechanical", r.reasons
        written[name] = r.pass_name
    assert written == {"naive": "ascending_scan", "forward": "multiple_of_hints"}
