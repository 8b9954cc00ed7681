"""Compare a candidate's outputs with the reference's: shape, dtype, NaN/Inf, tolerance.

The message names the worst element (index, both values) so a user can find the bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


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
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0


def _index(flat_index: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for dim in reversed(shape):
        out.append(flat_index % dim)
        flat_index //= dim
    return tuple(reversed(out))


_FAST_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _fast_pass(
    got: torch.Tensor, want: torch.Tensor, tol: float, atol_scale: float
) -> Comparison | None:
    """The common case in float32, in place: all finite and within tolerance. None sends the
    comparison to the exact float64 path, which finds and names the worst element. Outputs of
    a large regime are 67M elements; float64 temporaries made that compare take seconds."""
    if got.dtype not in _FAST_DTYPES:
        return None
    g = got.detach().reshape(-1).float()
    w = want.detach().reshape(-1).float()
    if not (bool(torch.isfinite(g).all()) and bool(torch.isfinite(w).all())):
        return None
    err = (g - w).abs_()
    bound = w.abs().mul_(tol).add_(tol * atol_scale)
    if not bool((err <= bound).all()):
        return None
    rel = err / w.abs().clamp_min_(1e-12)
    return Comparison(True, "", float(err.max()), float(rel.max()))


def compare_tensor(
    got: torch.Tensor, want: torch.Tensor, tol: float, label: str, atol_scale: float = 1.0
) -> Comparison:
    """atol = tol * atol_scale, rtol = tol: atol_scale > 1 for inputs scaled beyond get_inputs,
    whose outputs (and rounding errors) grow with them."""
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
    fast = _fast_pass(got, want, tol, atol_scale)
    if fast is not None:
        return fast
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
    excess = err - (tol * atol_scale + tol * w.abs())
    max_abs = float(err.max())
    rel = err / w.abs().clamp_min(1e-12)
    max_rel = float(torch.where(finite, rel, torch.zeros_like(rel)).max())
    if bool((excess > 0).any()):
        i = int(excess.argmax())
        n = int((excess > 0).sum())
        return Comparison(
            False,
            f"{label}: {n}/{g.numel()} element(s) beyond tolerance {tol:g}; worst at "
            f"{_index(i, got.shape)}: got {g[i].item():.6g}, expected {w[i].item():.6g} "
            f"(abs err {err[i].item():.3g})",
            max_abs,
            max_rel,
        )
    return Comparison(True, "", max_abs, max_rel)


def compare_outputs(got: Any, want: Any, tol_for: Any, atol_scale: float = 1.0) -> Comparison:
    """tol_for(dtype_name) -> tolerance. Compares every output tensor."""
    g, w = as_outputs(got), as_outputs(want)
    if len(g) != len(w):
        return Comparison(False, f"returned {len(g)} output(s), expected {len(w)}")
    worst = Comparison(True)
    for k, (a, b) in enumerate(zip(g, w, strict=True)):
        label = "output" if len(g) == 1 else f"output[{k}]"
        if not isinstance(b, torch.Tensor):
            if a != b:
                return Comparison(False, f"{label}: got {a!r}, expected {b!r}")
            continue
        if not isinstance(a, torch.Tensor):
            return Comparison(False, f"{label}: got {type(a).__name__}, expected a tensor")
        c = compare_tensor(a, b, tol_for(dtype_name(b.dtype)), label, atol_scale)
        if not c.ok:
            return c
        worst = Comparison(
            True, "", max(worst.max_abs_err, c.max_abs_err), max(worst.max_rel_err, c.max_rel_err)
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
