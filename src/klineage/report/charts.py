"""Inline SVG charts for the claim: a dot plot (one line per problem, a dot per policy, with
the range across seeds as a whisker), a predicted-against-measured scatter with y = x, and the
anytime curves' step lines (best speedup so far against gate calls, curves.py).

Standard library only; every label goes through `_e`. The dot plot and the scatter draw
speedups on a log scale, so 2x and 0.5x sit the same distance from 1x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from klineage.report.values import _e

FONT = 11
ROW_H = 18  # px per problem: 22 held-out problems make a 440 px plot


@dataclass
class Dots:
    """One policy's points: category -> (value, low, high); low == high draws no whisker."""

    name: str
    color: str
    points: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis covering [lo, hi]: 1-2-5 per decade, finer on a narrow range."""
    fine = (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8)
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5), fine):
        ticks = [
            m * 10.0**k
            for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
            for m in mantissas
            if lo * 0.999 <= m * 10.0**k <= hi * 1.001
        ]
        if len(ticks) >= 4:
            return ticks
    return ticks if len(ticks) >= 2 else sorted({lo, hi})  # the finest set, on a narrow range


def _tick(t: float, unit: str) -> str:
    return f"{t:.3g}{unit}"


def _axis_range(values: list[float], log: bool, ref: float | None) -> tuple[float, float]:
    vals = [v for v in values if (v > 0 or not log)] + ([ref] if ref is not None else [])
    lo, hi = min(vals), max(vals)
    if log:
        lo, hi = lo / 1.08, hi * 1.08
        if hi / lo < 1.5:  # a narrow spread still spans a readable range around 1x
            mid = math.sqrt(lo * hi)
            lo, hi = mid / 1.25, mid * 1.25
        return lo, hi
    return (0.0, max(100.0, hi * 1.05))  # % of the floor: the whole way to 100%


def dot_plot(
    categories: list[str],
    series: list[Dots],
    *,
    title: str,
    axis: str,
    log: bool = True,
    unit: str = "×",
    ref: float | None = 1.0,
) -> str:
    """A dot per (category, series), categories down the side, a shared value axis across."""
    values = [v for s in series for p in s.points.values() for v in p]
    if not values:
        return ""
    label_w = min(260, 12 + 6.3 * max((len(c) for c in categories), default=4))
    w, ml, mr, mt, mb = 760, label_w, 20, 28, 40
    ph = ROW_H * len(categories)
    h = mt + ph + mb
    pw = w - ml - mr
    lo, hi = _axis_range(values, log, ref)

    def sx(v: float) -> float:
        if log:
            return ml + pw * (math.log(max(v, lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return ml + pw * (v - lo) / (hi - lo)

    ticks = log_ticks(lo, hi) if log else [hi * i / 5 for i in range(6)]
    if not log:
        ticks = [t for t in (0, 20, 40, 60, 80, 100) if t <= hi] or ticks
    out = [
        f'<svg class="chart dots" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
        f'width="{w}" height="{h}" role="img" font-size="{FONT}"><title>{_e(title)}</title>'
    ]
    for t in ticks:
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{mt + ph}" class="grid"/>')
        out.append(
            f'<text x="{x:.1f}" y="{mt + ph + 14}" text-anchor="middle">{_e(_tick(t, unit))}</text>'
        )
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{h - 6}" text-anchor="middle">{_e(axis)}</text>')
    if ref is not None and lo <= ref <= hi:
        x = sx(ref)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt - 4}" y2="{mt + ph}" class="ref"/>')
    k = len(series)
    for i, cat in enumerate(categories):
        yc = mt + ROW_H * (i + 0.5)
        if i % 2:
            out.append(
                f'<rect x="{ml}" y="{mt + ROW_H * i}" width="{pw}" height="{ROW_H}" class="band"/>'
            )
        short = cat if len(cat) * 6.3 + 12 <= label_w else cat[: int((label_w - 20) / 6.3)] + "…"
        out.append(
            f'<text x="{ml - 6}" y="{yc + 4:.1f}" text-anchor="end"><title>{_e(cat)}</title>'
            f"{_e(short)}</text>"
        )
        for j, s in enumerate(series):
            if cat not in s.points:
                continue
            v, a, b = s.points[cat]
            y = yc + (j - (k - 1) / 2) * min(3.0, (ROW_H - 6) / max(k, 1))
            tip = f"{cat}, {s.name}: {_tick(v, unit)}"
            if b > a:
                tip += f" (seeds {_tick(a, unit)}–{_tick(b, unit)})"
                out.append(
                    f'<line x1="{sx(a):.1f}" x2="{sx(b):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                    f'stroke="{s.color}" stroke-width="1.5"/>'
                )
            out.append(
                f'<circle cx="{sx(v):.1f}" cy="{y:.1f}" r="3.6" fill="{s.color}" '
                f'fill-opacity="0.85"><title>{_e(tip)}</title></circle>'
            )
    for j, s in enumerate(series):  # legend along the top
        x = ml + j * (pw / max(k, 1))
        out.append(
            f'<circle cx="{x + 5:.1f}" cy="12" r="4" fill="{s.color}"/>'
            f'<text x="{x + 13:.1f}" y="16">{_e(s.name)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


@dataclass
class Pair:
    predicted: float
    measured: float
    label: str
    color: str
    skill: str = ""


def scatter(pairs: list[Pair], *, title: str) -> str:
    """Predicted (x) against measured (y) speedup, log-log, with the line y = x."""
    vals = [v for p in pairs for v in (p.predicted, p.measured) if v > 0] + [1.0]
    lo, hi = min(vals) / 1.1, max(vals) * 1.1
    size, m = 480, 52
    pw = size - 2 * m + 20

    def s(v: float) -> float:
        return pw * (math.log(max(v, lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))

    x0, y0 = m, m - 30 + pw  # plot origin (bottom left)
    out = [
        f'<svg class="chart scatter" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" '
        f'width="{size}" height="{size}" role="img" font-size="{FONT}"><title>{_e(title)}</title>'
    ]
    for t in log_ticks(lo, hi):
        out.append(
            f'<line x1="{x0 + s(t):.1f}" x2="{x0 + s(t):.1f}" y1="{y0 - pw}" y2="{y0}" class="grid"/>'
            f'<line x1="{x0}" x2="{x0 + pw}" y1="{y0 - s(t):.1f}" y2="{y0 - s(t):.1f}" class="grid"/>'
            f'<text x="{x0 + s(t):.1f}" y="{y0 + 14}" text-anchor="middle">{_tick(t, "×")}</text>'
            f'<text x="{x0 - 5}" y="{y0 - s(t) + 4:.1f}" text-anchor="end">{_tick(t, "×")}</text>'
        )
    out.append(
        f'<rect x="{x0}" y="{y0 - pw}" width="{pw}" height="{pw}" fill="none" class="axis"/>'
        f'<line x1="{x0}" y1="{y0}" x2="{x0 + pw}" y2="{y0 - pw}" class="ref"><title>y = x: '
        "the prediction was right</title></line>"
    )
    out.append(
        f'<text x="{x0 + pw / 2:.1f}" y="{y0 + 32}" text-anchor="middle">predicted speedup</text>'
        f'<text transform="translate(14 {y0 - pw / 2:.1f}) rotate(-90)" text-anchor="middle">'
        "measured speedup</text>"
    )
    for p in pairs:
        out.append(
            f'<circle cx="{x0 + s(p.predicted):.1f}" cy="{y0 - s(p.measured):.1f}" r="4" '
            f'fill="{p.color}" fill-opacity="0.75"><title>{_e(p.label)}: predicted '
            f"{p.predicted:.2f}×, measured {p.measured:.2f}×</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


# -- the anytime curves: best speedup so far against gate calls, as step lines ----------


@dataclass
class StepSeries:
    name: str
    color: str
    dash: str
    values: list[float]  # at gate calls 0, 1, ..., len - 1


def _nice_ticks(lo: float, hi: float, n: int) -> list[float]:
    """Round tick values covering [lo, hi] with about n intervals."""
    span = max(hi - lo, 1e-9)
    mag = 10 ** math.floor(math.log10(span / n))
    step = mag
    for m in (1, 2, 2.5, 5, 10):
        step = m * mag
        if span / step <= n:
            break
    start = math.floor(lo / step + 1e-9) * step
    count = math.ceil((hi - start) / step - 1e-9)
    return [start + i * step for i in range(max(count, 1) + 1)]


def _tick_label(t: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    for d in range(5):
        if abs(round(step, d) - step) < 1e-9:
            return f"{t:.{d}f}"
    return f"{t:.4g}"


def _int_step(x_max: int, n: int) -> int:
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if x_max / step <= n:
            return step
    return max(1, x_max // n)


def step_chart(series: list[StepSeries], x_max: int, label: str, *, small: bool = False) -> str:
    """A step-line chart of best-so-far speedups against gate calls, with axes and a legend."""
    if small:
        w, h, ml, mr, mt, mb, font = 250, 150, 38, 8, 8, 24, 10
    else:
        w, h, ml, mr, mt, mb, font = 720, 340, 56, 170, 14, 44, 12
    pw, ph = w - ml - mr, h - mt - mb
    ys = [v for s in series for v in s.values] + [1.0]
    lo, hi = min(ys), max(ys)
    if hi - lo < 1e-6:
        hi = lo + 0.1
    ticks = _nice_ticks(lo, hi, 3 if small else 6)
    y0, y1 = ticks[0], ticks[-1]
    x_max = max(x_max, 1)

    def sx(x: float) -> float:
        return ml + pw * x / x_max

    def sy(y: float) -> float:
        return mt + ph * (1 - (y - y0) / (y1 - y0))

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
        f'width="{w}" height="{h}" role="img" font-size="{font}"><title>{_e(label)}</title>'
    ]
    for t in ticks:  # horizontal grid and y tick labels
        y = sy(t)
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{ml - 5}" y="{y + font / 3:.1f}" text-anchor="end">{_tick_label(t, ticks)}×</text>'
        )
    step = _int_step(x_max, 5 if small else 12)
    for k in range(0, x_max + 1, step):  # x ticks
        x = sx(k)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt + ph}" y2="{mt + ph + 4}" class="axis"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{mt + ph + 5 + font}" text-anchor="middle">{k}</text>')
    out.append(f'<line x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}" class="axis"/>')
    out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}" class="axis"/>')
    if y0 <= 1.0 <= y1:  # the naive start
        out.append(
            f'<line x1="{ml}" x2="{ml + pw}" y1="{sy(1.0):.1f}" y2="{sy(1.0):.1f}" class="ref"/>'
        )
    if not small:
        out.append(
            f'<text x="{ml + pw / 2:.1f}" y="{h - 6}" text-anchor="middle">gate calls</text>'
            f'<text transform="translate(14 {mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
            "best speedup so far (geomean)</text>"
        )
    for s in series:
        if not s.values:
            continue
        d = [f"M{sx(0):.1f} {sy(s.values[0]):.1f}"]
        for k in range(1, len(s.values)):
            d.append(f"H{sx(k):.1f}V{sy(s.values[k]):.1f}")
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(
            f'<path d="{"".join(d)}" fill="none" stroke="{s.color}" stroke-width="{1.5 if small else 2.2}"'
            f"{dash}><title>{_e(s.name)}: {s.values[-1]:.2f}× after {len(s.values) - 1} gate calls"
            "</title></path>"
        )
    if not small:  # legend
        lx = ml + pw + 16
        for i, s in enumerate(series):
            y = mt + 10 + i * 20
            dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
            out.append(
                f'<line x1="{lx}" x2="{lx + 26}" y1="{y}" y2="{y}" stroke="{s.color}" stroke-width="2.2"{dash}/>'
                f'<text x="{lx + 32}" y="{y + 4}">{_e(s.name)} ({s.values[-1]:.2f}×)</text>'
            )
    out.append("</svg>")
    return "".join(out)


def swatch(color: str, dash: str) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        '<svg class="swatch" xmlns="http://www.w3.org/2000/svg" width="28" height="10" aria-hidden="true">'
        f'<line x1="1" x2="27" y1="5" y2="5" stroke="{color}" stroke-width="2.2"{d}/></svg>'
    )
