"""The tunables pass (rewrite/passes/tunables.py), folding a swept table, and the configs the
klineage policy picks (optimize/configs.py): source rewrites only, no kernels run."""

from __future__ import annotations

import ast
from pathlib import Path

from klineage.optimize.configs import ExpertConfig, _from_source, nearest_configs, role
from klineage.rewrite import all_passes
from klineage.rewrite.passes.tunables import analyse, draw, fold, lift

ELEMENTWISE = """
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


def relu(x):
    y = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
    return y
"""

LOCALS = """
import torch
import triton
import triton.language as tl


@triton.jit
def rows_kernel(w_ptr, y_ptr, N, K, ROWS: tl.constexpr, K_TILE: tl.constexpr, WIDTH: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    acc = tl.zeros((ROWS,), dtype=tl.float32)
    for c in range(0, K, K_TILE):
        cols = c + tl.arange(0, K_TILE)
        acc += tl.sum(tl.load(w_ptr + r[:, None] * K + cols[None, :], mask=(r[:, None] < N) & (cols[None, :] < K), other=0.0), axis=1)
    tl.store(y_ptr + r, acc, mask=r < N)


def run(w, y):
    N, K = w.shape
    ROWS, K_TILE, WIDTH = 64, 128, 256
    grid = (triton.cdiv(N, ROWS),)
    rows_kernel[grid](w, y, N, K, ROWS=ROWS, K_TILE=K_TILE, WIDTH=WIDTH, num_warps=4)
    return y
"""


def _lift(source: str, params: dict) -> str:
    p = all_passes()["tunables"]
    [site] = p.forward_sites(source)
    r = p.apply(source, site, params)
    assert r.applied and r.source, r.reason
    ast.parse(r.source)
    return r.source


def test_a_literal_block_and_its_tile_count_become_a_table_and_a_grid_of_meta() -> None:
    [launch] = analyse(ELEMENTWISE)
    assert [(t.name, t.value, t.tiled) for t in launch.tunables] == [("BLOCK", 64, True)]
    assert launch.keys == ["n"] and launch.stages is None  # no loop: stages do not matter
    out = _lift(
        ELEMENTWISE, {"configs": [{"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 4096, "num_warps": 8}]}
    )
    assert 'triton.Config({"BLOCK": 1024}, num_warps=4)' in out
    assert 'triton.Config({"BLOCK": 4096}, num_warps=8)' in out and 'key=["n"]' in out
    assert 'relu_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, y, n)' in out
    assert out.index("@triton.autotune") < out.index("@triton.jit")


def test_launcher_locals_are_lifted_with_the_grid_they_feed_and_a_size_read_elsewhere_stays() -> (
    None
):
    src = LOCALS.replace("    return y\n", "    scratch = torch.empty(WIDTH)\n    return y\n", 1)
    [launch] = analyse(src)
    # WIDTH is read again (a buffer size): lifting it would leave that at the old value.
    assert [t.name for t in launch.tunables] == ["ROWS", "K_TILE"]
    assert launch.stages == 3 and launch.keys == ["N", "K"]
    k_tile = launch.tunables[1]
    assert k_tile.tiled  # a loop steps by it: any value is correct
    out = _lift(src, {"configs": [{"ROWS": 32, "K_TILE": 256, "num_warps": 8, "num_stages": 2}]})
    assert 'grid = lambda META: (triton.cdiv(N, META["ROWS"]),)' in out
    assert "WIDTH = 256" in out and "ROWS, K_TILE" not in out  # the lifted locals are gone
    assert "WIDTH=WIDTH" in out and "ROWS=ROWS" not in out and "num_warps=4)" not in out
    assert 'triton.Config({"ROWS": 32, "K_TILE": 256}, num_warps=8, num_stages=2)' in out


# A newcomer's long reduction: the launch in ModelNew.forward (a method, not a module-level
# function) and a block size named STEP, known by what the kernel does with it.
METHOD_STEP = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def dot_rows(a_ptr, b_ptr, c_ptr, K, STEP: tl.constexpr, LANES: tl.constexpr):
    i = tl.program_id(0)
    part = tl.zeros([STEP], dtype=tl.float32)
    for k0 in range(0, K, STEP):
        kk = k0 + tl.arange(0, STEP)
        part += tl.load(a_ptr + i * K + kk, mask=kk < K, other=0.0) * tl.load(b_ptr + kk, mask=kk < K, other=0.0)
    tl.store(c_ptr + i, tl.sum(part, axis=0))


class ModelNew(nn.Module):
    def forward(self, A, b):
        M, K = A.shape
        c = torch.empty(M, device=A.device)
        dot_rows[(M,)](A, b, c, K, STEP=64, LANES=32)
        return c
"""


def test_a_launch_in_a_method_is_lifted_and_a_step_that_tiles_its_loop_is_a_block() -> None:
    [launch] = analyse(METHOD_STEP)
    assert launch.function == "forward"
    # STEP: the loop steps by it and tl.arange spans it. LANES is neither: not a size.
    assert [(t.name, t.value, t.tiled) for t in launch.tunables] == [("STEP", 64, True)]
    out = _lift(METHOD_STEP, {"configs": [{"STEP": 1024, "num_warps": 8}]})
    assert 'triton.Config({"STEP": 1024}, num_warps=8, num_stages=3)' in out
    assert "dot_rows[(M,)](A, b, c, K, LANES=32)" in out


def test_a_block_that_must_cover_a_row_only_grows() -> None:
    src = ELEMENTWISE.replace("(triton.cdiv(n, 64),)", "(1,)")
    [launch] = analyse(src)
    [block] = launch.tunables
    assert not block.tiled and min(block.values()) == 64
    p = all_passes()["tunables"]
    [site] = p.forward_sites(src)
    r = p.apply(src, site, {"configs": [{"BLOCK": 32}]})
    assert not r.applied and "under 64" in r.reason


def test_kernels_autotune_cannot_rerun_safely_are_not_sites() -> None:
    in_place = ELEMENTWISE.replace("tl.store(y_ptr + offs", "tl.store(x_ptr + offs")
    [launch] = analyse(in_place)
    assert "writes what it reads (x_ptr)" in launch.problem
    twice = ELEMENTWISE.replace(
        "    return y\n", "    relu_kernel[(1,)](x, y, n, BLOCK=64)\n    return y\n"
    )
    assert all("launched from 2 places" in x.problem for x in analyse(twice))
    assert all_passes()["tunables"].forward_sites(twice) == []


STRIDED = """import torch
import triton
import triton.language as tl


@triton.jit
def col_scale(x_ptr, y_ptr, M, ld, CHUNK: tl.constexpr):
    col = tl.program_id(0)
    lanes = tl.arange(0, CHUNK)
    for r0 in range(0, M, CHUNK):
        r = r0 + lanes
        a = tl.load(x_ptr + r * ld + col, mask=r < M)
        tl.store((y_ptr + r * ld)[None] + col, a * 2.0, mask=r < M)


def forward(x):
    y = torch.empty_like(x)
    col_scale[(x.shape[1],)](x, y, x.shape[0], x.stride(0), CHUNK=32)
    return y
"""


def test_a_stride_in_both_addresses_is_not_a_pointer_read_and_written() -> None:
    """The column softmax's naive kernel could not be tuned (2026-12-06): its row stride `ld`
    scales both the load's and the store's offsets, and was taken for a pointer it writes."""
    [launch] = analyse(STRIDED)
    assert not launch.problem
    assert [(t.name, t.value) for t in launch.tunables] == [("CHUNK", 32)]
    [launch] = analyse(STRIDED.replace("tl.store((y_ptr", "tl.store((x_ptr"))
    assert "writes what it reads (x_ptr)" in launch.problem


def test_a_baseline_draw_is_seeded_and_keeps_the_current_config_first() -> None:
    [launch] = analyse(LOCALS)
    space = launch.space()
    assert len(space) > 100 and space[0] == launch.current()
    a, b = draw(space, 16, "0:x"), draw(space, 16, "0:x")
    assert a == b and len(a) == 16 and a[0] == launch.current()
    assert draw(space, 16, "1:x") != a


def test_fold_cuts_the_table_to_the_winners_in_order() -> None:
    out = _lift(ELEMENTWISE, {"configs": [{"BLOCK": b, "num_warps": 4} for b in (64, 256, 1024)]})
    cut = fold(out, [2, 2, 0])
    assert cut is not None
    assert cut.count("triton.Config(") == 2
    assert cut.index('"BLOCK": 1024') < cut.index('"BLOCK": 64}')
    table = cut[cut.index("configs=[") : cut.index("],")]
    assert [line.strip()[:13] for line in table.splitlines()[1:-1]] == ["triton.Config"] * 2
    assert fold(out, [7]) is None and fold(ELEMENTWISE, [0]) is None


TWO_TABLES = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"CHUNK": 16}), triton.Config({"CHUNK": 32}), triton.Config({"CHUNK": 64})], key=["n"])
@triton.jit
def stats(x_ptr, n, CHUNK: tl.constexpr):
    pass


@triton.autotune(configs=[triton.Config({"CHUNK": 128}), triton.Config({"CHUNK": 256})], key=["n"])
@triton.jit
def write(x_ptr, n, CHUNK: tl.constexpr):
    pass
"""


def _chunks(source: str, kernel: str) -> list[int]:
    """The CHUNK of each row of the autotune table above `kernel`'s definition."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            table = next(
                d for d in node.decorator_list if ast.unparse(d).startswith("triton.autotune")
            )
            assert isinstance(table, ast.Call)
            rows = table.keywords[0].value
            assert isinstance(rows, ast.List)
            return [ast.literal_eval(r.args[0])["CHUNK"] for r in rows.elts]  # type: ignore[attr-defined]
    raise AssertionError(kernel)


def test_fold_cuts_every_table_to_the_rows_the_gate_forced_together() -> None:
    """The gate's config c makes each autotuner take row c, or its last row when its table is
    shorter: the stats table keeps rows 2 and 0, the write table rows 1 (2 clamped) and 0."""
    cut = fold(TWO_TABLES, [2, 0, 2])
    assert cut is not None
    assert _chunks(cut, "stats") == [64, 16] and _chunks(cut, "write") == [256, 128]
    assert _chunks(fold(TWO_TABLES, [1, 2]) or "", "write") == [256]  # rows 1 and min(2, 1)
    assert fold(TWO_TABLES, [3]) is None  # past the widest table: not a row the gate ran
    empty = TWO_TABLES.replace(
        '[triton.Config({"CHUNK": 128}), triton.Config({"CHUNK": 256})]', "[]"
    )
    assert fold(empty, [0]) is None  # no row of its own to keep


def test_the_prior_takes_each_expert_config_s_nearest_first() -> None:
    [launch] = analyse(LOCALS)
    experts = [
        ExpertConfig((("X", 4096),), 8, None, False, "a"),
        ExpertConfig((("X", 16384),), 16, None, False, "b"),
    ]
    chosen, note = nearest_configs(launch, experts, 5, dot=False)
    assert chosen[0] == launch.current() and len(chosen) == 5
    assert len({tuple(sorted(c.items())) for c in chosen}) == 5
    elements = [c["ROWS"] * c["K_TILE"] for c in chosen[1:3]]
    assert elements == [4096, 16384] and [c["num_warps"] for c in chosen[1:3]] == [8, 16]
    assert "2 expert configs" in note
    assert role("BLOCK_SIZE_M") == "M" and role("TILE_K") == "K" and role("Q_BLOCK") == "M"
    assert role("ROWS") == "X"


def test_a_kept_swept_candidate_is_folded_and_re_keyed() -> None:
    from klineage.gate.records import Stage
    from klineage.optimize.decide import folded, sha

    out = _lift(ELEMENTWISE, {"configs": [{"BLOCK": b, "num_warps": 4} for b in (64, 256, 1024)]})
    row = {"kernel_ms": 0.1, "kernel_p20_ms": 0.1, "kernel_p80_ms": 0.1, "basis": "device",
           "host_ms": 0.2, "host_p20_ms": 0.2, "host_p80_ms": 0.2}  # fmt: skip
    rows = {
        "a": {**row, "config_index": 2},
        "b": {**row, "config_index": 1},
        "tiny": {**row, "config_index": 0, "launch_bound": True},
    }
    gate = {
        "candidate_sha": sha(out),
        "stages": [
            {"stage": Stage.PROFILE.value, "status": "passed", "numbers": {"regimes": rows}}
        ],
    }
    source, record = folded(out, gate)
    assert source.count("triton.Config(") == 2  # launch-bound regimes do not choose
    assert record["candidate_sha"] == sha(source) and record["folded_from"] == sha(out)
    assert folded(ELEMENTWISE, {"stages": []}) == (ELEMENTWISE, {"stages": []})


def test_a_config_space_gets_time_for_each_config_not_a_hang_verdict() -> None:
    from types import SimpleNamespace

    from klineage.config import GateConfig
    from klineage.gate.checker import MAX_BUDGETED_CONFIGS, Checker
    from klineage.gate.session import Clock

    clock = Clock(120.0)
    req = SimpleNamespace(config=GateConfig(timeout_per_config_s=10.0))
    checker = Checker(req, SimpleNamespace(clock=clock), None, None)  # type: ignore[arg-type]
    checker.seen.autotuners["k"] = 16
    checker._time_for_configs()
    assert clock.timeout_s == 120.0 + 15 * 10.0
    checker._time_for_configs()  # counted once
    assert clock.timeout_s == 270.0
    checker.seen.autotuners["other"] = 1000  # a huge table earns at most the cap
    checker._time_for_configs()
    assert clock.timeout_s == 120.0 + (MAX_BUDGETED_CONFIGS - 1) * 10.0


def test_klineage_spends_its_share_on_expert_configs_what_only_on_a_draw_and_the_cpu_on_none() -> (
    None
):
    from pathlib import Path

    from klineage.optimize.policies import Context, get_policy
    from klineage.skills.library import load_library

    skills, _ = load_library(None)

    def first(policy: str, device: str) -> object:
        ctx = Context(Path("heldout/gemv/problem.py"), Path("naive.py"), device, skills, False, 0, {},
                      best_source=LOCALS, configs=16)  # fmt: skip
        # The first table (structural skills, tried before it, have no place in LOCALS).
        return next(
            (p for p in get_policy(policy).proposals(ctx) if p.pass_name == "tunables"), None
        )

    mine, drawn = first("klineage", "cuda"), first("what-only", "cuda")
    assert mine.pass_name == drawn.pass_name == "tunables"  # type: ignore[attr-defined]
    a, b = mine.params["configs"], drawn.params["configs"]  # type: ignore[attr-defined]
    assert len(a) == len(b) == 16 and a[0] == b[0] and a != b
    assert "expert configs" in mine.label and "drawn at random" in drawn.label  # type: ignore[attr-defined]
    cpu = first("klineage", "cpu")
    assert cpu is None or cpu.pass_name != "tunables"  # type: ignore[attr-defined]


def test_structural_skills_are_proposed_before_the_table_that_would_hide_their_sites() -> None:
    """On a naive long-K matmul: split_k, then the tunables table, then the other skills. The
    table, once kept, makes the launch autotuned with a grid of META, where split_k has no
    place; so the structure is chosen first, and its constants tuned after."""
    from klineage.optimize.policies import Context, get_policy
    from klineage.skills.library import load_library
    from tests.conftest import ROOT

    skills, _ = load_library(None)
    d = ROOT / "src" / "klineage" / "heldout" / "matmul_long_k_small_mn"
    for policy in ("klineage", "what-only"):
        ctx = Context(d / "problem.py", d / "naive.py", "cuda", skills, False, 0, {},
                      best_source=(d / "naive.py").read_text(), configs=16)  # fmt: skip
        names = [p.pass_name for p in get_policy(policy).proposals(ctx)]
        assert "split_k" in names and "tunables" in names, (policy, names)
        assert names.index("split_k") < names.index("tunables"), (policy, names)
        assert names.index("tunables") < names.index("cache_eviction_hints"), (policy, names)
        assert all_passes()["split_k"].STRUCTURAL


def test_a_structural_skill_without_a_site_in_its_own_form_is_written_by_its_other_form() -> None:
    from pathlib import Path

    from klineage.optimize.policies import skill_proposal as _proposal
    from klineage.skills.library import load_library
    from klineage.skills.retrieve import retrieve

    heldout = (
        Path(__file__).resolve().parents[2] / "src" / "klineage" / "heldout" / "row_l2_normalize"
    )
    skills, _ = load_library(None)
    rows = [s for s in skills if s.rewrite.pass_name == "rows_per_program"]
    [r] = retrieve(
        rows, heldout / "problem.py", heldout / "naive.py", target={"r": {"row_length": 64.0}}
    )
    assert r.materializer == "mechanical" and r.pass_name == "multi_row"
    assert any("written by multi_row" in why for why in r.reasons)
    p = _proposal(r, "skill")
    assert p.pass_name == "multi_row" and p.params == {}  # the expert's params are another shape's
    assert "written by multi_row" in p.label


TILED_COLUMNS = """
import torch
import triton
import triton.language as tl


@triton.jit
def col_max(x_ptr, out_ptr, M, N, ld, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    best = tl.full((BLOCK_N,), float("-inf"), tl.float32)
    for r0 in range(0, M, ROWS):
        r = r0 + tl.arange(0, ROWS)[:, None]
        v = tl.load(x_ptr + r * ld + cols[None, :], mask=(r < M) & (cols[None, :] < N), other=float("-inf"))
        best = tl.maximum(best, tl.max(v.to(tl.float32), axis=0))
    tl.store(out_ptr + cols, best, mask=cols < N)


def run(x, out):
    M, N = x.shape
    BLOCK_N = min(256, max(1, 4096 // 32), triton.next_power_of_2(N))
    col_max[(triton.cdiv(N, BLOCK_N),)](x, out, M, N, x.stride(0), ROWS=32, BLOCK_N=BLOCK_N)
    return out
"""


def test_a_lifted_row_count_is_sized_with_the_columns_the_launcher_computes() -> None:
    """column_tiling's launcher computes BLOCK_N (at most 128 here) from the row tile it had;
    lifting ROWS alone, the H200 search (2026-12-03) timed 16384-row tiles of 128 columns, 2M
    elements a program, and the gate call ran out of time compiling them. BLOCK_N itself stays
    the launcher's: 128 is more than a computed count a table lifts (it is N's own below 128)."""
    [launch] = analyse(TILED_COLUMNS)
    assert [t.name for t in launch.tunables] == ["ROWS"] and launch.fixed == {"BLOCK_N": 128}
    space = launch.space()
    assert max(c["ROWS"] for c in space) * 128 <= 1 << 16 < 16384 * 128
    # Matched to 1-D experts of 4096 and 16384 elements, the whole tile is what is compared.
    experts = [
        ExpertConfig((("X", 4096),), 8, None, False, "a"),
        ExpertConfig((("X", 16384),), 16, None, False, "b"),
    ]
    chosen, _ = nearest_configs(launch, experts, 3, dot=False)
    assert [c["ROWS"] * 128 for c in chosen[1:]] == [4096, 16384]
    # Nothing bounds a size computed from the shape alone: it stays out of the tile.
    unbounded = TILED_COLUMNS.replace(
        "min(256, max(1, 4096 // 32), triton.next_power_of_2(N))", "triton.next_power_of_2(N)"
    )
    [free] = analyse(unbounded)
    assert free.fixed == {} and max(c["ROWS"] for c in free.space()) == 16384
    # At most 16 columns, the grid's count is lifted beside ROWS, from 16.
    few = TILED_COLUMNS.replace("min(256, max(1, 4096 // 32),", "min(16, max(1, 4096 // 32),")
    [both] = analyse(few)
    assert [(t.name, t.value) for t in both.tunables] == [("ROWS", 32), ("BLOCK_N", 16)]
    assert both.fixed == {} and max(c["ROWS"] * c["BLOCK_N"] for c in both.space()) == 1 << 16
    # ... but not where something besides the grid reads it (a buffer's size), ...
    shared = few.replace("    return out\n", "    return out[:BLOCK_N]\n")
    [kept] = analyse(shared)
    assert [t.name for t in kept.tunables] == ["ROWS"] and kept.fixed == {"BLOCK_N": 16}
    # ... nor beside a tile extent the launcher computes from the shape alone.
    spanned = few.replace(", ROWS=32,", ", ROWS=triton.next_power_of_2(M),")
    [alone] = analyse(spanned)
    assert alone.tunables == [] and alone.fixed == {"BLOCK_N": 16}


def test_rows_beside_a_row_wide_span_stay_the_launchers() -> None:
    """multi_row's log-sum-exp: its block is `SPAN=next_power_of_2(row_len)`, which no name
    marks a block size; lifted rows would go up to 16384 whole rows a program beside it."""
    heldout = Path(__file__).resolve().parents[2] / "src" / "klineage" / "heldout"
    source = (heldout / "logsumexp_rows" / "naive.py").read_text()
    rows = all_passes()["multi_row"]
    made = rows.apply(source, rows.forward_sites(source)[0], {"max_rows": 8}).source
    assert made and "SPAN=triton.next_power_of_2(row_len)" in made and "min(8," in made
    [launch] = analyse(made)
    assert launch.tunables == [] and launch.fixed == {"ROWS": 8}


def test_a_launcher_computed_row_count_is_lifted_and_its_line_goes() -> None:
    """multi_row's reverse cumsum: `ROWS = min(64, max(1, 256 // 64), ...)` is 4 rows of the
    64-column chunk. The table takes both, so a wider chunk can come with more rows."""
    source = SCAN_ROWS
    [launch] = analyse(source)
    assert [(t.name, t.value, t.tiled) for t in launch.tunables] == [
        ("CHUNK", 64, True),
        ("ROWS", 4, True),
    ]
    assert {(c["ROWS"], c["CHUNK"]) for c in launch.space()} >= {(16, 256), (4, 64), (64, 1024)}
    out = lift(source, launch, [launch.current(), {**launch.current(), "ROWS": 16, "CHUNK": 256}])
    assert "ROWS = min(" not in out and "# four rows" not in out
    assert 'scan_rows[lambda META: (triton.cdiv(rows, META["ROWS"]),)](x, y, n, n_rows=rows)' in out
    assert 'triton.Config({"CHUNK": 256, "ROWS": 16}, num_warps=4, num_stages=3)' in out


def test_a_scan_is_matched_to_scan_experts_or_else_to_its_own_neighbourhood() -> None:
    """The copy and reduction experts' tiles (4096 elements and up) are no prior for a scan:
    the reverse cumsum's [4, CHUNK] walk ran 4x slower at CHUNK 1024 than at 64 on its short
    rows (H100, 2026-12-07). Without a scan expert, the table is the current config's
    neighbourhood: each size from half to four times its own, nearest first, then warps."""
    [launch] = analyse(SCAN_ROWS)
    copy = [ExpertConfig((("X", 4096),), 8, None, False, "copy")]
    chosen, note = nearest_configs(launch, copy, 16, dot=False, scan=True)
    assert "around the current one" in note and chosen[0] == launch.current()
    shapes = [
        (c["CHUNK"], c["ROWS"]) for c in chosen if c["num_warps"] == 4 and c["num_stages"] == 3
    ]
    assert shapes[:4] == [(64, 4), (32, 4), (64, 8), (128, 4)]
    assert {(256, 16), (256, 4), (128, 8)} <= set(shapes)
    assert all(16 <= ch <= 256 and 4 <= r <= 16 for ch, r in shapes)
    rest = [c for c in chosen if (c["CHUNK"], c["ROWS"]) == (64, 4)][1:]
    assert rest and all(c["num_warps"] in (2, 4, 8) for c in rest)
    # The same experts stay the prior of a kernel that does not scan; a scan expert, of a scan.
    assert "nearest of" in nearest_configs(launch, copy, 16, dot=False)[1]
    scan = [ExpertConfig((("X", 1024),), 4, None, False, "scan", True)]
    chosen, note = nearest_configs(launch, [*copy, *scan], 3, dot=False, scan=True)
    assert "(scan)" in note and chosen[1]["CHUNK"] * chosen[1]["ROWS"] == 1024
    # An exemplar that scans gives scan configs.
    table = 'c = triton.Config({"BLOCK": 256}, num_warps=4)\n'
    [read] = _from_source(table + "y = tl.cumsum(x, axis=0)\n", "scan")
    assert not _from_source(table, "copy")[0].scan
    assert read.scan and not read.dot and read.sizes == (("X", 256),)


def test_a_launch_in_one_of_several_forwards_is_read_and_lifted_in_that_one() -> None:
    """A regime dispatch file has a forward per class; the launch's locals are those of the
    forward it is in (the last forward of the file was read before: the reverse cumsum's
    dispatched multi_row kernel had no ROWS to lift), and only that forward is rewritten."""
    run = SCAN_ROWS[SCAN_ROWS.index("def run(") :]
    body = run.replace("def run(x, y):", "    def forward(self, x, y):").replace(
        "\n    ", "\n        "
    )
    other = (
        "class Other:\n    def forward(self, x, y):\n        ROWS = 4\n"
        "        rows, n = x.shape\n        return ROWS\n"
    )
    source = SCAN_ROWS[: SCAN_ROWS.index("def run(")] + "class Base:\n" + body + "\n\n" + other
    [launch] = analyse(source)
    assert [t.name for t in launch.tunables] == ["CHUNK", "ROWS"]
    out = lift(source, launch, [launch.current()])
    assert "ROWS = min(" not in out and "        ROWS = 4\n" in out
    assert 'scan_rows[lambda META: (triton.cdiv(rows, META["ROWS"]),)]' in out
    compile(out, "lifted.py", "exec")


SCAN_ROWS = """
import torch
import triton
import triton.language as tl


@triton.jit
def scan_rows(x_ptr, y_ptr, n, CHUNK: tl.constexpr, n_rows, ROWS: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    ok = rows < n_rows
    carried = tl.full((ROWS, 1), 0.0, tl.float32)
    for done in range(0, n, CHUNK):
        pos = done + tl.arange(0, CHUNK)[None, :]
        v = tl.load(x_ptr + rows * n + pos, mask=ok & (pos < n), other=0.0)
        tl.store(y_ptr + rows * n + pos, carried + tl.cumsum(v, axis=1), mask=ok & (pos < n))
        carried += tl.sum(v, axis=1, keep_dims=True)


def run(x, y):
    rows, n = x.shape
    # four rows of the 64-column chunk
    ROWS = min(64, max(1, 256 // 64), triton.next_power_of_2(rows))
    scan_rows[(triton.cdiv(rows, ROWS),)](x, y, n, CHUNK=64, n_rows=rows, ROWS=ROWS)
"""


TILE_COPY = """
import torch
import triton
import triton.language as tl


@triton.jit
def copy_tile(src, dst, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]
    c = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    ok = (r < M) & (c < N)
    tl.store(dst + c * M + r, tl.load(src + r * N + c, mask=ok), mask=ok)


def launch(x, y, M, N):
    copy_tile[(triton.cdiv(M, SIDE_M), triton.cdiv(N, SIDE_N))](x, y, M, N, BLOCK_M=SIDE_M, BLOCK_N=SIDE_N)
"""


def test_two_sizes_sharing_one_literal_in_the_grid_are_not_lifted_apart() -> None:
    # 64 and 64: which tile count is BLOCK_M's cannot be read from the grid. Lifted apart, a
    # config with BLOCK_N=16 would launch a quarter of the column tiles (the H200's tiled
    # transpose table, 2026-12-03: non-finite output, the unwritten part).
    (same,) = analyse(TILE_COPY.replace("SIDE_M", "64").replace("SIDE_N", "64"))
    assert same.tunables == [] and same.fixed == {"BLOCK_M": 64, "BLOCK_N": 64}
    # 32 and 64: each count is one size's; both lifted, and the grid follows each.
    (apart,) = analyse(TILE_COPY.replace("SIDE_M", "32").replace("SIDE_N", "64"))
    assert [(t.name, t.value, t.tiled) for t in apart.tunables] == [
        ("BLOCK_M", 32, True),
        ("BLOCK_N", 64, True),
    ]
    out = _lift(
        TILE_COPY.replace("SIDE_M", "32").replace("SIDE_N", "64"),
        {"configs": [{"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 4}]},
    )
    assert 'triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"])' in out


def test_two_launches_of_one_space_share_one_table_and_the_label_names_both() -> None:
    """split_online's stats and write kernels have the same sizes, warps and stages: one
    proposal tables both (one gate call), says so, and leaves no second proposal that would
    find no place; the table's rewrite touches only the kernels it names."""
    from pathlib import Path

    from klineage.optimize.materialize import mechanical
    from klineage.optimize.policies import Context, tuning_proposals
    from klineage.skills.library import load_library
    from tests.unit.rewrite.test_split_online import online, split

    skills, _ = load_library(None)
    source = split(online(tiled=True))
    ctx = Context(Path("heldout/column_softmax/problem.py"), Path("naive.py"), "cuda", skills,
                  False, 0, {}, best_source=source, configs=16)  # fmt: skip
    (prop,) = list(tuning_proposals(ctx, prior=True))
    assert prop.params["kernels"] == ["softmax_down_stats", "softmax_down"]
    assert prop.label.startswith("tunables of softmax_down_stats and softmax_down (16 configs)")
    both = mechanical(source, "tunables", prop.params).source
    assert both is not None and both.count("@triton.autotune(") == 2
    one = mechanical(source, "tunables", {**prop.params, "kernels": ["softmax_down"]}).source
    assert one is not None and one.count("@triton.autotune(") == 1
    assert one.index("@triton.autotune(") > one.index("def softmax_down_stats(")
