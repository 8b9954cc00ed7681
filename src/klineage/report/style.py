"""The report page's look: its one inline style sheet, and each policy's colour and dash (the
same in every chart and legend of the page)."""

from __future__ import annotations

# Okabe-Ito (colour-blind safe, yellow left out for contrast); dashes tell lines apart in grey.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
DASHES = ("", "7 3", "2 3", "9 3 2 3")


def policy_style(policies: list[str]) -> dict[str, tuple[str, str]]:
    return {p: (COLORS[i % len(COLORS)], DASHES[i % len(DASHES)]) for i, p in enumerate(policies)}


CSS = """
:root { --fg:#1b1f24; --muted:#6a737d; --line:#d0d7de; --bg:#fff; --alt:#f6f8fa;
        --up:#1a7f37; --down:#cf222e; --warn:#fff8c5; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 0 24px 48px; max-width: 1400px; }
header { border-bottom: 1px solid var(--line); padding: 16px 0 8px; }
h1 { margin: 0 0 4px; font-size: 22px; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 15px; margin: 18px 0 6px; } h4 { margin: 14px 0 4px; }
nav a { margin-right: 14px; }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--alt); padding: 8px; overflow-x: auto; border: 1px solid var(--line); }
table.data { border-collapse: collapse; margin: 8px 0; }
table.data th, table.data td { border: 1px solid var(--line); padding: 3px 7px; vertical-align: top; text-align: left; }
table.data thead th { background: var(--alt); font-weight: 600; }
table.kv th { text-align: left; padding-right: 12px; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.up { color: var(--up); font-weight: 600; } .down { color: var(--down); font-weight: 600; }
.muted, .na { color: var(--muted); } .ok { color: var(--up); } .bad { color: var(--down); }
tr.failed td { background: #fff5f5; }
.error { color: var(--down); white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 12px; }
td.stop { max-width: 360px; white-space: pre-wrap; }
ul.applied { margin: 0; padding-left: 16px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.banner { background: var(--warn); border: 1px solid #d4a72c; padding: 8px 12px; font-size: 15px; }
.warn { background: var(--warn); padding: 4px 8px; } .note { color: var(--muted); max-width: 900px; }
figure { margin: 8px 0; } figcaption { color: var(--muted); max-width: 900px; }
svg.chart text { fill: var(--fg); } svg.chart .grid { stroke: #eaeef2; }
svg.chart .axis { stroke: var(--fg); } svg.chart .ref { stroke: var(--muted); stroke-dasharray: 4 4; }
.multiples { display: flex; flex-wrap: wrap; gap: 12px; }
figure.small { width: 250px; } figure.small figcaption { color: var(--fg); font-size: 12px;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.legend .key { margin-right: 14px; white-space: nowrap; } svg.swatch { vertical-align: middle; }
.lineage { margin-bottom: 18px; }
.chain { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 4px; }
.node { border: 1px solid var(--line); border-radius: 6px; padding: 4px 8px; background: var(--alt);
        font-size: 12px; min-width: 90px; }
.node.end { background: #ddf4ff; font-weight: 600; min-width: 0; }
.node.gap { border-style: dashed; background: var(--bg); color: var(--muted); }
.node .stepno { color: var(--muted); font-size: 11px; } .node .skill { font-weight: 600; }
.arrow { color: var(--muted); font-size: 16px; }
details.card { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; margin: 6px 0; }
details.card > summary { cursor: pointer; }
pre.diff .add { color: var(--up); } pre.diff .del { color: var(--down); }
pre.diff .hunk { color: #8250df; } pre.diff .meta { color: var(--muted); }
.verdict { font-size: 17px; font-weight: 600; max-width: 1000px; margin: 6px 0 10px; }
.why { cursor: help; } .why sup { font-size: 9px; margin-left: 1px; } .why sup a { color: var(--muted); }
ol.why { color: var(--muted); font-size: 13px; } .range { color: var(--muted); font-size: 11px; }
svg.chart .band { fill: #f6f8fa; }
details.problem { border-bottom: 1px solid var(--line); padding: 4px 0; }
details.problem > summary { cursor: pointer; } details.problem table { margin-left: 16px; }
"""
