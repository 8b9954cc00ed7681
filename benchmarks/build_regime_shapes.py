"""Write src/klineage/data/regime-shapes.json: the regime shapes of every problem the package
ships (corpus, held-out suite, examples, Liger problems) and of benchmarks/problems, keyed by
each file's content (skills/conditions.py `shapes_key`).

Skill cards and retrieval need the shapes of the problems a skill came from; read at run time,
each is a child process importing torch (4-5 s), and the shipped library names nine such
problems. Run this after adding or editing a problem (tests/unit/test_shipped_shapes.py fails
until then):

    python benchmarks/build_regime_shapes.py            # about 4 s a problem
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.progress import track

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "klineage"


def problem_files() -> list[Path]:
    """Every problem file shipped or benchmarked: a file that defines get_inputs and REGIMES."""
    found = []
    for folder in ("kernels", "heldout", "examples", "liger_problems"):
        found += sorted((PACKAGE / folder).rglob("*.py"))
    found += sorted((ROOT / "benchmarks" / "problems").glob("*.py"))
    return [
        p
        for p in found
        if "def get_inputs" in (text := p.read_text(encoding="utf-8")) and "REGIMES" in text
    ]


def main() -> int:
    from klineage.problem.shapes import regime_shapes
    from klineage.skills.conditions import SHIPPED_SHAPES, shapes_key

    table: dict[str, dict[str, object]] = {}
    failed = []
    for path in track(problem_files(), description="reading regime shapes"):
        try:
            table[shapes_key(path.read_text(encoding="utf-8"))] = regime_shapes(path)
        except Exception as e:  # a problem that cannot be read is named, not shipped
            failed.append(f"{path.relative_to(ROOT)}: {e}")
    SHIPPED_SHAPES.write_text(
        json.dumps({"schema_version": 1, "shapes": dict(sorted(table.items()))}, indent=1) + "\n",
        encoding="utf-8",
    )
    print(f"{len(table)} problems -> {SHIPPED_SHAPES.relative_to(ROOT)}")
    for line in failed:
        print(f"not shipped: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
