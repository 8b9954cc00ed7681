"""Autotune configs chosen apart (the correctness stage's last call on a regime).

The correctness stage checks a file's autotune tables row by row: call c makes every
autotuner take its config c. On a GPU each autotuner picks its own row, so a file whose two
kernels must agree on a size (one writes per-segment totals in steps of CHUNK, the other scans
segments it counts in its own CHUNK) is right on that diagonal and wrong where the picks
differ: the 2026-12-06 split_scan tables were such a file (rewrite/passes/split_scan.py). Where
a forward ran two or more autotuners with more than one config, one more call on the regime
makes them take different rows ("mix:R", gate/harness_monitors.py: the k-th kernel takes
row R + k): not every combination, but never only the diagonal. The rows the profile sweep
then times apart from each other (gate/profile.py `apart`) are checked too (`chosen`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from klineage.gate.records import RegimeOutcome, Status

if TYPE_CHECKING:
    from klineage.gate.checker import Checker
    from klineage.gate.reference import RefRegime

TRIES = 3  # mixes tried when a combination raises what the autotuner skips (out of resources)


def apart(autotuners: dict[str, int]) -> bool:
    """Two or more kernels tuned over more than one config each."""
    return sum(1 for n in autotuners.values() if n > 1) >= 2


def check(ck: Checker, regime: RefRegime, tol: Callable[[str], float]) -> RegimeOutcome | None:
    """None when the regime's first case is right with the autotuners' rows chosen apart (or
    no mix could launch); else the regime's failure, naming the rows each kernel took."""
    if not apart(ck.seen.autotuners):
        return None
    case = regime.cases[0]
    widest = max(ck.seen.autotuners.values())
    for _ in range(TRIES):
        reply, got = ck.call(regime, case, f"mix:{secrets.randbelow(widest)}")
        if reply.ok and got is not None:
            break
        if not reply.skip:
            why = f"forward raised {reply.error}"
            return _failed(regime, case.label, reply.forced, why)
    else:
        return None  # every mix tried holds a config the autotuner would skip
    if reply.violations:
        return _failed(regime, case.label, reply.forced, "; ".join(reply.violations))
    cmp = ck.compare(got, ck.expected.outputs(case), tol, case)
    return None if cmp.ok else _failed(regime, case.label, reply.forced, cmp.message)


def chosen(ck: Checker, regime: RefRegime, rows: dict[str, int]) -> RegimeOutcome | None:
    """None when the regime's first case is right with each kernel on the row the profile
    sweep chose for it apart from the others (gate/profile.py `apart`): the combination the
    verdict's timing ran, checked like every row before it was timed; else the failure."""
    case = regime.cases[0]
    reply, got = ck.call(regime, case, rows)
    if not reply.ok or got is None:
        return _failed(regime, case.label, reply.forced, f"forward raised {reply.error}")
    if reply.violations:
        return _failed(regime, case.label, reply.forced, "; ".join(reply.violations))
    cmp = ck.compare(got, ck.expected.outputs(case), ck.tolerance_for(regime), case)
    return None if cmp.ok else _failed(regime, case.label, reply.forced, cmp.message)


def _failed(regime: RefRegime, label: str, forced: dict[str, str], why: str) -> RegimeOutcome:
    rows = "; ".join(f"{k}: {v}" for k, v in forced.items())
    return RegimeOutcome(
        regime=regime.name,
        status=Status.FAILED,
        message=(
            f"{label}: with the autotune configs chosen apart ({rows}), as each kernel's "
            f"autotuner may pick on a GPU: {why}"
        ),
        dtype=regime.dtype,
    )
