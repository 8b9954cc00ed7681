"""Docs stay current with the code: every registered pass is documented."""

from __future__ import annotations

from pathlib import Path

from klineage.rewrite import all_passes
from klineage.rewrite.passes import BROKEN

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_pass_module_imports() -> None:
    assert BROKEN == {}


def test_rewrites_page_names_every_registered_pass() -> None:
    text = (DOCS / "REWRITES.md").read_text()
    missing = [name for name in all_passes() if f"`{name}`" not in text]
    assert not missing, f"docs/REWRITES.md does not describe: {missing}"
    assert len(all_passes()) >= 15
