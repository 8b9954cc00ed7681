"""Reading a bench dict's values for the page: escaping, numbers that may be null, the rows,
policies and problems in order. Shared by every section of the report."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

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


def _rows(bench: dict[str, Any]) -> list[dict[str, Any]]:
    rows = bench.get("rows")
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _policies(bench: dict[str, Any]) -> list[str]:
    """bench["policies"] in order, then any policy that only appears in the rows."""
    given = bench.get("policies")
    out = [str(p) for p in given] if isinstance(given, list) else []
    for r in _rows(bench):
        p = str(r.get("policy"))
        if p not in out:
            out.append(p)
    return out


def _problems(bench: dict[str, Any]) -> list[str]:
    return sorted({str(r.get("problem")) for r in _rows(bench)})


def _is_predicted(row: dict[str, Any]) -> bool:
    label = row.get("label")
    return label is not None and str(label) != "measured"


def _curve(row: dict[str, Any]) -> list[tuple[float, float]]:
    """A row's (gate calls, best speedup so far) points, sorted; malformed points dropped."""
    pts = []
    for p in row.get("curve") or []:
        if isinstance(p, list | tuple) and len(p) == 2:
            x, y = _num(p[0]), _num(p[1])
            if x is not None and y is not None and y > 0:
                pts.append((x, y))
    return sorted(pts)
