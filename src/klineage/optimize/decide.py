"""What the optimize loop reads from a problem file (statically) and how it judges a candidate:
the regimes it times, the speedup over the best so far, the keep rule, and a swept table folded
to its winners."""

from __future__ import annotations

import ast
from typing import Any

from klineage.gate.records import profile_rows
from klineage.lineage.walk import sha
from klineage.metrics import Speedup, speedups, timed_geomean


def _module_value(problem_src: str, name: str) -> ast.expr | None:
    """The expression assigned to a module-level name, read statically (the problem module is
    user code; it runs only in children)."""
    try:
        tree = ast.parse(problem_src)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
    return None


def cpu_regimes_of(problem_src: str) -> list[str]:
    """CPU_REGIMES, if it is a literal tuple or list."""
    node = _module_value(problem_src, "CPU_REGIMES")
    try:
        value = ast.literal_eval(node) if node is not None else None
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def timed_regimes(problem_src: str, names: list[str], device: str) -> list[str]:
    """The regimes a run on `device` is judged on: on a GPU those of `names` sized for it
    (not CPU_REGIMES, the interpreter's tiny ones); none on a CPU, where nothing is timed."""
    if device != "cuda":
        return []
    cpu = cpu_regimes_of(problem_src)
    return [r for r in names if r not in cpu]


def regime_names_of(problem_src: str) -> list[str]:
    """The keys of REGIMES, in order, if it is a dict literal (its values may be any code)."""
    node = _module_value(problem_src, "REGIMES")
    if not isinstance(node, ast.Dict):
        return []
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def speedup(
    base_gate: dict[str, Any], new_gate: dict[str, Any], timed: list[str]
) -> dict[str, Speedup]:
    """base / new per timed regime both measured (side by side where new was gated beside
    base); empty on the CPU."""
    x = speedups(base_gate, new_gate)
    return {r: v for r, v in x.items() if not timed or r in timed}


def _curve_point(x: dict[str, Speedup]) -> float:
    return timed_geomean(x) or 1.0


def folded(candidate: str, gate: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A kept candidate whose autotune table the gate swept, written as an expert writes it:
    the table cut to the configs that were fastest on some timed regime (in regime order; where
    the sweep chose each kernel's row apart, those rows),
    so the kernel does not re-tune a large table at every new shape. Every config it keeps was
    checked on every regime and timed there, so the verdict stands for it; the gate record is
    re-keyed to the folded source (its candidate_sha), which the next candidate is timed
    beside. Unchanged when nothing was swept or the table cannot be cut."""
    from klineage.rewrite.passes.tunables import fold

    rows = profile_rows(gate)
    swept = [r for r in rows.values() if r.config_index is not None]
    # each regime's fastest: an index for every table, or each kernel's row chosen apart
    keep: list[int | dict[str, int]] = [
        r.config_rows or r.config_index
        for r in ([r for r in swept if not r.launch_bound] or swept)
        if r.config_index is not None
    ]
    if not keep:
        return candidate, gate
    source = fold(candidate, keep)
    if source is None or source == candidate:
        return candidate, gate
    return source, {**gate, "candidate_sha": sha(source), "folded_from": gate.get("candidate_sha")}


def keep_decision(x: dict[str, Speedup], margin: float) -> dict[str, Any]:
    """Kept when the geomean over the regimes that are not launch-bound is at least 1 + margin
    and some regime's gain clears its own measured spread (a side-by-side range above 1)."""
    g = timed_geomean(x)
    if g is None:
        bound = [r for r, v in x.items() if v.launch_bound]
        why = f"every timed regime is launch-bound ({', '.join(bound)})" if bound else "not timed"
        return {"speedup": None, "kept": False, "message": f"correct; {why}: not kept"}
    cleared = [r for r, v in x.items() if v.evidence and v.value > 1.0]
    if g >= 1.0 + margin and cleared:
        return {
            "speedup": g,
            "kept": True,
            "message": f"kept: {g:.3f}x over the best so far (beyond the spread on {', '.join(cleared)})",
        }
    if g >= 1.0 + margin:
        return {
            "speedup": g,
            "kept": False,
            "message": f"correct, {g:.3f}x but within noise on every regime: not kept",
        }
    return {
        "speedup": g,
        "kept": False,
        "message": f"correct, not faster by {margin:.0%}: {g:.3f}x",
    }
