"""Output comparison: tolerance, the worst element, NaN/Inf, shape and dtype."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.gate.compare import compare_outputs, compare_tensor, tensors_equal


def tol(_: str) -> float:
    return 1e-4


def test_equal_tensors_pass_with_zero_error() -> None:
    x = torch.randn(3, 5)
    c = compare_tensor(x, x.clone(), 1e-4, "output")
    assert c.ok and c.max_abs_err == 0.0


def test_worst_element_is_named_by_index() -> None:
    want = torch.zeros(4, 6)
    got = want.clone()
    got[2, 5] = 0.5
    got[1, 1] = 0.01
    c = compare_tensor(got, want, 1e-4, "output")
    assert not c.ok
    assert "2/24 element(s) beyond tolerance" in c.message
    assert "worst at (2, 5)" in c.message and "got 0.5" in c.message


def test_nan_where_reference_is_finite_fails_and_matching_nans_pass() -> None:
    want = torch.ones(3)
    got = want.clone()
    got[1] = math.nan
    c = compare_tensor(got, want, 1e-2, "output")
    assert not c.ok and "first at (1,): got NaN" in c.message
    both = torch.tensor([1.0, math.nan])
    assert compare_tensor(both.clone(), both, 1e-4, "output").ok


def test_inf_sign_must_match() -> None:
    want = torch.tensor([math.inf, 1.0])
    assert compare_tensor(want.clone(), want, 1e-4, "o").ok
    assert not compare_tensor(torch.tensor([-math.inf, 1.0]), want, 1e-4, "o").ok


def test_shape_and_dtype_mismatch_are_reported() -> None:
    assert (
        "shape (3,), expected (4,)"
        in compare_tensor(torch.zeros(3), torch.zeros(4), 1e-4, "o").message
    )
    assert (
        "dtype float16, expected float32"
        in compare_tensor(torch.zeros(3, dtype=torch.float16), torch.zeros(3), 1e-4, "o").message
    )


def test_integer_outputs_compare_exactly() -> None:
    c = compare_tensor(torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]), 1e-4, "o")
    assert not c.ok and "first at (2,): got 4, expected 3" in c.message


def test_multiple_outputs_count_and_each_checked() -> None:
    a, b = torch.randn(2), torch.randn(3)
    assert compare_outputs((a, b), (a, b), tol).ok
    assert "returned 1 output(s), expected 2" in compare_outputs(a, (a, b), tol).message
    assert "output[1]" in compare_outputs((a, b + 1), (a, b), tol).message


@settings(max_examples=50, deadline=None)
@given(scale=st.floats(min_value=1e-3, max_value=1e3), noise=st.floats(min_value=0, max_value=1e-6))
def test_perturbation_within_tolerance_always_passes(scale: float, noise: float) -> None:
    want = torch.linspace(-1, 1, 17, dtype=torch.float64) * scale
    got = want + noise * (1 + want.abs())
    assert compare_tensor(got, want, 1e-4, "o").ok


def test_tensors_equal_treats_nan_as_equal() -> None:
    x = torch.tensor([1.0, math.nan])
    assert tensors_equal(x, x.clone())
    assert not tensors_equal(x, torch.tensor([1.0, 2.0]))


def test_a_comparison_where_every_element_is_off_says_what_usually_causes_it() -> None:
    import torch

    from klineage.gate.compare import compare_tensor

    want = torch.randn(64, 5)
    c = compare_tensor(want + 1.0, want, 1e-4, "output")
    assert not c.ok and "nearly every element is off" in c.message and "same order" in c.message
    one = want.clone()
    one[3, 2] += 1.0
    c1 = compare_tensor(one, want, 1e-4, "output")
    assert not c1.ok and "nearly every element" not in c1.message  # one bad element: no such hint


def test_chunked_fast_pass_sees_every_chunk_and_leaves_inputs_alone(monkeypatch) -> None:
    """The fast pass compares FAST_CHUNK elements at a time: an error, a NaN or an infinity in
    the last (partial) chunk still fails with the element named, the largest errors come from
    any chunk, and float32 outputs (whose chunks are views, not copies) are not modified."""
    import klineage.gate.compare as compare

    monkeypatch.setattr(compare, "FAST_CHUNK", 7)
    want = torch.linspace(-3, 3, 40).reshape(5, 8)
    got = want.clone()
    got[4, 7] += 0.5  # element 39: the fifth chunk of five (39 // 7 = 5, a partial one)
    before = (got.clone(), want.clone())
    c = compare_tensor(got, want, 1e-4, "output")
    assert not c.ok and "1/40 element(s) beyond tolerance" in c.message
    assert "worst at (4, 7)" in c.message
    assert torch.equal(got, before[0]) and torch.equal(want, before[1])

    got[4, 7] = math.nan
    c = compare_tensor(got, want, 1e-4, "output")
    assert not c.ok and "first at (4, 7): got NaN" in c.message

    near = want.half()
    off = near.clone()
    off[2, 3] = float(off[2, 3]) + 1e-3  # inside fp16's tolerance, in the third chunk
    c = compare_tensor(off, near, 1e-2, "output")
    assert c.ok and c.max_abs_err > 0.0
    assert c.max_abs_err == compare_tensor(off.float(), near.float(), 1e-2, "output").max_abs_err


# The device path (compare.DEVICE_MIN and up, on the gate's GPU): the same float32 steps in
# chunks of DEVICE_CHUNK, each moved with a copy. On the CPU it runs with device="cpu" and
# the thresholds lowered, so every branch is exercised here; the GPU tier runs it on CUDA.


def _lowered(monkeypatch) -> None:
    from klineage.gate import compare as cmp

    monkeypatch.setattr(cmp, "DEVICE_MIN", 8)
    monkeypatch.setattr(cmp, "DEVICE_CHUNK", 7)  # several chunks, the last one partial


def _cases() -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    g = torch.Generator().manual_seed(3)
    out = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        want = torch.randn(5, 9, generator=g).to(dtype)
        near = (want.float() * (1 + 1e-4)).to(dtype)
        far = want.clone()
        far[3, 4] += 1.0
        nan = want.clone()
        nan[0, 8] = math.nan
        out += [
            (want.clone(), want, 1e-3),
            (near, want, 1e-2),
            (far, want, 1e-2),
            (nan, want, 1e-2),
        ]
    return out


def test_device_path_decides_and_measures_as_the_host(monkeypatch) -> None:
    _lowered(monkeypatch)
    for got, want, tolerance in _cases():
        kept = got.clone(), want.clone()
        host = compare_tensor(got, want, tolerance, "output")
        dev = compare_tensor(got, want, tolerance, "output", device="cpu")
        assert (dev.ok, dev.message, dev.criterion) == (host.ok, host.message, host.criterion)
        assert (dev.max_abs_err, dev.max_rel_err) == (host.max_abs_err, host.max_rel_err)
        # The in-place steps work on the moved copies, never on the caller's tensors.
        assert torch.equal(got.nan_to_num(), kept[0].nan_to_num())
        assert torch.equal(want, kept[1])
    assert not compare_tensor(*_cases()[2][:2], 1e-2, "o", device="cpu").ok


def test_device_path_falls_back_to_the_host_on_a_device_error(monkeypatch) -> None:
    from klineage.gate import compare as cmp

    _lowered(monkeypatch)
    real = cmp._fast_pass
    seen: list[object] = []

    def failing(got, want, tol, atol_scale, device=None):
        seen.append(device)
        if device is not None:
            raise RuntimeError("CUDA error: out of memory")
        return real(got, want, tol, atol_scale)

    monkeypatch.setattr(cmp, "_fast_pass", failing)
    x = torch.randn(4, 4)
    assert compare_tensor(x.clone(), x, 1e-4, "o", device="cpu").ok
    assert seen == [torch.device("cpu"), None]
    small = torch.randn(2)  # under DEVICE_MIN: the host, the device not asked
    seen.clear()
    assert compare_tensor(small.clone(), small, 1e-4, "o", device="cpu").ok
    assert seen == [None]
