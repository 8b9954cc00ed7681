"""scan_dot (rewrite/passes/scan_dot.py): a tl.cumsum of a load widened to fp32 goes through a
helper that scans a 16-bit tile by tl.dot with a triangle of ones; golden before/after on
kernels written for the purpose, and the scans it must leave alone, each with its reason."""

from __future__ import annotations

from klineage.rewrite import all_passes
from klineage.rewrite.passes.scan_dot import HELPER, HELPERS
from tests.conftest import ROOT, apply_at_every_site

PASS = all_passes()["scan_dot"]

ROWS = """
import triton
import triton.language as tl


# a scan of ROWS rows a program
@triton.jit
def prefix(x_ptr, y_ptr, n, ROWS: tl.constexpr, STEP: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    carried = tl.zeros((ROWS, 1), tl.float32)
    for done in range(0, n, STEP):
        at = done + tl.arange(0, STEP)[None, :]
        v = tl.load(x_ptr + rows * n + at, mask=at < n, other=0.0).to(tl.float32)
        tl.store(y_ptr + rows * n + at, carried + tl.cumsum(v, axis=1), mask=at < n)
        carried += tl.sum(v, axis=1, keep_dims=True)
"""


def _apply(source: str) -> str:
    return apply_at_every_site("scan_dot", source)


def test_a_widened_tile_keeps_its_dtype_beside_and_scans_through_the_helper() -> None:
    out = _apply(ROWS)
    assert "v_in = tl.load(x_ptr + rows * n + at, mask=at < n, other=0.0)\n" in out
    assert "        v = v_in.to(tl.float32)\n" in out
    assert f"carried + {HELPER}(v_in, 1, False)" in out
    assert "carried += tl.sum(v, axis=1, keep_dims=True)" in out  # the widened values stay
    # the helper once, before the kernel, the kernel's own comment kept above the helper
    assert out.count(f"def {HELPER}(") == 1
    assert (
        out.index("# a scan of ROWS rows") < out.index(f"def {HELPER}(") < out.index("def prefix(")
    )
    assert PASS.forward_sites(out) == []  # the helper's own scans are not sites
    compile(out, "scan_dot.py", "exec")


def test_a_reversed_inline_scan_and_a_second_kernel_share_one_helper() -> None:
    source = ROWS.replace(
        "carried + tl.cumsum(v, axis=1)",
        "carried + tl.cumsum(tl.load(x_ptr + rows * n + at).to(tl.float32), axis=1, reverse=True)",
    )
    source += "\n\n" + ROWS.split("# a scan of ROWS rows a program\n")[1].replace(
        "def prefix(", "def prefix2("
    )
    out = _apply(source)
    assert f"{HELPER}(tl.load(x_ptr + rows * n + at), 1, True)" in out
    assert all(out.count(f"def {name}(") == 1 for name in HELPERS)
    assert f"{HELPER}(v_in, 1, False)" in out  # prefix2's named load
    compile(out, "scan_dot.py", "exec")


def test_a_fresh_name_never_shadows_one_the_kernel_has() -> None:
    out = _apply(ROWS.replace("rows = (", "v_in = 0\n    rows = ("))
    assert "v_in2 = tl.load(" in out and f"{HELPER}(v_in2, 1, False)" in out


def test_scans_it_leaves_alone_say_why() -> None:
    cases = {
        # computed values: their dtype is no tensor's, and narrowing them would round
        "v = tl.load(x_ptr + rows * n + at, mask=at < n, other=0.0).to(tl.float32) * 2.0": (
            "not a load widened to fp32"
        ),
        # a 16-bit scan kept in 16 bits: no widened values to keep the product's precision
        "v = tl.load(x_ptr + rows * n + at, mask=at < n, other=0.0)": "not a load widened",
    }
    for line, why in cases.items():
        source = ROWS.replace(
            "v = tl.load(x_ptr + rows * n + at, mask=at < n, other=0.0).to(tl.float32)", line
        )
        assert PASS.forward_sites(source) == []
        assert any(why in r for r in PASS.why_not(source)), PASS.why_not(source)
    twice = ROWS.replace("        tl.store(", "        v = v + 1.0\n        tl.store(")
    assert PASS.forward_sites(twice) == []
    assert any("assigned 2 times" in r for r in PASS.why_not(twice))
    variable_axis = ROWS.replace("tl.cumsum(v, axis=1)", "tl.cumsum(v, axis=AX)")
    assert any("axis is not a literal" in r for r in PASS.why_not(variable_axis))


def test_a_second_scan_of_the_same_values_takes_the_load_kept_beside_them() -> None:
    source = ROWS.replace(
        "        carried += tl.sum(v, axis=1, keep_dims=True)",
        "        carried += tl.sum(v, axis=1, keep_dims=True)\n"
        "        tl.store(y_ptr + at, tl.cumsum(v, axis=1, reverse=True), mask=at < n)",
    )
    out = source
    for _ in range(2):  # one site at a time: the second appears once the first split the line
        sites = PASS.forward_sites(out)
        assert sites, PASS.why_not(out)
        out = PASS.apply(out, sites[0]).source or ""
    assert f"carried + {HELPER}(v_in, 1, False)" in out
    assert f"tl.store(y_ptr + at, {HELPER}(v_in, 1, True)" in out
    assert out.count("v_in = tl.load(") == 1 and PASS.forward_sites(out) == []


CUMSUM_EXPERT = ROOT / "src" / "klineage" / "kernels" / "cumsum" / "expert.py"


def test_backward_on_the_cumsum_expert_is_tl_cumsum_and_forward_restores_it() -> None:
    """The cumsum expert scans its 16-bit tiles by the helper (Optimization 8): the backward
    step is the tl.cumsum of the widened values, the helpers go with their last call, and the
    forward rewrite of that kernel is the expert again, character for character."""
    expert = CUMSUM_EXPERT.read_text(encoding="utf-8")
    (site,) = PASS.backward_sites(expert)
    assert site.function == "_cumsum_tile_kernel"
    simpler = PASS.simplify(expert, site)
    assert simpler.applied, simpler.reason
    assert "y = tl.cumsum(x.to(tl.float32), axis=1)\n" in simpler.source
    assert not any(f"def {h}(" in simpler.source for h in HELPERS)
    assert PASS.backward_sites(simpler.source) == []
    (back,) = PASS.forward_sites(simpler.source)
    assert PASS.apply(simpler.source, back).source == expert


def test_backward_keeps_the_helpers_while_another_kernel_calls_them() -> None:
    two = _apply(
        ROWS
        + ROWS.replace("def prefix(", "def prefix2(").split("import triton.language as tl\n")[1]
    )
    sites = PASS.backward_sites(two)
    assert [s.function for s in sites] == ["prefix", "prefix2"]
    first = PASS.simplify(two, sites[0]).source
    assert f"def {HELPER}(" in first and first.count(f"{HELPER}(v_in") == 1
    last = PASS.simplify(first, PASS.backward_sites(first)[0]).source
    assert not any(f"def {h}(" in last for h in HELPERS)
    assert "tl.cumsum(v_in.to(tl.float32), axis=1)" in last
    assert "tl.cumsum(v_in2.to(tl.float32), axis=1)" in last  # the second kernel's fresh name
    # an odd call (not values, AXIS, REVERSE) is no site: said, not rewritten
    odd = two.replace(f"{HELPER}(v_in, 1, False)", f"{HELPER}(v_in, AXIS=1, REVERSE=False)", 1)
    assert [s.function for s in PASS.backward_sites(odd)] == ["prefix2"]
