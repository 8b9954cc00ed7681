"""The inputs of the cases beyond get_inputs (gate/reference.py builds them): the trial inputs
perturbed, sign-flipped, with outliers or scaled, so a kernel that only works on get_inputs'
distribution fails; and the measures the reference uses to keep or drop such a case."""

from __future__ import annotations

from typing import Any


def _nonfinite(values: list[Any]) -> int:
    import torch

    return sum(
        int((~torch.isfinite(v)).sum())
        for v in values
        if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())
    )


def _perturbed(values: list[Any], gen: Any) -> list[Any]:
    """The same inputs with a few positions of each float tensor given other values."""
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 1:
            v = v.clone()
            flat = v.view(-1)
            k = max(1, flat.numel() // 64)
            where = torch.randint(0, flat.numel(), (k,), generator=gen)
            source = torch.randint(0, flat.numel(), (k,), generator=gen)
            flat[where] = flat[source].flip(0) * -1.5 + 0.25
        out.append(v)
    return out


def _signed(values: list[Any], gen: Any) -> list[Any] | None:
    """Half the elements negated, for tensors that get_inputs draws non-negative."""
    import torch

    changed, out = False, []
    for v in values:
        if (
            isinstance(v, torch.Tensor)
            and v.is_floating_point()
            and v.numel() > 1
            and bool((v >= 0).all())
        ):
            sign = torch.where(torch.rand(v.shape, generator=gen) < 0.5, -1.0, 1.0).to(v.dtype)
            v = v * sign
            changed = True
        out.append(v)
    return out if changed else None


def _outliers(values: list[Any], gen: Any) -> list[Any]:
    """One element in 64 of each float tensor set to +-32 times the tensor's largest magnitude
    (an outlier far above the rest: a max taken over part of a row misses it)."""
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 1:
            v = v.clone()
            flat = v.view(-1)
            k = max(1, flat.numel() // 64)
            where = torch.randint(0, flat.numel(), (k,), generator=gen)
            sign = torch.where(torch.rand(k, generator=gen) < 0.5, -1.0, 1.0)
            top = float(flat.abs().max()) or 1.0
            flat[where] = (sign * 32 * top).to(v.dtype)
        out.append(v)
    return out


def _scaled(values: list[Any]) -> list[Any]:
    """Every float tensor 32 times larger: a kernel that assumes values of order one (a fixed
    shift instead of a max, a clamp) breaks; the reference's own result decides what is right."""
    import torch

    return [v * 32 if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def _magnitude_ratio(want: list[Any], base: list[Any]) -> float:
    import torch

    def absmax(values: list[Any]) -> float:
        return max(
            (
                float(v.detach().abs().max())
                for v in values
                if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel()
            ),
            default=0.0,
        )

    b = absmax(base)
    return max(1.0, absmax(want) / b) if b > 0 else 1.0
