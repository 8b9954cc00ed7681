"""Compare a candidate's outputs with the reference's: shape, dtype, NaN/Inf, tolerance.

A floating output passes when every element is within the dtype tolerance of the reference's
own output (REFERENCE: |got - want| <= tol * (atol_scale + |want|)), or, where the reference
could also be evaluated in float64 (gate/reference.py), every element is within that tolerance of
either the reference's output or of its float64 evaluation r (FLOAT64), or, for float32 outputs,
of either the reference's output or of r widened by TORCH_ERROR_FACTOR x PyTorch's own error
(TORCH_ERROR: |got - r| <= tol * (atol_scale + |r|) + FACTOR * max|want - r|, while that error is
a rounding error). A correct reduction in another summation order than PyTorch's is not rejected
for PyTorch's rounding. The message names the worst element (index, the values) so a user can
find the bug.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

# What decided a passing floating output, from the strictest to the loosest.
REFERENCE = "reference"  # within tolerance of the reference's output at its own dtype
FLOAT64 = "float64"  # within tolerance of the reference evaluated in float64
TORCH_ERROR = "float64+torch_error"  # within tolerance + FACTOR x PyTorch's own error of it
_RANK = {"": 0, REFERENCE: 1, FLOAT64: 2, TORCH_ERROR: 3}

TORCH_ERROR_FACTOR = 16.0
"""How much larger than PyTorch's own rounding error a float32 output's may be, both measured
against the reference evaluated in float64, per output as the largest absolute error over its
elements. The rounding error of a sum grows with the number of additions made in sequence at the
largest partial sums, so another order's worst element differs from PyTorch's by a factor that
grows slowly with that number. Measured on the CPU, where PyTorch sums in a near-optimal cascade
and cumsum rounds once from float64 (16384 cancelling terms, tests/interp/problems): blocked
column sums with 16, 64 and 256 sequential steps are within a median 1.5x, 3x and 7x of PyTorch
(4.9x, 10x and 16x at worst over 40 draws; 1024 steps, 12x median and 34x at worst, are not
within it), a blocked scan with a float32 carry within 4-8x. A dropped term, row or column there is an error of the size of a term: 100x and more beyond this
margin. The margin applies only while PyTorch's error is a rounding error, at most the tolerance
times the output's largest magnitude (see _against_float64), so it never exceeds FACTOR x
tolerance x that magnitude (1.6e-3 of it at float32's 1e-4), and only to float32 outputs: the
half-precision tolerances are a few of their units of rounding (bfloat16's 1e-2 is 2.6), and a
multiple of PyTorch's error there, mostly its roundings of intermediates to the dtype that a
kernel keeping float32 intermediates does not make, would be a multiple of the tolerance."""

# The reference evaluated in float64 for one output: the tensor, or a function that reads it
# (only a comparison that fails the reference's own tolerance needs it), or None.
Exact = torch.Tensor | Callable[[], torch.Tensor | None] | None


def as_outputs(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass
class Comparison:
    ok: bool
    message: str = ""
    max_abs_err: float = 0.0  # against the reference's own output
    max_rel_err: float = 0.0
    # What decided a pass: REFERENCE, FLOAT64 or TORCH_ERROR ("" when nothing floating was
    # compared, or on a failure); `note` says what the float64 criteria measured.
    criterion: str = ""
    note: str = ""


def _index(flat_index: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for dim in reversed(shape):
        out.append(flat_index % dim)
        flat_index //= dim
    return tuple(reversed(out))


_FAST_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

FAST_CHUNK = 1 << 18
"""Elements the fast pass converts and compares at a time. Whole-tensor float32 temporaries of a
large regime's output (84M elements, 336 MB each) are page-faulted in and streamed through
memory a dozen times; in chunks of 256K (1 MB) they stay in cache: a 84M-element fp16 compare
took 1.74 s whole and 0.97 s chunked (best of 3) on this project's 2-core machine, idle (docs/benchmarks.md,
"The column softmax and the reverse cumsum at budget 10"; benchmarks/compare_cost.py)."""


DEVICE_MIN = 1 << 20
"""Outputs of at least this many elements are compared on the gate's GPU when it has one
(compare_tensor's `device`). On the reverse cumsum (61-84M-element outputs) the host's
comparisons took 19-25 s of a 74-86 s gate call, and 179 s of a 421 s one that checked a
7-config table (171 calls), plus 27 s in its CUDA-graph replay; on the GPU, 38 s and 5 s for
the same work (another host; docs/benchmarks.md, "Split counts, rows per program for a row
scan, and the reverse cumsum at budget 10"). Below it the transfer costs more than the host's
compare."""

DEVICE_CHUNK = 1 << 24
"""Elements per transfer on the device path: float32 temporaries of 64 MB each, a few of them."""


def _fast_pass(
    got: torch.Tensor,
    want: torch.Tensor,
    tol: float,
    atol_scale: float,
    device: torch.device | None = None,
) -> Comparison | None:
    """The common case in float32, chunk by chunk: all finite and within tolerance. None sends
    the comparison to the exact float64 path, which finds and names the worst element.

    Finiteness is checked on the reference only: where it is finite, so is the bound, and a NaN
    or infinite `got` fails `err <= bound` (a NaN error compares false, an infinite one exceeds
    a finite bound), so it goes to the exact path as before.

    `device`: where the chunks are compared (None: where they are). Each operation is one
    IEEE float32 elementwise step or an exact max, so the verdict and the errors are the same
    bits on a GPU as on the host."""
    if got.dtype not in _FAST_DTYPES:
        return None
    g_all = got.detach().reshape(-1)
    w_all = want.detach().reshape(-1)
    moved = device is not None  # copied there even where it is already (the ops are in place)
    chunk = DEVICE_CHUNK if moved else FAST_CHUNK
    max_abs = max_rel = 0.0
    for start in range(0, g_all.numel(), chunk):
        g_part, w_part = g_all[start : start + chunk], w_all[start : start + chunk]
        if moved:  # moved in their own dtype (half the bytes of float32), converted there
            g_part, w_part = g_part.to(device, copy=True), w_part.to(device, copy=True)
        g = g_part.float()
        w = w_part.float()
        if not bool(torch.isfinite(w).all()):
            return None
        # In place where .float() or the move made a copy; a float32 output's chunk is
        # otherwise the caller's view.
        copied = moved or got.dtype != torch.float32
        err = g.sub_(w).abs_() if copied else (g - w).abs_()
        w_abs = w.abs_() if moved or want.dtype != torch.float32 else w.abs()
        if not bool((err <= w_abs * tol + tol * atol_scale).all()):
            return None
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float(err.div_(w_abs.clamp_min_(1e-12)).max()))
    return Comparison(True, "", max_abs, max_rel, REFERENCE)


def _excess(err: torch.Tensor, w: torch.Tensor, tol: float, atol_scale: float) -> torch.Tensor:
    """How far each error is beyond the reference's own tolerance (<= 0: within it), in the
    float64 steps the host's exact path and the device's criteria both take."""
    return err - (tol * atol_scale + tol * w.abs())


def _float64_note(tol: float, worst: float, dtype: str, torch_err: float) -> str:
    return (
        f"within tolerance {tol:g} of the float64 evaluation (max abs err {worst:.3g}; "
        f"PyTorch's own {dtype} error {torch_err:.3g})"
    )


def _torch_error_note(tol: float, worst: float, dtype: str, torch_err: float) -> str:
    return (
        f"within {TORCH_ERROR_FACTOR:g}x of PyTorch's own {dtype} error against "
        f"float64 (max {worst:.3g} vs {torch_err:.3g}), plus tolerance {tol:g}"
    )


def _device_criteria(
    got: torch.Tensor,
    want: torch.Tensor,
    exact: Exact,
    tol: float,
    atol_scale: float,
    label: str,
    device: Any,
) -> Comparison | None:
    """compare_tensor's float64 steps for a large output whose float32 pass failed, chunk by
    chunk on `device`: the reference's own tolerance (in float64), then the float64 evaluation,
    then PyTorch's error as a margin. A pass decided here is the host's, bit for bit (the same
    IEEE float64 steps, exact maxima); None for anything else (a value not finite, no float64
    evaluation, a failure to name), which the host's path decides as before. The reverse
    cumsum's 74M-element float32 regime passes every case this way."""
    n = got.numel()
    g_all, w_all = got.detach().reshape(-1), want.detach().reshape(-1)

    def chunks(*flat: torch.Tensor) -> Iterator[list[torch.Tensor]]:
        for start in range(0, n, DEVICE_CHUNK):
            yield [t[start : start + DEVICE_CHUNK].to(device).to(torch.float64) for t in flat]

    def near_ref(g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return _excess((g - w).abs(), w, tol, atol_scale) <= 0

    max_abs = max_rel = 0.0
    beyond = False
    for g, w in chunks(g_all, w_all):
        if not (bool(torch.isfinite(g).all()) and bool(torch.isfinite(w).all())):
            return None
        err = (g - w).abs()
        beyond = beyond or bool((_excess(err, w, tol, atol_scale) > 0).any())
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / w.abs().clamp_min(1e-12)).max()))
    if not beyond:
        return Comparison(True, "", max_abs, max_rel, REFERENCE)
    r_any = exact() if callable(exact) else exact
    if not isinstance(r_any, torch.Tensor) or r_any.numel() != n:
        return None
    r_all = r_any.detach().reshape(-1)
    worst = torch_err = r_max = 0.0
    ok = True
    for g, w, r in chunks(g_all, w_all, r_all):
        if not bool(torch.isfinite(r).all()):
            return None
        err = (g - r).abs_()
        bound = r.abs().mul_(tol).add_(tol * atol_scale)
        torch_err = max(torch_err, float((w - r).abs_().max()))
        worst = max(worst, float(err.max()))
        r_max = max(r_max, float(r.abs().max()))
        ok = ok and bool(((err <= bound) | near_ref(g, w)).all())
    dtype = dtype_name(got.dtype)
    if ok:
        note = _float64_note(tol, worst, dtype, torch_err)
        return Comparison(True, "", max_abs, max_rel, FLOAT64, f"{label}: {note}")
    if dtype != "float32" or torch_err > tol * (atol_scale + r_max):
        return None  # no margin: the host names the worst element
    margin = TORCH_ERROR_FACTOR * torch_err
    for g, w, r in chunks(g_all, w_all, r_all):
        bound = r.abs().mul_(tol).add_(tol * atol_scale).add_(margin)
        if not bool((((g - r).abs_() <= bound) | near_ref(g, w)).all()):
            return None
    note = _torch_error_note(tol, worst, dtype, torch_err)
    return Comparison(True, "", max_abs, max_rel, TORCH_ERROR, f"{label}: {note}")


def _against_float64(
    g: torch.Tensor,
    w: torch.Tensor,
    exact: torch.Tensor,
    tol: float,
    atol_scale: float,
    label: str,
    shape: torch.Size,
    dtype: str,
    max_abs: float,
    max_rel: float,
    near_ref: torch.Tensor,
) -> Comparison | str:
    """The float64 criteria for an output beyond tolerance of the reference's own (g, w: float64,
    flat, finite; near_ref: the elements within that tolerance, which pass as they are). A
    Comparison decides; a string says why the float64 evaluation cannot."""
    r = exact.detach().reshape(-1).to(torch.float64)
    if r.shape != g.shape or not bool(torch.isfinite(r).all()):
        return "the float64 evaluation does not match the output's shape or is not finite"
    err = (g - r).abs_()
    bound = r.abs().mul_(tol).add_(tol * atol_scale)  # the tolerance, around float64
    torch_err = float((w - r).abs_().max())  # PyTorch's own error at the output's dtype
    worst = float(err.max())
    if bool(((err <= bound) | near_ref).all()):
        note = _float64_note(tol, worst, dtype, torch_err)
        return Comparison(True, "", max_abs, max_rel, FLOAT64, f"{label}: {note}")
    # PyTorch's error is a rounding error only while it is small against the output itself; a
    # larger one means the float64 path computes something else (a rounding or a comparison
    # that flipped, a branch on the dtype), and it would loosen the tolerance for every element.
    rounding = torch_err <= tol * (atol_scale + float(r.abs().max()))
    if rounding and dtype == "float32":
        bound.add_(TORCH_ERROR_FACTOR * torch_err)
        if bool(((err <= bound) | near_ref).all()):
            note = _torch_error_note(tol, worst, dtype, torch_err)
            return Comparison(True, "", max_abs, max_rel, TORCH_ERROR, f"{label}: {note}")
        allowed = f"tolerance {tol:g} + {TORCH_ERROR_FACTOR:g}x PyTorch's own {dtype} error {torch_err:.3g}"
    elif dtype != "float32":
        allowed = f"tolerance {tol:g}; a multiple of PyTorch's own error is a margin for float32 outputs only"
    else:
        allowed = (
            f"tolerance {tol:g}; PyTorch's own {dtype} error against it, {torch_err:.3g}, "
            "is more than a rounding error and is not a margin"
        )
    excess = (err - bound).masked_fill_(near_ref, -math.inf)  # beyond both, worst by float64
    i = int(excess.argmax())
    n = int((excess > 0).sum())
    return Comparison(
        False,
        f"{label}: {n}/{g.numel()} element(s) beyond tolerance {tol:g}, also against the "
        f"reference evaluated in float64 ({allowed}); worst at {_index(i, shape)}: got "
        f"{g[i].item():.6g}, expected {w[i].item():.6g} (float64: {r[i].item():.9g}; abs err "
        f"{err[i].item():.3g}, allowed {bound[i].item():.3g})" + everything_off(n, g.numel()),
        max_abs,
        max_rel,
    )


def compare_tensor(
    got: torch.Tensor,
    want: torch.Tensor,
    tol: float,
    label: str,
    atol_scale: float = 1.0,
    exact: Exact = None,
    no_exact: str | None = None,
    device: Any = None,
) -> Comparison:
    """atol = tol * atol_scale, rtol = tol: atol_scale > 1 for inputs scaled beyond get_inputs,
    whose outputs (and rounding errors) grow with them. `exact`: the reference evaluated in
    float64 (or a function reading it), consulted only for an output beyond that tolerance;
    `no_exact`: why there is none, for the message. `device`: where a large output's common
    case (finite, within tolerance) is checked; anything else is decided on the host."""
    if got.shape != want.shape:
        return Comparison(False, f"{label}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    if got.dtype != want.dtype:
        return Comparison(
            False, f"{label}: dtype {dtype_name(got.dtype)}, expected {dtype_name(want.dtype)}"
        )
    if got.numel() == 0:
        return Comparison(True)
    if not (got.is_floating_point() or got.is_complex()):
        diff = got != want
        if bool(diff.any()):
            i = int(diff.reshape(-1).nonzero()[0])
            idx = _index(i, got.shape)
            n = int(diff.sum())
            return Comparison(
                False,
                f"{label}: {n} element(s) differ; first at {idx}: got {got.reshape(-1)[i].item()}, expected {want.reshape(-1)[i].item()}",
            )
        return Comparison(True)
    if device is not None and got.numel() >= DEVICE_MIN:
        try:  # the float32 pass, then the float64 criteria's passes, on the device
            decided = _fast_pass(got, want, tol, atol_scale, torch.device(device))
            if decided is None:
                decided = _device_criteria(got, want, exact, tol, atol_scale, label, device)
        except RuntimeError:  # out of memory (a RuntimeError too), a device error: the host's
            decided = _fast_pass(got, want, tol, atol_scale)
    else:
        decided = _fast_pass(got, want, tol, atol_scale)
    if decided is not None:
        return decided
    g = got.detach().to(torch.float64).reshape(-1)
    w = want.detach().to(torch.float64).reshape(-1)
    g_bad, w_bad = ~torch.isfinite(g), ~torch.isfinite(w)
    # Non-finite where the reference is finite (or a different non-finite value) is wrong.
    same_nonfinite = g_bad & w_bad & ((torch.isnan(g) & torch.isnan(w)) | (g == w))
    wrong_nonfinite = (g_bad | w_bad) & ~same_nonfinite
    if bool(wrong_nonfinite.any()):
        i = int(wrong_nonfinite.nonzero()[0])
        n = int(wrong_nonfinite.sum())
        kind = (
            "NaN" if torch.isnan(g[i]) else (str(g[i].item()) if g_bad[i] else f"{g[i].item():.6g}")
        )
        return Comparison(
            False,
            f"{label}: {n} element(s) non-finite where the reference is not (or vice versa); "
            f"first at {_index(i, got.shape)}: got {kind}, expected {w[i].item():.6g}"
            + (" (unwritten output elements are NaN-poisoned)" if kind == "NaN" else ""),
        )
    finite = ~(g_bad | w_bad)
    err = torch.where(finite, (g - w).abs(), torch.zeros_like(g))
    excess = _excess(err, w, tol, atol_scale)
    max_abs = float(err.max())
    rel = err / w.abs().clamp_min(1e-12)
    max_rel = float(torch.where(finite, rel, torch.zeros_like(rel)).max())
    if not bool((excess > 0).any()):
        return Comparison(True, "", max_abs, max_rel, REFERENCE)
    if callable(exact) and not bool((g_bad | w_bad).any()):
        exact = exact()
    if isinstance(exact, torch.Tensor) and not bool((g_bad | w_bad).any()):
        verdict = _against_float64(
            g,
            w,
            exact,
            tol,
            atol_scale,
            label,
            got.shape,
            dtype_name(got.dtype),
            max_abs,
            max_rel,
            excess <= 0,
        )
        if isinstance(verdict, Comparison):
            return verdict
        no_exact = verdict
    i = int(excess.argmax())
    n = int((excess > 0).sum())
    return Comparison(
        False,
        f"{label}: {n}/{g.numel()} element(s) beyond tolerance {tol:g}; worst at "
        f"{_index(i, got.shape)}: got {g[i].item():.6g}, expected {w[i].item():.6g} "
        f"(abs err {err[i].item():.3g})"
        + (f" (no float64 evaluation: {no_exact})" if no_exact else "")
        + everything_off(n, g.numel()),
        max_abs,
        max_rel,
    )


def everything_off(bad: int, total: int) -> str:
    """A hint when (nearly) every element is wrong: not a rounding question. KernelBench level-2
    candidates that create their parameters in another order than Model get every element wrong
    with nothing else to say why (both Models are built after the same seed)."""
    if total < 8 or bad < 0.9 * total:
        return ""
    return (
        "; nearly every element is off: a wrong formula, or, if the Model has weights, ModelNew "
        "creating its parameters in another order or shape than Model (both are built after "
        "the same seed, so the same order gets the same values)"
    )


def compare_outputs(
    got: Any,
    want: Any,
    tol_for: Any,
    atol_scale: float = 1.0,
    exact: Callable[[], list[Any] | None] | None = None,
    no_exact: str | None = None,
    device: Any = None,
) -> Comparison:
    """tol_for(dtype_name) -> tolerance. Compares every output tensor. exact() reads the
    reference evaluated in float64, one entry per output (None where not evaluated), once, and
    only if an output needs it; no_exact says why there is none; device: compare_tensor's."""
    g, w = as_outputs(got), as_outputs(want)
    if len(g) != len(w):
        return Comparison(False, f"returned {len(g)} output(s), expected {len(w)}")
    read: list[list[Any] | None] = []

    def exact_for(k: int) -> torch.Tensor | None:
        if not read:
            read.append(exact() if exact is not None else None)
        values = read[0]
        value = values[k] if values is not None and k < len(values) else None
        return value if isinstance(value, torch.Tensor) else None

    worst = Comparison(True)
    for k, (a, b) in enumerate(zip(g, w, strict=True)):
        label = "output" if len(g) == 1 else f"output[{k}]"
        if not isinstance(b, torch.Tensor):
            if a != b:
                return Comparison(False, f"{label}: got {a!r}, expected {b!r}")
            continue
        if not isinstance(a, torch.Tensor):
            return Comparison(False, f"{label}: got {type(a).__name__}, expected a tensor")
        exact_k: Callable[[], Any] | None = (
            (lambda k=k: exact_for(k)) if exact is not None else None
        )
        c = compare_tensor(
            a, b, tol_for(dtype_name(b.dtype)), label, atol_scale, exact_k, no_exact, device
        )
        if not c.ok:
            return c
        loosest = c if _RANK[c.criterion] > _RANK[worst.criterion] else worst
        worst = Comparison(
            True,
            "",
            max(worst.max_abs_err, c.max_abs_err),
            max(worst.max_rel_err, c.max_rel_err),
            loosest.criterion,
            loosest.note,
        )
    return worst


def tensors_equal(a: Any, b: Any) -> bool:
    """Bitwise-equal outputs (NaN equal to NaN): used to spot outputs that ignore their inputs."""
    xs, ys = as_outputs(a), as_outputs(b)
    if len(xs) != len(ys):
        return False
    for x, y in zip(xs, ys, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point():
                same = (x == y) | (torch.isnan(x) & torch.isnan(y))
                if not bool(same.all()):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True
