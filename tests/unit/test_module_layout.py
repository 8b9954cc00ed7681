"""Rules about how src/klineage is cut into modules and formatted: no module over 500 lines and
no `fmt: skip` (issue 13), and the candidate's harness stays free of klineage, siblings included
(gate/session.py copies them)."""

from __future__ import annotations

import ast
from pathlib import Path

import klineage
from klineage.gate.session import HARNESS, HARNESS_SIBLINGS

SRC = Path(klineage.__file__).parent
MAX_LINES = 500
# The corpus and the held-out kernels are problem + expert files, sized by their kernels.
EXEMPT = ("kernels", "heldout")


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).parts[0] not in EXEMPT
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines (split them along a seam): {long}"


def test_ruff_format_owns_the_library_formatting() -> None:
    """No `fmt: skip` in library code (issue 13): `ruff format --check` in make lint is the one
    formatter. The corpus, held-out and example kernels are problem files, laid out as written."""
    kernel_files = ("kernels", "heldout", "examples", "liger_problems")
    skipped = [
        f"{p.relative_to(SRC)}:{i}"
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).parts[0] not in kernel_files
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "# fmt: skip" in line or "# fmt: off" in line
    ]
    assert skipped == [], f"formatting taken from ruff format at: {skipped}"


def _imported(path: Path) -> set[str]:
    """Top-level names of every module the file imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_harness_and_its_siblings_import_no_klineage() -> None:
    for path in (HARNESS, *HARNESS_SIBLINGS):
        assert "klineage" not in _imported(path), f"{path.name} imports klineage"


def test_every_module_the_harness_imports_from_beside_it_is_copied_with_it() -> None:
    # python -I runs the copied harness with nothing of klineage on its path: a sibling that
    # session.py does not copy is an ImportError in every gate call.
    gate = HARNESS.parent
    beside = {
        name
        for path in (HARNESS, *HARNESS_SIBLINGS)
        for name in _imported(path)
        if (gate / f"{name}.py").is_file()
    }
    assert beside == {p.stem for p in HARNESS_SIBLINGS}
