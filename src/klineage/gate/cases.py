"""The inputs of the cases beyond get_inputs (gate/reference.py builds them): the trial inputs
perturbed, sign-flipped, with outliers or scaled, so a kernel that only works on get_inputs'
distribution fails; the measures the reference uses to keep or drop such a case; how many
random trials a regime gets; and the seconds a regime's build spends by kind."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
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


class Seconds:
    """Wall seconds a regime's build spends by kind (cases, float64, files, compile): the
    load stage reports them, so a slow cold call says where its time went."""

    def __init__(self) -> None:
        self.by_kind: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, kind: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.by_kind[kind] = self.by_kind.get(kind, 0.0) + time.perf_counter() - t0

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.by_kind.items()}


def nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def trials_for(cfg: Any, case_bytes: int, skipped: list[str]) -> int:
    """Trials for a regime whose one case (inputs and outputs) is `case_bytes`: all of
    `cfg.trials`, or `cfg.large_trials` where a case is over `cfg.large_case_bytes` (every case
    is written, read and compared whole; nine cases of a 268 MB regime are GBs a call). The
    variants beyond get_inputs are kept on every regime (the large regimes take the kernels'
    long-row and split paths, which only they reach), and the smaller regimes keep every trial."""
    if case_bytes <= cfg.large_case_bytes or cfg.large_trials >= cfg.trials:
        return int(cfg.trials)
    skipped.append(
        f"{cfg.trials - cfg.large_trials} of {cfg.trials} random trials: one case is "
        f"{case_bytes / 2**20:.0f} MiB, over large_case_bytes ({cfg.large_case_bytes / 2**20:.0f} "
        f"MiB); {cfg.large_trials} trials and every variant beyond get_inputs are checked"
    )
    return int(cfg.large_trials)
