"""online_softmax: two walks (a maximum, then a sum of exp(x - maximum)) become one online walk,
and back.

Golden on a row log-sum-exp walked in chunks, written for the purpose (not a corpus or held-out
kernel), the skips with their reasons, the held-out column softmax (naive and column-tiled) as
sites; backward, the softmax expert's online kernel (exp2, its guard) split into two walks. The interpreter tier runs the result and gates it (tests/interp/test_online_softmax.py).
"""

from __future__ import annotations

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.online_softmax import OnlineSoftmax
from tests.conftest import ROOT

PASS = OnlineSoftmax()
HELDOUT = ROOT / "src" / "klineage" / "heldout"

ROW_LSE = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_lse(x_ptr, out_ptr, n, stride, STEP: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, STEP)
    hi = float("-inf")
    for k in range(0, n, STEP):
        v = tl.load(x_ptr + row * stride + k + offs, mask=k + offs < n, other=float("-inf"))
        hi = tl.maximum(hi, tl.max(v, 0))

    acc = 0.0
    for k in range(0, n, STEP):
        v = tl.load(x_ptr + row * stride + k + offs, mask=k + offs < n, other=float("-inf"))
        acc += tl.sum(tl.exp(v - hi), 0)
    tl.store(out_ptr + row, hi + tl.log(acc))


def launch(x):
    out = torch.empty(x.shape[0], device=x.device)
    row_lse[(x.shape[0],)](x, out, x.shape[1], x.stride(0), STEP=16)
    return out
"""

ROW_LSE_AFTER = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_lse(x_ptr, out_ptr, n, stride, STEP: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, STEP)
    hi = float("-inf")
    acc = 0.0
    for k in range(0, n, STEP):
        v = tl.load(x_ptr + row * stride + k + offs, mask=k + offs < n, other=float("-inf"))
        hi_new = tl.maximum(hi, tl.max(v, 0))
        hi_ref = tl.where(hi_new == float("-inf"), 0.0, hi_new)
        acc = acc * tl.exp(hi - hi_ref) + tl.sum(tl.exp(v - hi_ref), 0)
        hi = hi_new
    tl.store(out_ptr + row, hi + tl.log(acc))


def launch(x):
    out = torch.empty(x.shape[0], device=x.device)
    row_lse[(x.shape[0],)](x, out, x.shape[1], x.stride(0), STEP=16)
    return out
"""


def rewritten(source: str) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site)
    assert r.applied, r.reason
    assert r.source is not None
    return r.source


def test_registered_both_ways() -> None:
    p = all_passes()["online_softmax"]
    assert p.STRUCTURAL
    assert [s.direction for s in p.backward_sites(ROW_LSE_AFTER)] == ["backward"]
    assert p.backward_sites(ROW_LSE) == []


def test_golden_row_log_sum_exp() -> None:
    """One walk: the running maximum, the sum rescaled by exp(old - new) against a guarded
    reference, the sum's start moved before it; the store after it untouched."""
    assert rewritten(ROW_LSE) == ROW_LSE_AFTER
    (site,) = PASS.forward_sites(ROW_LSE)
    assert site.params == {"kernel": "row_lse", "peak": "hi", "total": "acc"}
    assert site.line == 12  # the first walk's `for`
    assert PASS.forward_sites(ROW_LSE_AFTER) == []  # done once


def _variant(old: str, new: str) -> str:
    assert old in ROW_LSE
    return ROW_LSE.replace(old, new, 1)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            ROW_LSE.replace('other=float("-inf"))\n        acc', "other=0.0)\n        acc"),
            "bodies differ before their last statements",
        ),
        (_variant("tl.exp(v - hi)", "tl.exp(2.0 * v - hi)"), "exponent or its reduction"),
        (
            _variant("tl.sum(tl.exp(v - hi), 0)", "tl.sum(tl.exp(v - hi), 0, keep_dims=True)"),
            "exponent or its reduction",
        ),
        (
            _variant("acc += tl.sum(tl.exp(v - hi), 0)", "acc += tl.sum(tl.exp(v - hi * 0.5), 0)"),
            "does not end `S += tl.sum(tl.exp(E - hi)",
        ),
        (
            _variant(
                "        hi = tl.maximum(hi, tl.max(v, 0))\n",
                "        tl.store(out_ptr + row, 0.0)\n        hi = tl.maximum(hi, tl.max(v, 0))\n",
            ),
            "bodies differ",
        ),
        (_variant("    acc = 0.0\n", "    acc = 0.0\n    scale = 2.0\n"), "other than acc's start"),
        (_variant("    acc = 0.0\n", "    acc = hi * 0.0\n"), "start reads what the first walk"),
        (_variant("    acc = 0.0\n", "    acc = v * 0.0\n"), "start reads what the first walk"),
        (
            _variant("hi = tl.maximum(hi, tl.max(v, 0))", "hi = tl.maximum(hi, tl.min(v, 0))"),
            "does not end `M = tl.maximum",
        ),
    ],
    ids=[
        "bodies",
        "exponent",
        "reduction",
        "shift",
        "store",
        "between",
        "start-peak",
        "start-loop",
        "min",
    ],
)
def test_skips_say_why(source: str, why: str) -> None:
    assert PASS.forward_sites(source) == []
    (reason,) = PASS.why_not(source)
    assert why in reason, reason


def test_a_store_in_both_walks_is_refused() -> None:
    store = "        tl.store(out_ptr + row, 0.0)\n"
    src = ROW_LSE.replace("        hi = tl.maximum", store + "        hi = tl.maximum", 1).replace(
        "        acc += tl.sum", store + "        acc += tl.sum", 1
    )
    assert PASS.forward_sites(src) == []
    assert PASS.why_not(src) == ["row_lse: a walk stores"]


def test_loops_of_other_headers_are_not_considered() -> None:
    src = _variant(
        "    acc = 0.0\n    for k in range(0, n, STEP):",
        "    acc = 0.0\n    for k in range(0, n, 2 * STEP):",
    )
    assert PASS.forward_sites(src) == [] and PASS.why_not(src) == []


@pytest.mark.parametrize("shape", ["naive", "column_tiled"])
def test_the_held_out_column_softmax_is_a_site(shape: str) -> None:
    """Its naive kernel (one column a program, scalars) and the column-tiled one ([1, BLOCK_N]
    totals, keep_dims): both walks merged, the write walk after them unchanged."""
    from klineage.optimize.materialize import mechanical

    src = (HELDOUT / "column_softmax" / "naive.py").read_text()
    if shape == "column_tiled":
        src = mechanical(src, "column_tiling").source or ""
    out = rewritten(src)
    assert out.count("for r0 in range(0, M, CHUNK):") == 2
    assert (
        "denom = denom * tl.exp(peak - peak_ref) + tl.sum(tl.exp(a.to(tl.float32) - peak_ref), axis=0"
        in out
    )
    assert "p = tl.exp(a.to(tl.float32) - peak) / denom" in out


SPLIT_BACK = """
    hi = float("-inf")
    acc = 0.0
    for k in range(0, n, STEP):
        v = tl.load(x_ptr + row * stride + k + offs, mask=k + offs < n, other=float("-inf"))
        hi = tl.maximum(hi, tl.max(v, 0))

    for k in range(0, n, STEP):
        v = tl.load(x_ptr + row * stride + k + offs, mask=k + offs < n, other=float("-inf"))
        hi_ref = tl.where(hi == float("-inf"), 0.0, hi)
        acc += tl.sum(tl.exp(v - hi_ref), 0)
    tl.store(out_ptr + row, hi + tl.log(acc))
"""


def _simplified(source: str) -> str:
    (site,) = PASS.backward_sites(source)
    r = PASS.simplify(source, site)
    assert r.applied, r.reason
    assert r.source is not None
    return r.source


def test_backward_splits_the_online_walk_keeping_its_reference() -> None:
    """The running maximum alone, then the sum against the final maximum's reference (the
    guard kept: a row of -inf only still sums 0); the rescale dropped."""
    out = _simplified(ROW_LSE_AFTER)
    assert SPLIT_BACK in out
    assert "hi_new" not in out and "acc * tl.exp" not in out


def test_backward_on_the_softmax_expert_online_kernel() -> None:
    """The expert's exp2 form: `m_ref = tl.where(m_new == -inf, 0.0, m_new) * _LOG2E` and
    `d = d * tl.exp2(m * _LOG2E - m_ref) + tl.sum(tl.exp2(x * _LOG2E - m_ref), axis=0)`."""
    expert = (ROOT / "src" / "klineage" / "kernels" / "softmax" / "expert.py").read_text()
    (site,) = PASS.backward_sites(expert)
    assert site.params == {"kernel": "_softmax_online_kernel", "peak": "m", "total": "d"}
    out = _simplified(expert)
    assert "        m = tl.maximum(m, tl.max(x, axis=0))\n" in out
    assert '        m_ref = tl.where(m == -float("inf"), 0.0, m) * _LOG2E\n' in out
    assert "        d += tl.sum(tl.exp2(x * _LOG2E - m_ref), axis=0)\n" in out
    kernel = out.split("def _softmax_online_kernel")[1].split("def softmax_forward")[0]
    assert "m_new =" not in kernel and "d * tl.exp2" not in kernel
    assert PASS.backward_sites(out) == []


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("acc = acc * tl.exp(hi - hi_ref)", "acc = acc * tl.exp(v - hi_ref)", "rescale reads more"),
        ("tl.sum(tl.exp(v - hi_ref), 0)", "tl.sum(tl.exp(v - hi), 0)", "do not read hi_ref alone"),
        ("        hi = hi_new\n", "        hi = hi_new + 0.0\n", "does not end `hi = hi_new`"),
        (
            'hi_ref = tl.where(hi_new == float("-inf"), 0.0, hi_new)',
            'hi_ref = tl.where(hi_new == float("-inf"), 0.0, v)',
            "not a function of hi_new alone",
        ),
        ("tl.sum(tl.exp(v - hi_ref), 0)", "tl.sum(tl.exp2(v - hi_ref), 0)", "not one exponential"),
        (
            "    tl.store(out_ptr + row, hi + tl.log(acc))",
            "    tl.store(out_ptr + row, hi_ref + tl.log(acc))",
            "read after the walk",
        ),
    ],
    ids=["rescale", "terms", "assign", "reference", "exponential", "after"],
)
def test_backward_skips_say_why(old: str, new: str, why: str) -> None:
    assert old in ROW_LSE_AFTER
    src = ROW_LSE_AFTER.replace(old, new, 1)
    from klineage.rewrite.passes.online_softmax import analyse_online

    assert PASS.backward_sites(src) == []
    reasons = [x[1] for x in analyse_online(src) if isinstance(x, tuple)]
    assert any(why in r for r in reasons), reasons


def test_the_exp2_form_exp2_log2e_writes_is_merged_too() -> None:
    """After column_tiling and exp2_log2e (the order klineage's search kept them in on the
    column softmax): `tl.exp2(E * C - M * C)`; the rescale keeps C factored (distributed, the
    H100's FMA contraction made it compound: refused there, 2026-12-05 and 06)."""
    from klineage.optimize.materialize import mechanical

    src = (HELDOUT / "column_softmax" / "naive.py").read_text()
    for step in ("column_tiling", "exp2_log2e"):
        src = mechanical(src, step).source or ""
    out = rewritten(src)
    c = "1.4426950408889634"
    assert (
        f"denom = denom * tl.exp2((peak - peak_ref) * {c}) + "
        f"tl.sum(tl.exp2(a.to(tl.float32) * {c} - peak_ref * {c}), axis=0, keep_dims=True)"
    ) in out
    uneven = src.replace(
        f"tl.exp2(a.to(tl.float32) * {c} - peak * {c}), axis=0",
        f"tl.exp2(a.to(tl.float32) * {c} - peak * 2.0), axis=0",
        1,
    )
    assert uneven != src and PASS.forward_sites(uneven) == []
