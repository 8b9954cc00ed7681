"""The float64 criteria of the comparison (gate/compare.py), on synthetic tensors: an output
beyond tolerance of PyTorch's own float32 result passes when it is within tolerance of the
reference evaluated in float64, or within TORCH_ERROR_FACTOR x PyTorch's own error against it;
a dropped term still fails by a wide margin, naming the worst element."""

from __future__ import annotations

import math
import re

import pytest
import torch

from klineage.gate.compare import (
    FLOAT64,
    REFERENCE,
    TORCH_ERROR,
    TORCH_ERROR_FACTOR,
    compare_outputs,
    compare_tensor,
)

TOL = 1e-4


def _cancelled(n: int = 64, seed: int = 0) -> torch.Tensor:
    """Exact (float64) outputs of a cancelling reduction: some near zero, the largest ~100."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(n, generator=g, dtype=torch.float64) * 50
    r[:8] = torch.linspace(-0.5, 0.5, 8, dtype=torch.float64)  # results near zero
    return r


def _noise(r: torch.Tensor, size: float, seed: int) -> torch.Tensor:
    """An error of at most `size` per element, of either sign (a summation order's rounding)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(r.shape, generator=g, dtype=torch.float64) * 2 - 1) * size


def test_within_tolerance_of_the_reference_is_the_first_criterion_and_float64_is_not_read() -> None:
    want = torch.randn(100)
    got = want + 1e-6

    def unread() -> torch.Tensor:
        raise AssertionError("the float64 evaluation was read for an output within tolerance")

    c = compare_tensor(got, want, TOL, "output", exact=unread)
    assert c.ok and c.criterion == REFERENCE and c.note == ""


def test_more_accurate_than_pytorch_passes_against_float64() -> None:
    r = _cancelled()
    want = (r + _noise(r, 4e-3, 1)).float()  # PyTorch's float32 order: 4e-3 off near zero
    got = (r + _noise(r, 2e-5, 2)).float()  # another order, closer to the truth
    assert not compare_tensor(got, want, TOL, "output").ok  # the old criterion rejects it
    c = compare_tensor(got, want, TOL, "output", exact=r)
    assert c.ok, c.message
    assert c.criterion == FLOAT64
    assert "within tolerance 0.0001 of the float64 evaluation" in c.note
    assert c.max_abs_err > 1e-3  # the errors recorded are still against PyTorch's own output


def test_an_order_a_few_times_worse_than_pytorch_passes_within_the_factor() -> None:
    r = _cancelled()
    torch_err = 4e-3
    want = (r + _noise(r, torch_err, 1)).float()
    got = (r + _noise(r, 5 * torch_err, 2)).float()  # 5x PyTorch's rounding, beyond tolerance
    assert not compare_tensor(got, want, TOL, "output").ok
    c = compare_tensor(got, want, TOL, "output", exact=r)
    assert c.ok, c.message
    assert c.criterion == TORCH_ERROR
    m = re.search(r"within 16x of PyTorch's own float32 error against float64 \(max (\S+) vs (\S+)\)",
                  c.note)  # fmt: skip
    assert m, c.note
    assert float(m.group(1)) > float(m.group(2)) > 0


def test_beyond_the_factor_fails_naming_the_worst_element_and_the_bound() -> None:
    r = _cancelled()
    torch_err = 1e-3
    want = (r + _noise(r, torch_err, 1)).float()
    got = want.clone()
    got[3] = float(r[3]) + 2 * TORCH_ERROR_FACTOR * torch_err
    c = compare_tensor(got, want, TOL, "output", exact=r)
    assert not c.ok
    assert "beyond tolerance 0.0001, also against the reference evaluated in float64" in c.message
    assert "16x PyTorch's own float32 error" in c.message
    assert "worst at (3,)" in c.message and "float64:" in c.message and "allowed" in c.message


def test_a_dropped_term_fails_by_a_wide_margin() -> None:
    """A column sum of 4096 terms of size ~10 that cancel: PyTorch's float32 error is rounding
    at the partial sums; dropping one term is an error of a term, far beyond the margin."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 16, generator=g) + 10.0
    x[2048:] -= 20.0
    r = x.double().sum(0)
    want = x.sum(0)
    dropped = x[:-1].sum(0)  # the last row never added
    c = compare_tensor(dropped, want, TOL, "output", exact=r)
    assert not c.ok
    err, allowed = (float(v) for v in re.findall(r"abs err (\S+), allowed ([^)]+)\)", c.message)[0])
    assert err > 50 * allowed, c.message
    # ... while the same sum in another order passes
    blocked = x.view(64, 64, 16).sum(1).sum(0)
    assert compare_tensor(blocked, want, TOL, "output", exact=r).ok


def test_pytorch_error_beyond_rounding_is_no_margin() -> None:
    """A float64 path that computes something else (a rounding that flipped) gives PyTorch an
    'error' as large as the output: it must not widen the tolerance of every element."""
    r = torch.linspace(0, 1, 50, dtype=torch.float64)
    want = r.float().clone()
    want[10] += 0.5  # PyTorch's float32 result differs from float64 by a step, not a rounding
    got = want.clone()
    got[20] += 0.01  # a real error elsewhere
    c = compare_tensor(got, want, TOL, "output", exact=r)
    assert not c.ok
    assert "is more than a rounding error and is not a margin" in c.message
    assert "worst at (20,)" in c.message


def test_half_precision_gets_the_float64_tolerance_but_no_multiple_of_pytorch_error() -> None:
    r = torch.linspace(-1, 1, 64, dtype=torch.float64) * 20
    want = (r + _noise(r, 0.3, 1)).to(torch.float16)  # PyTorch's float16 result, 0.3 off
    near = r.to(torch.float16)  # rounded once from the truth: within tolerance of float64
    assert not compare_tensor(near, want, 1e-2, "output").ok
    c = compare_tensor(near, want, 1e-2, "output", exact=r)
    assert c.ok and c.criterion == FLOAT64, c.message
    worse = (r + _noise(r, 0.6, 2)).to(torch.float16)  # within 16x PyTorch's error, not tol
    c = compare_tensor(worse, want, 1e-2, "output", exact=r)
    assert not c.ok and "a margin for float32 outputs only" in c.message


def test_no_float64_evaluation_fails_as_before_and_says_why() -> None:
    r = _cancelled()
    want = (r + _noise(r, 4e-3, 1)).float()
    got = (r + _noise(r, 2e-5, 2)).float()
    c = compare_tensor(got, want, TOL, "output", no_exact="in float64 the reference raised X")
    assert not c.ok and "worst at" in c.message
    assert "(no float64 evaluation: in float64 the reference raised X)" in c.message
    bad = compare_tensor(got, want, TOL, "output", exact=torch.zeros(3, dtype=torch.float64))
    assert not bad.ok and "does not match the output's shape" in bad.message


def test_a_nan_is_wrong_whatever_float64_says() -> None:
    r = _cancelled()
    want = r.float()
    got = want.clone()
    got[5] = math.nan
    c = compare_tensor(got, want, TOL, "output", exact=r)
    assert not c.ok and "NaN" in c.message


@pytest.mark.parametrize("order", ["got, want", "tuple"])
def test_outputs_read_float64_once_and_report_the_loosest_criterion(order: str) -> None:
    r = _cancelled()
    want = (r + _noise(r, 4e-3, 1)).float()
    got = (r + _noise(r, 5 * 4e-3, 2)).float()
    ints = torch.arange(5)
    reads = []

    def exact() -> list:
        reads.append(1)
        return [None, r, r]

    c = compare_outputs((ints, got, want.clone()), (ints, want, want), lambda _: TOL, 1.0, exact)
    assert c.ok, c.message
    assert reads == [1]
    assert c.criterion == TORCH_ERROR and c.note.startswith("output[1]: ")
    assert (
        compare_outputs((ints, want), (ints, want), lambda _: TOL, 1.0, exact).criterion
        == REFERENCE
    )
    assert reads == [1]


def _scenarios() -> list[tuple[str, torch.Tensor, torch.Tensor, float, torch.Tensor | None]]:
    """(name, got, want, tol, float64 evaluation): each criterion's pass and each failure."""
    r = _cancelled()
    want = (r + _noise(r, 4e-3, 1)).float()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 16, generator=g) + 10.0
    x[2048:] -= 20.0
    far = want.clone()
    far[3] = float(r[3]) + 2 * TORCH_ERROR_FACTOR * 4e-3
    step = torch.linspace(0, 1, 50, dtype=torch.float64)
    stepped = step.float().clone()
    stepped[10] += 0.5
    wrong = stepped.clone()
    wrong[20] += 0.01
    h = torch.linspace(-1, 1, 64, dtype=torch.float64) * 20
    h_want = (h + _noise(h, 0.3, 1)).to(torch.float16)
    nan = want.clone()
    nan[5] = math.nan
    # Closer to float64 than PyTorch except at the elements it copies from the reference, which
    # pass as they are (within the reference's own tolerance), not by a margin.
    mixed = (r + _noise(r, 2e-5, 2)).float()
    mixed[:8] = want[:8]
    return [
        ("float64 and the reference's own", mixed, want, TOL, r),
        ("reference", want + 1e-6, want, TOL, r),
        ("float64", (r + _noise(r, 2e-5, 2)).float(), want, TOL, r),
        ("torch error", (r + _noise(r, 2e-2, 2)).float(), want, TOL, r),
        ("beyond the factor", far, want, TOL, r),
        ("dropped term", x[:-1].sum(0), x.sum(0), TOL, x.double().sum(0)),
        ("blocked order", x.view(64, 64, 16).sum(1).sum(0), x.sum(0), TOL, x.double().sum(0)),
        ("no rounding margin", wrong, stepped, TOL, step),
        ("half float64", h.to(torch.float16), h_want, 1e-2, h),
        ("half beyond", (h + _noise(h, 0.6, 2)).to(torch.float16), h_want, 1e-2, h),
        ("no float64", (r + _noise(r, 2e-5, 2)).float(), want, TOL, None),
        ("wrong shape", (r + _noise(r, 2e-5, 2)).float(), want, TOL, torch.zeros(3).double()),
        ("nan", nan, want, TOL, r),
    ]


@pytest.mark.parametrize("scenario", _scenarios(), ids=lambda s: s[0])
def test_the_device_path_decides_every_criterion_as_the_host(scenario, monkeypatch) -> None:
    """compare_tensor(device=...) for a large output (here device="cpu" with the thresholds
    lowered, so that each chunked step runs; the GPU tier runs it on CUDA): the same verdict,
    criterion, note, message and errors as the host's path."""
    from klineage.gate import compare as cmp

    monkeypatch.setattr(cmp, "DEVICE_MIN", 8)
    monkeypatch.setattr(cmp, "DEVICE_CHUNK", 7)
    _, got, want, tol, r = scenario
    host = compare_tensor(got, want, tol, "output", exact=r)
    dev = compare_tensor(got, want, tol, "output", exact=r, device="cpu")
    assert (dev.ok, dev.criterion, dev.note, dev.message) == (
        host.ok,
        host.criterion,
        host.note,
        host.message,
    )
    assert (dev.max_abs_err, dev.max_rel_err) == (host.max_abs_err, host.max_rel_err)


def test_the_device_criteria_decide_passes_themselves(monkeypatch) -> None:
    """The passes by the float64 criteria are decided on the device (not handed to the host),
    and a failure is handed to the host, which names the worst element."""
    from klineage.gate import compare as cmp

    monkeypatch.setattr(cmp, "DEVICE_MIN", 8)
    monkeypatch.setattr(cmp, "DEVICE_CHUNK", 7)
    by_name = {s[0]: s for s in _scenarios()}
    for name, criterion in (
        ("reference", REFERENCE),
        ("float64", FLOAT64),
        ("torch error", TORCH_ERROR),
    ):
        _, got, want, tol, r = by_name[name]
        c = cmp._device_criteria(got, want, r, tol, 1.0, "output", "cpu")
        assert c is not None and c.ok and c.criterion == criterion, name
    for name in ("beyond the factor", "no rounding margin", "half beyond", "no float64", "nan"):
        _, got, want, tol, r = by_name[name]
        assert cmp._device_criteria(got, want, r, tol, 1.0, "output", "cpu") is None, name
