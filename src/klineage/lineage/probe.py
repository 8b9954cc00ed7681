"""Forward probes: each accepted step's optimization added back to the walk's simplest kernel.

A lineage step measures an optimization in the expert's context: "this, added back to a kernel
that still has every optimization removed after it". That is not the context `optimize` starts
from. On the H200, `num_warps` scored 5.7x in the matmul lineage while the expert's 128x256
tiles were still there, and 0.6-1.0x on naive kernels. A probe applies the step's pass forward,
with the step's own parameters, to the simplest kernel the walk reached, and gates it once. The
result is stored per step (table `probes`) and becomes the skill's effects in the "simplest"
context (skills/extract.py); retrieval takes it over the walk's effect for the same lineage and
regime (skills/retrieve.py). The last step needs no probe: its child is the simplest kernel.

A forward-only pass (rewrite.base.ForwardOnly: tiled_transpose, block_scan, split_k) has no
backward rewrite, so no step removes it and no step probe adds it back; the transpose and
cumsum experts use exactly these. Each is probed too, after the steps, with its default
parameters, when it finds a place on the simplest kernel and none on the expert: the expert
already has the optimization (its pass finds nothing left to add), which is what "learned from
the expert" means for a pass the walk cannot remove. Where it does not apply the row says why.
Where the simplest kernel has no place for it because the walk could not take the structure
apart (the colsum expert's row split is split_k's shape, and no pass removes it), it is added to
the family's naive kernel instead (naive.py beside the expert: where optimize starts from), the
row keeping that kernel (`base_source`). Its row is stored at the simplest kernel's step with
`forward_only` set, and an accepted one becomes a skill of its own (skills/extract.py).
A pass with no place in either may have one in the kernel another accepted forward-only probe
made (the reverse/forward cumsum's segment split, split_scan, needs block_scan's loop first):
it is probed there, `base_source` keeping that kernel, so its effect is over the first probe's.

Steps that add back the same code share one gate call through the gate's verdict cache. Probes
of a lineage already stored are not repeated, so an interrupted run resumes.
"""

from __future__ import annotations

import time
from pathlib import Path

from klineage.config import GateConfig
from klineage.errors import UsageError
from klineage.gate import run_gate
from klineage.gate.records import Overrides
from klineage.lineage.llm_pass import NAME as LLM_PASS
from klineage.lineage.walk import EventCallback, candidate_file
from klineage.rewrite import all_passes
from klineage.rewrite.base import ForwardOnly
from klineage.store import Store
from klineage.store.db import LineageRow, ProbeRow, StoreError


def _gate(
    row: ProbeRow,
    lin: LineageRow,
    source: str,
    reason: str,
    base: str,
    overrides: Overrides,
    config: GateConfig,
) -> None:
    """Gate `source` (`base`, the simplest kernel or the family's naive one, with one
    optimization added) into `row`: on a GPU beside `base`, so the effect is their ratio, with
    the walk's sizes and regimes."""
    g = run_gate(
        Path(lin.problem_path),
        candidate_file(source),
        device=lin.device,
        regimes=lin.regimes or None,
        overrides=overrides,
        config=config,
        base=candidate_file(base) if lin.device == "cuda" else None,
    )
    row.applied, row.accepted, row.candidate = True, g.accepted, source
    row.gate = g.model_dump(mode="json")
    row.failed_stage = g.failed_stage.value if g.failed_stage else None
    row.message = reason if g.accepted else g.message


NAIVE = "naive.py"


def _naive_source(lin: LineageRow) -> str | None:
    """The family's naive kernel: naive.py beside the expert (the corpus' layout), if any."""
    path = Path(lin.expert_path).with_name(NAIVE)
    if path == Path(lin.expert_path) or not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # unreadable: probed on the simplest kernel only, as without one


def _chained_base(fp: ForwardOnly, probes: list[ProbeRow]) -> ProbeRow | None:
    """The first accepted forward-only probe (of another pass) whose kernel has a place for
    `fp`, or None."""
    for p in probes:
        ok = p.forward_only and p.accepted and p.candidate and p.pass_name != fp.NAME
        if ok and fp.forward_sites(p.candidate or ""):
            return p
    return None


def probe_lineage(
    store: Store,
    lineage_id: str,
    *,
    config: GateConfig | None = None,
    on_event: EventCallback | None = None,
) -> list[ProbeRow]:
    """Probe every accepted step of a finished lineage, then every forward-only pass (stored
    ones are kept); returns all probes of the lineage: the steps' in step order, then the
    forward-only passes'."""
    from klineage.optimize.materialize import mechanical

    emit = on_event or (lambda kind, data: None)
    lin = store.get_lineage(lineage_id)
    if lin is None:
        raise StoreError(f"no lineage {lineage_id!r} in {store.path}")
    if lin.status != "done":
        raise UsageError(
            f"lineage {lineage_id} is {lin.status}: probes need the walk's simplest kernel, "
            "so finish the walk first (rerun the same `klineage distill` command)"
        )
    nodes = store.nodes(lin.id)
    simplest = max(nodes, key=lambda n: n.step)
    attempts = {a.id: a for a in store.attempts(lin.id)}
    stored = store.probes(lin.id)
    done = {p.step for p in stored if not p.forward_only}
    config = config or GateConfig(profile_compile=False, allow_suspicious=True)
    steps = [n for n in sorted(nodes, key=lambda n: n.step) if n.via_attempt is not None]
    expert = min(nodes, key=lambda n: n.step)
    # The walk's --set sizes, as its expert's verdict recorded them.
    overrides: Overrides = dict(expert.gate.get("overrides") or {})
    for node in steps:
        if node.step in done:
            continue
        a = attempts[node.via_attempt]  # type: ignore[index]
        emit("probe", {"step": node.step, "pass": a.pass_name, "total": len(steps)})
        t0 = time.perf_counter()
        row = ProbeRow.pending(lin.id, node.step, a.pass_name, simplest.id)
        if a.pass_name == LLM_PASS:
            row.message = "an LLM-named optimization: only an LLM can add it back"
        elif node.id == simplest.id:
            # The last step's child is the simplest kernel itself: adding its optimization back
            # gives its parent, which the walk already measured against it.
            row.message = "the walk's last step: measured by the walk itself"
        else:
            m = mechanical(simplest.source, a.pass_name, dict(a.site.get("params") or {}))
            if m.source is None:
                row.message = f"did not apply to the simplest kernel: {m.reason}"
            else:
                _gate(row, lin, m.source, m.reason, simplest.source, overrides, config)
        row.seconds = time.perf_counter() - t0
        store.add_probe(row)
        emit(
            "probed",
            {
                "step": node.step,
                "pass": a.pass_name,
                "accepted": row.accepted,
                "applied": row.applied,
                "message": row.message,
            },
        )
    forward_done = {p.pass_name for p in stored if p.forward_only}
    naive = _naive_source(lin)
    forward = [p for p in all_passes().values() if isinstance(p, ForwardOnly)]
    # Passes with a place in the simplest or the naive kernel first: the others may find one in
    # a kernel those probes make (_chained_base).
    forward.sort(
        key=lambda fp: (
            not (
                fp.forward_sites(simplest.source) or (naive is not None and fp.forward_sites(naive))
            )
            if fp.NAME not in forward_done
            else False
        )
    )
    for fp in forward:
        if fp.NAME in forward_done:
            continue
        emit(
            "probe",
            {"step": simplest.step, "pass": fp.NAME, "total": len(forward), "forward_only": True},
        )
        t0 = time.perf_counter()
        row = ProbeRow.pending(lin.id, simplest.step, fp.NAME, simplest.id, forward_only=True)
        base, onto = simplest.source, "the simplest kernel"
        placed = bool(fp.forward_sites(base))
        if not placed and naive is not None and fp.forward_sites(naive):
            # The walk kept the optimization's structure (the colsum expert's row split has no
            # backward form): the family's naive kernel is where optimize starts from anyway.
            base, onto, row.base_source, placed = naive, f"the naive kernel ({NAIVE})", naive, True
        if not placed:
            # One optimization may only have a place once another is there (the cumsum's
            # segment split needs the block scan first): the kernel an accepted forward-only
            # probe made, which optimize reaches by applying that skill first.
            made = _chained_base(fp, store.probes(lin.id))
            if made is not None:
                base, row.base_source, placed = made.candidate or "", made.candidate, True
                onto = f"{made.pass_name}'s kernel (an accepted probe)"
        if not placed:
            row.message = (
                f"no place to add it to the simplest kernel ({fp.ANCHOR})"
                + (f" nor to the naive kernel ({NAIVE})" if naive is not None else "")
                + " nor to a kernel another accepted forward-only probe made"
            )
        elif fp.forward_sites(expert.source):
            # The pass would add it to the expert too: the expert does not use it, so adding it
            # is nothing this expert teaches.
            row.message = "the expert lacks it too (its pass finds a place in the expert's kernel): not learned from the expert"
        else:
            m = mechanical(base, fp.NAME, {})  # the pass's defaults: no step has params
            if m.source is None:
                row.message = f"did not apply to {onto}: {m.reason}"
            else:
                _gate(row, lin, m.source, m.reason, base, overrides, config)
        row.seconds = time.perf_counter() - t0
        store.add_probe(row)
        emit(
            "probed",
            {
                "step": simplest.step,
                "pass": fp.NAME,
                "accepted": row.accepted,
                "applied": row.applied,
                "message": row.message,
                "forward_only": True,
                "onto": (
                    "simplest"
                    if not row.base_source
                    else "naive"
                    if row.base_source == naive
                    else "chained"
                ),
            },
        )
    return store.probes(lin.id)
