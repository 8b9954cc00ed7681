"""Time the expert corpus on a GPU: naive, expert, eager, torch.compile and a library kernel,
against the roofline floor from ceilings measured in the same run.

    PYTHONPATH=src python benchmarks/corpus.py [--workloads matmul,softmax] [--regimes large]

Without --workloads, every corpus family (each folder of src/klineage/kernels with a problem, an
expert and a naive kernel).

Naive and expert go through the gate on cuda (correctness on every regime, bf16 included, then
the profile stage's timing). Eager, torch.compile and the library kernel are timed here with the
same method (do_bench median, L2 flushed). Rows are appended to $OUT/corpus.jsonl as they finish,
so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _common import append_jsonl, bench_ms, measure_ceilings, out_dir

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.gate.profile import floor_ms
from klineage.gate.request import GateRequest
from klineage.problem import load_problem

KERNELS = Path(__file__).resolve().parents[1] / "src" / "klineage" / "kernels"


def corpus_workloads() -> list[str]:
    """Every corpus family: a folder of KERNELS with problem.py, expert.py and naive.py."""
    files = ("problem.py", "expert.py", "naive.py")
    return sorted(d.name for d in KERNELS.iterdir() if all((d / f).exists() for f in files))


def library_fn(workload: str, problem: Any, inputs: list[Any]) -> tuple[str, Any] | None:
    """The vendor kernel for the same computation, where one exists."""
    import torch
    import torch.nn.functional as F

    if workload == "matmul":
        return "cuBLAS (torch.matmul)", lambda: torch.matmul(*inputs)
    if workload == "attention":
        causal = bool(getattr(problem.module, "CAUSAL", False))
        return "SDPA (flash)", lambda: F.scaled_dot_product_attention(*inputs[:3], is_causal=causal)
    return None


def baselines(workload: str, regime: str, config: GateConfig) -> dict[str, Any]:
    import torch

    problem = load_problem(KERNELS / workload / "problem.py")
    row: dict[str, Any] = {}
    torch.manual_seed(0)
    with problem.regime_globals(regime):
        model = problem.model_cls(*problem.init_inputs(regime)).cuda().eval()
    inputs = problem.make_inputs(regime, "cuda")
    with torch.no_grad(), problem.regime_globals(regime):
        out = model(*inputs)
        req = GateRequest(problem=str(problem.path), candidate="", config=config)
        row["floor_ms"], row["floor_kind"] = floor_ms(problem, inputs, out, req)
        row["eager_ms"] = bench_ms(lambda: model(*inputs))
        t0 = time.perf_counter()
        compiled = torch.compile(model)
        compiled(*inputs)
        row["compile_wall_s"] = round(time.perf_counter() - t0, 1)
        row["compile_ms"] = bench_ms(lambda: compiled(*inputs))
        lib = library_fn(workload, problem, inputs)
        if lib is not None:
            row["library"], fn = lib
            row["library_ms"] = bench_ms(fn)
    torch._dynamo.reset()
    return row


def gate_kernel(workload: str, kind: str, regimes: list[str], config: GateConfig) -> dict[str, Any]:
    r = run_gate(
        KERNELS / workload / "problem.py",
        KERNELS / workload / f"{kind}.py",
        device="cuda",
        regimes=regimes,
        config=config,
    )
    per = {
        name: row.model_dump(mode="json", exclude_none=True)
        for name, row in r.profile_rows().items()
    }
    return {
        "accepted": r.accepted,
        "message": r.message,
        "regimes": per,
        "seconds": round(r.seconds, 1),
        "environment": r.environment.model_dump() if r.environment else None,
    }


def pct(floor: float, ms: float | None) -> str:
    return f"{100 * floor / ms:5.1f}%" if ms else "  -  "


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--workloads",
        default=",".join(corpus_workloads()),
        help="comma-separated; default: every corpus family",
    )
    ap.add_argument(
        "--regimes", default="", help="comma-separated; default: each problem's non-CPU regimes"
    )
    ap.add_argument("--timeout", type=float, default=540.0)
    args = ap.parse_args()
    out = out_dir() / "corpus.jsonl"
    ceilings = measure_ceilings()
    append_jsonl(out, {"ceilings": ceilings})
    print(
        f"ceilings: copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, bf16 matmul {ceilings['bf16_matmul_flops_per_s'] / 1e12:.0f} TFLOP/s",
        flush=True,
    )
    config = GateConfig(
        timeout_s=args.timeout, allow_suspicious=True, profile_compile=False, cache=False,
        copy_bytes_per_s=ceilings["copy_bytes_per_s"], matmul_flops_per_s=ceilings["bf16_matmul_flops_per_s"],
    )  # fmt: skip
    for workload in args.workloads.split(","):
        problem = load_problem(KERNELS / workload / "problem.py")
        regimes = (
            args.regimes.split(",")
            if args.regimes
            else [r for r in problem.regimes if r not in problem.cpu_regimes]
        )
        regimes = [r for r in regimes if r in problem.regimes]
        kernels = {
            kind: gate_kernel(workload, kind, regimes, config) for kind in ("naive", "expert")
        }
        for kind, k in kernels.items():
            print(
                f"{workload} {kind}: {'accepted' if k['accepted'] else 'REJECTED'} in {k['seconds']} s: {k['message'][:300]}",
                flush=True,
            )
        for regime in regimes:
            row: dict[str, Any] = {
                "workload": workload,
                "regime": regime,
                **baselines(workload, regime, config),
            }
            for kind, k in kernels.items():
                t = k["regimes"].get(regime)
                row[f"{kind}_ms"] = t["kernel_ms"] if t else None
                row[f"{kind}_accepted"] = k["accepted"]
            row["environment"] = kernels["expert"]["environment"]
            append_jsonl(out, row)
            lib = (
                f" {row.get('library', '')} {row['library_ms']:.3f} ms (expert {row['library_ms'] / row['expert_ms']:.0%} of it)"
                if row.get("library_ms") and row.get("expert_ms")
                else ""
            )
            print(
                f"{workload:13s} {regime:18s} floor {row['floor_ms']:.3f} ms | naive {pct(row['floor_ms'], row['naive_ms'])} expert {pct(row['floor_ms'], row['expert_ms'])} "
                f"eager {pct(row['floor_ms'], row['eager_ms'])} compile {pct(row['floor_ms'], row['compile_ms'])}{lib}",
                flush=True,
            )


if __name__ == "__main__":
    main()
