"""The gate checks a file's autotune tables with their rows chosen apart (gate/mixed.py), as
each kernel's autotuner picks on a GPU. The rejected file is the shape of the 2026-12-06
split_scan tables: a totals kernel and a scan kernel that count a row's segments in their own
CHUNK, right whenever both take the same row (the diagonal the gate checked alone before) and
wrong when they differ. The accepted one is split_online's column softmax with both kernels
tabled over CHUNK: each segment's partials are combined over every segment, so any pair of
steps is right."""

from __future__ import annotations

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical
from klineage.rewrite import all_passes
from tests.conftest import ROOT, in_gated_folder

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"

TWO_CHUNKS = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

TABLE = [triton.Config({"CHUNK": 64}, num_warps=4), triton.Config({"CHUNK": 128}, num_warps=4)]


@triton.autotune(configs=TABLE, key=["n"])
@triton.jit
def segment_totals(x_ptr, n, pitch, totals, n_seg, seg_steps, CHUNK: tl.constexpr):
    seg = tl.program_id(1)
    seg_len = seg_steps * CHUNK  # segments counted in this kernel's own step
    row = tl.program_id(0).to(tl.int64)
    carried = 0.0
    for done in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n), CHUNK):
        pos = (n - 1 - done) - tl.arange(0, CHUNK)
        v = tl.load(x_ptr + row * pitch + pos, mask=pos >= 0, other=0.0).to(tl.float32)
        carried += tl.sum(v, axis=0)
    tl.store(totals + row * n_seg + seg, carried)


@triton.autotune(configs=TABLE, key=["n"])
@triton.jit
def segment_scan(x_ptr, y_ptr, n, pitch, totals, n_seg, seg_steps, SEG_P2: tl.constexpr, CHUNK: tl.constexpr):
    seg = tl.program_id(1)
    seg_len = seg_steps * CHUNK
    row = tl.program_id(0).to(tl.int64)
    earlier = tl.arange(0, SEG_P2)
    carried = tl.sum(tl.load(totals + row * n_seg + earlier, mask=earlier < seg, other=0.0), axis=0)
    for done in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n), CHUNK):
        pos = (n - 1 - done) - tl.arange(0, CHUNK)
        v = tl.load(x_ptr + row * pitch + pos, mask=pos >= 0, other=0.0).to(tl.float32)
        out = carried + tl.cumsum(v, axis=0)
        tl.store(y_ptr + row * pitch + pos, out.to(y_ptr.dtype.element_ty), mask=pos >= 0)
        carried += tl.sum(v, axis=0)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        SEG = 3
        seg_steps = max(1, triton.cdiv(triton.cdiv(n, 64), SEG))  # in steps of 64
        totals = torch.empty((rows, SEG), dtype=torch.float32, device=x.device)
        segment_totals[(rows, SEG)](x, n, x.stride(0), totals, SEG, seg_steps)
        segment_scan[(rows, SEG)](x, y, n, x.stride(0), totals, SEG, seg_steps, SEG_P2=4)
        return y
"""


def _gate(problem: str, source: str, name: str, regimes: list[str]) -> tuple[bool, str]:
    """Accepted, and the verdict's message with its correctness stage's regime messages."""
    path = in_gated_folder(source, name)
    config = GateConfig(cache=False, timeout_s=300.0)
    v = run_gate(
        HELDOUT / problem / "problem.py", path, device="cpu", regimes=regimes, config=config
    )
    said = [o.message for s in v.stages if s.stage.value == "correctness" for o in s.regimes]
    return v.accepted, " | ".join([v.message, *said])


def test_kernels_that_must_take_one_step_are_refused_when_their_picks_differ() -> None:
    # ragged: 300 columns, seg_steps 2; at CHUNK 64 both kernels' segments are 128 columns,
    # at 128 both are 256 (the third empty): right on the diagonal, wrong across it
    accepted, why = _gate("reverse_cumsum_rows", TWO_CHUNKS, "two_chunks.py", ["ragged"])
    assert not accepted
    assert "with the autotune configs chosen apart" in why, why
    assert "segment_totals: " in why and "segment_scan: " in why, why


def test_kernels_right_under_any_pair_of_steps_are_accepted() -> None:
    made = mechanical(
        (HELDOUT / "column_softmax" / "naive.py").read_text(encoding="utf-8"),
        "column_tiling",
        then=[("online_softmax", {}), ("split_online", {})],
    )
    assert made.source is not None, made.reason
    tun = all_passes()["tunables"]
    sites = tun.forward_sites(made.source)
    assert len(sites) == 2  # the stats and the write kernels, one config space
    configs = [{"CHUNK": 16, "num_warps": 4}, {"CHUNK": 64, "num_warps": 4}]
    table = mechanical(made.source, "tunables", {"configs": configs})
    assert table.source is not None and table.source.count("triton.autotune(") == 2
    accepted, why = _gate("column_softmax", table.source, "two_tables.py", ["ragged"])
    assert accepted, why
    assert "and chosen apart" in why, why


@pytest.mark.parametrize(("rows", "right"), [((0, 1), False), ((1, 1), True)])
def test_rows_the_profile_sweep_chose_apart_are_checked(
    monkeypatch: pytest.MonkeyPatch, rows: tuple[int, int], right: bool
) -> None:
    # The profile sweep (GPU only) may time each kernel on its own row (gate/profile.py
    # `apart`); mixed.chosen checks that combination in the candidate's harness. Here it stands
    # in for the mixed check on the CPU: rows (0, 1) are the coupled file's wrong pair.
    from klineage.gate import mixed

    named = dict(zip(("segment_totals", "segment_scan"), rows, strict=True))
    monkeypatch.setattr(mixed, "check", lambda ck, regime, tol: mixed.chosen(ck, regime, named))
    name = f"two_chunks_rows{rows[0]}{rows[1]}.py"
    accepted, why = _gate("reverse_cumsum_rows", TWO_CHUNKS, name, ["ragged"])
    assert accepted is right, why
    if not right:
        assert "segment_totals: CHUNK=64" in why and "segment_scan: CHUNK=128" in why, why
