"""Reading a bench's values for the page: escaping, numbers that may be null, the policies and
problems in order, a row's numbers by column. Shared by every section of the report, which
reads bench.json through bench/records.py (BenchFile, BenchRow) and never a raw dict."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath

from klineage.bench.records import BenchFile, BenchRow
from klineage.metrics import PAYS_OFF

DASH = "–"


def _e(x: object) -> str:
    """Escaped text of any value (None is the empty string)."""
    return html.escape("" if x is None else str(x), quote=True)


def _num(x: object) -> float | None:
    """A finite number, or None (null, missing, text, bool, NaN and inf are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def _fmt(x: object, spec: str, suffix: str = "") -> str:
    v = _num(x)
    return DASH if v is None else f"{v:{spec}}{suffix}"


def _times(x: object) -> str:
    return _fmt(x, ".2f", "×")


def _pct(x: object) -> float | None:
    v = _num(x)
    return None if v is None else 100 * v


def _cls(x: object) -> str:
    """CSS class of a speedup: up (>= 1.05), down (<= 1/1.05), or neutral."""
    v = _num(x)
    if v is None:
        return "na"
    return "up" if v >= PAYS_OFF else "down" if v <= 1 / PAYS_OFF else "flat"


def _section(sid: str, title: str, body: str) -> str:
    """One section of the page: its id (the nav's anchor), a heading, the body's HTML."""
    return f'<section id="{sid}"><h2>{_e(title)}</h2>\n{body}\n</section>\n'


def _td_times(x: object) -> str:
    return f'<td class="num {_cls(x)}">{_times(x)}</td>'


def _mean(xs: Iterable[float]) -> float | None:
    vals = list(xs)
    return sum(vals) / len(vals) if vals else None


def _short_path(p: object) -> str:
    """The last two parts of a path (softmax/expert.py): the full path goes in a title."""
    parts = PurePosixPath(str(p or "")).parts
    return "/".join(parts[-2:]) if parts else DASH


def as_bench(bench: BenchFile | Mapping[str, object]) -> BenchFile:
    """A bench as the report reads it: a BenchFile, or the dict of a bench.json validated into
    one (leniently: see bench/records.py)."""
    return bench if isinstance(bench, BenchFile) else BenchFile.model_validate(bench)


def _policies(bench: BenchFile) -> list[str]:
    """bench.policies in order, then any policy that only appears in the rows."""
    out = list(bench.policies)
    for r in bench.rows:
        if r.policy not in out:
            out.append(r.policy)
    return out


def _problems(bench: BenchFile) -> list[str]:
    return sorted({r.problem for r in bench.rows})


# A row's numbers by the column (bench.json key) that shows them, for the cells and their
# reasons: the sections name a column once and read it here.
_NUMBERS: dict[str, Callable[[BenchRow], float | None]] = {
    "speedup": lambda r: r.speedup,
    "vs_eager": lambda r: r.vs_eager,
    "vs_compile": lambda r: r.vs_compile,
    "fraction_of_expert": lambda r: r.fraction_of_expert,
    "pct_of_floor": lambda r: r.pct_of_floor,
    "calls_to_95": lambda r: r.calls_to_95,
    "gate_calls": lambda r: r.gate_calls,
}


def row_number(row: BenchRow, field: str) -> float | None:
    """The row's value in column `field` (None: empty, or not a column of numbers)."""
    get = _NUMBERS.get(field)
    return None if get is None else get(row)
