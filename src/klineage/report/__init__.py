"""The HTML report of a bench run: one self-contained page (inline CSS and SVG, no network)."""

from klineage.report.html import load_bench, render_report, write_report

__all__ = ["load_bench", "render_report", "write_report"]
