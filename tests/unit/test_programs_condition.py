"""A split over programs judged by how many programs the kernel launches (no kernels run): the
condition learned on the column sum's naive kernel, read on other kernels, and the policy that
retrieves again after a structural rewrite changes the grid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from klineage.optimize.materialize import mechanical
from klineage.problem.shapes import features, regime_shapes
from klineage.skills.extract import extract_skills
from klineage.skills.model import Skill
from klineage.store import open_store
from klineage.store.db import ProbeRow
from tests.conftest import KERNELS, ROOT
from tests.unit.test_forward_only import _colsum_lineage, _gate

COLSUM = KERNELS / "colsum"
COLUMN_MAX = ROOT / "src" / "klineage" / "heldout" / "column_max_bf16"


def _split_k_skill(tmp_path: Path) -> Skill:
    """split_k learned as on the H200: added to the naive column sum, 11x on its narrow regime
    (32 columns: 32 programs), nothing on tall (2048 columns) and square (16384)."""
    naive = (COLSUM / "naive.py").read_text()
    store = open_store(tmp_path / "k.db")
    simplest = _colsum_lineage(store, device="cuda")
    store.set_lineage_status(
        "L1", "done", "", {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}
    )
    ratios = {"narrow": 11.0, "tall": 1.0, "square": 0.99}
    gate = _gate(dict.fromkeys(ratios, 0.1), kernel="_colsum_kernel")
    for r, x in ratios.items():
        gate["stages"][1]["numbers"]["regimes"][r].update(
            base_ms=0.1 * x, ratio=x, ratio_lo=x * 0.99, ratio_hi=x * 1.01
        )
    split = mechanical(naive, "split_k").source
    store.add_probe(
        ProbeRow(
            "L1", 1, "split_k", simplest, True, True, None, "ok", split, gate, 1.0, True, naive
        )
    )
    (skill,) = [s for s in extract_skills(store, "L1") if s.name == "split_k"]
    return skill


def test_split_k_learns_its_condition_on_the_programs_the_kernel_launched(
    tmp_path: Path,
) -> None:
    skill = _split_k_skill(tmp_path)
    (c,) = [c for c in skill.conditions if c.feature is not None]
    # The column count separates these regimes too; the program count is what carries over.
    assert (c.feature, c.op) == ("programs", "<=")
    assert 32 < (c.threshold or 0) < 2048
    assert "narrow (programs 32)" in c.evidence and "tall (programs 2048)" in c.evidence


def test_the_program_count_is_read_on_the_target_kernel_not_its_shapes(tmp_path: Path) -> None:
    from klineage.skills.retrieve import retrieve

    skill = _split_k_skill(tmp_path)
    problem = COLUMN_MAX / "problem.py"
    inputs = regime_shapes(problem)
    target = {"tall": features(inputs["tall"])}  # 16384 x 384: 384 column programs
    naive = (COLUMN_MAX / "naive.py").read_text()
    (r,) = retrieve(
        [skill],
        problem,
        COLUMN_MAX / "naive.py",
        source=naive,
        target=target,
        shapes={"tall": inputs["tall"]["shapes"]},
    )
    assert not r.selected and r.excluded == "measured", r.reasons
    assert any("programs 384 fails" in x for x in r.reasons), r.reasons
    # Tiled over columns, the same input is a few programs: a split over rows is what pays.
    tiled = mechanical(naive, "column_tiling").source
    assert tiled is not None
    (r,) = retrieve(
        [skill],
        problem,
        COLUMN_MAX / "naive.py",
        source=tiled,
        target=target,
        shapes={"tall": inputs["tall"]["shapes"]},
    )
    assert r.selected and r.score == pytest.approx(11.0), r.reasons
    assert any("meets 'pays off when programs <=" in x for x in r.reasons), r.reasons
    # Where the launcher cannot be read, no count: the shape's nearest neighbour decides.
    (r,) = retrieve([skill], problem, COLUMN_MAX / "naive.py", source=tiled, target=target)
    assert not any("programs" in x and "meets" in x for x in r.reasons), r.reasons


def _tiling_skill() -> Skill:
    from klineage.skills.model import Exemplar, Rewrite

    return Skill(
        id="tile0",
        name="column_tiling",
        intent="tile columns",
        category="memory",
        anchor="a column walk",
        rewrite=Rewrite(pass_name="column_tiling"),
        exemplar=Exemplar(before="", after="", diff=""),
    )


def _context(tmp_path: Path) -> tuple[Any, Skill]:
    from klineage.optimize.policies import Context

    split = _split_k_skill(tmp_path)
    problem = COLUMN_MAX / "problem.py"
    inputs = regime_shapes(problem)
    ctx = Context(
        problem=problem,
        kernel=COLUMN_MAX / "naive.py",
        device="cuda",
        skills=[split, _tiling_skill()],
        llm=False,
        seed=0,
        target={"tall": features(inputs["tall"])},
        capability="9.0",
        best_source=(COLUMN_MAX / "naive.py").read_text(),
        shapes={"tall": inputs["tall"]["shapes"]},
    )
    return ctx, split


def test_a_kept_structural_rewrite_is_followed_by_the_skills_its_kernel_now_meets(
    tmp_path: Path,
) -> None:
    from klineage.optimize.policies import get_policy

    ctx, _ = _context(tmp_path)
    naive = ctx.best_source
    proposals = get_policy("klineage").proposals(ctx)
    first = next(proposals)
    assert first.pass_name == "column_tiling"  # split_k: 384 programs, predicted no gain
    tiled = mechanical(naive, "column_tiling").source
    assert tiled is not None
    ctx.best_source, ctx.last_accepted = tiled, True  # the loop kept it
    second = next(proposals)
    assert second.pass_name == "split_k" and second.predicted == pytest.approx(11.0)
    assert second.key.startswith("skill:") and not second.then  # selected on the new kernel
    on = mechanical(tiled, "split_k", second.params)
    assert on.source is not None, on.reason


def test_a_reshaping_rewrite_correct_but_not_faster_is_tried_with_the_split_it_needs(
    tmp_path: Path,
) -> None:
    from klineage.optimize.policies import get_policy

    ctx, split = _context(tmp_path)
    naive = ctx.best_source
    proposals = get_policy("klineage").proposals(ctx)
    first = next(proposals)
    ctx.last_accepted = True  # correct, not faster: the best kernel is still the naive one
    both = next(proposals)
    assert (both.pass_name, [name for name, _ in both.then]) == ("column_tiling", ["split_k"])
    assert both.key == f"{first.key}+skill:{split.id}:mechanical"
    assert both.predicted == pytest.approx(11.0) and "meets split_k's condition" in both.label
    m = mechanical(naive, both.pass_name or "", both.params, then=both.then)
    assert m.source is not None and "_split_k_max" in m.source, m.reason
    # The tiling refused by the gate: nothing built on it; the tuning table comes next.
    (tmp_path / "again").mkdir()
    ctx, _ = _context(tmp_path / "again")
    proposals = get_policy("klineage").proposals(ctx)
    assert next(proposals).pass_name == "column_tiling"
    ctx.last_accepted = False
    after = next(proposals)
    assert after.pass_name == "tunables" and not after.then


def test_a_split_is_tried_after_the_rewrites_that_reshape_the_grid(tmp_path: Path) -> None:
    from klineage.optimize.policies import get_policy

    # With conditions ignored split_k is predicted its 11x everywhere, column tiling nothing
    # known; still the tiling goes first: split first, the tiling finds no place after it.
    ctx, _ = _context(tmp_path)
    proposals = get_policy("what-only").proposals(ctx)
    assert [next(proposals).pass_name, next(proposals).pass_name] == ["column_tiling", "split_k"]
