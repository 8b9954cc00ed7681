"""KernelBench's own problem files, unchanged, through `klineage gate --device cpu` (issue 17).

    python benchmarks/kernelbench_cpu.py FOLDER [--only NAME ...] [--out results.json]

FOLDER holds the KernelBench problem files, copied unchanged from
github.com/ScalingIntelligence/KernelBench (KernelBench/level1/*.py, KernelBench/level2/*.py) at
the commit named in docs/benchmarks.md; they are not in this repository (KernelBench's code
stays in KernelBench; git-ignored bench-out/kernelbench/ here). The candidates, class ModelNew
launching Triton kernels, are our own: tests/interp/kernelbench_candidates/<same name>.py
(--candidates to point elsewhere). To rebuild FOLDER from a KernelBench clone:

    for f in $(python benchmarks/kernelbench_cpu.py --list); do
        git -C KernelBench show 423217d9fda91e0c2d67e4a43bf62f96f6d104f1:KernelBench/$f \\
            > FOLDER/$(basename $f); done

Each file is gated one at a time (the CPU is shared), exactly as

    python -m klineage gate FOLDER/NAME.py CANDIDATES/NAME.py --device cpu \\
        --set G=V ... --json --no-cache

with --set shrinking the module-level sizes so the Triton interpreter finishes in seconds. No run
sets a derived global (bias_shape = (out_features,) and the like): they must follow their source.
Prints a markdown table and writes every verdict's JSON to --out. --controls instead runs
deliberately wrong candidates (made from ours by one text edit, in a temporary folder) and
inconsistent --set values, each with the outcome it should have.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ELEMENTWISE = {"batch_size": 8, "dim": 1000}
GEMM = {"batch_size": 8, "in_features": 64, "out_features": 40}
GEMM_GN = {"batch_size": 8, "in_features": 64, "out_features": 64, "num_groups": 8}

# (KernelBench path, derived global in the file or None, --set overrides)
RUNS: list[tuple[str, str | None, dict[str, object]]] = [
    ("level1/19_ReLU.py", None, ELEMENTWISE),
    ("level1/21_Sigmoid.py", None, ELEMENTWISE),
    ("level1/22_Tanh.py", None, ELEMENTWISE),
    ("level1/26_GELU_.py", None, ELEMENTWISE),
    ("level1/23_Softmax.py", None, ELEMENTWISE),
    ("level1/36_RMSNorm_.py", None, {"batch_size": 2, "features": 8, "dim1": 16, "dim2": 17}),
    (
        "level1/47_Sum_reduction_over_a_dimension.py",
        None,
        {"batch_size": 4, "dim1": 64, "dim2": 33},
    ),
    ("level1/1_Square_matrix_multiplication_.py", None, {"N": 100}),
    ("level2/12_Gemm_Multiply_LeakyReLU.py", None, GEMM),
    ("level2/76_Gemm_Add_ReLU.py", "bias_shape = (out_features,)", GEMM),
    ("level2/95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py", "add_value_shape = (out_features,)", GEMM),
    ("level2/37_Matmul_Swish_Sum_GroupNorm.py", "bias_shape = (out_features,)", GEMM_GN),
    (
        "level2/88_Gemm_GroupNorm_Swish_Multiply_Swish.py",
        "multiply_weight_shape = (out_features,)",
        GEMM_GN,
    ),
    ("level2/94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py", "bias_shape = (out_features,)", GEMM_GN),
    ("level2/75_Gemm_GroupNorm_Min_BiasAdd.py", "bias_shape = (1, out_features, 1, 1)", GEMM_GN),
    # the derived global follows a different source value (item 4 of the acceptance)
    (
        "level2/88_Gemm_GroupNorm_Swish_Multiply_Swish.py",
        "multiply_weight_shape = (out_features,)",
        {"batch_size": 4, "in_features": 48, "out_features": 96, "num_groups": 12},
    ),
]


CANDIDATES = Path(__file__).resolve().parents[1] / "tests" / "interp" / "kernelbench_candidates"

_GEMM_SET = {"batch_size": 8, "in_features": 64, "out_features": 40}
_LIN = "        self.matmul = nn.Linear(in_features, out_features)\n"
_ADD = "        self.add_value = nn.Parameter(torch.randn(add_value_shape))\n"

# (what, KernelBench path, (old, new) text edit of our candidate or None, --set, expected)
CONTROLS: list[tuple[str, str, tuple[str, str] | None, dict[str, object], str]] = [
    (
        "bias add dropped",
        "level2/76_Gemm_Add_ReLU.py",
        ("acc += tl.load(e_ptr + cols, mask=cm, other=0.0)[None, :]\n", ""),
        _GEMM_SET,
        "rejected at correctness",
    ),
    (
        "output (C, B) instead of (1, C, B, 1)",
        "level2/75_Gemm_GroupNorm_Min_BiasAdd.py",
        ("torch.empty((1, C, B, 1)", "torch.empty((C, B)"),
        GEMM_GN,
        "rejected at correctness",
    ),
    (
        "parameters made in the other order",
        "level2/95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py",
        (_LIN + _ADD, _ADD + _LIN),
        _GEMM_SET,
        "rejected at correctness",
    ),
    (
        "derived global set against its source",
        "level2/76_Gemm_Add_ReLU.py",
        None,
        {**_GEMM_SET, "bias_shape": "(41,)"},
        "problem error / usage",
    ),
    (
        "--set of a name the file lacks",
        "level2/76_Gemm_Add_ReLU.py",
        None,
        {"batch_size": 8, "in_features": 64, "out_feature": 40},
        "problem error / usage",
    ),
]


def gate(folder: Path, cands: Path, rel: str, sets: dict[str, object]) -> tuple[dict, float, int]:
    name = Path(rel).name
    cmd = [sys.executable, "-m", "klineage", "gate", str(folder / name),
           str(cands / name), "--device", "cpu", "--json", "--no-cache"]  # fmt: skip
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        verdict = json.loads(p.stdout)
    except json.JSONDecodeError:
        verdict = {"fault": "no JSON", "stdout": p.stdout[-2000:], "stderr": p.stderr[-2000:]}
    verdict["_cmd"] = cmd
    return verdict, wall, p.returncode


def summary(v: dict, rc: int) -> tuple[str, str]:
    if v.get("accepted"):
        corr = next((s for s in v.get("stages", []) if s["stage"] == "correctness"), {})
        errs = [r.get("max_abs_err") for r in corr.get("regimes", [])]
        return "accepted", f"{corr.get('message', '')}; max abs err {max(errs):.2g}" if errs else ""
    if v.get("fault") == "no JSON":  # a usage error: the message is on stderr only
        msg = "(no JSON on stdout; stderr:) " + " ".join(v.get("stderr", "").split())
    else:
        msg = " ".join(str(v.get("message") or v.get("fault") or v).split())
    return ("problem error / usage" if rc == 2 else f"rejected at {v.get('failed_stage')}"), msg[
        :300
    ]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("folder", type=Path, nargs="?")
    ap.add_argument("--only", action="append", default=[], help="substring of a file name")
    ap.add_argument("--candidates", type=Path, default=CANDIDATES)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--list", action="store_true", help="print the KernelBench paths and stop")
    ap.add_argument("--controls", action="store_true", help="the wrong-on-purpose runs")
    args = ap.parse_args()
    if args.list:
        print("\n".join(sorted({rel for rel, _, _ in RUNS})))
        return
    if args.folder is None:
        ap.error("FOLDER is required")
    if args.controls:
        controls(args)
        return
    rows, raw = [], []
    print("| file | level | derived global | --set | verdict | s (gate) | message |")
    print("|---|---|---|---|---|---|---|")
    for rel, derived, sets in RUNS:
        if args.only and not any(o in rel for o in args.only):
            continue
        v, wall, rc = gate(args.folder, args.candidates, rel, sets)
        verdict, msg = summary(v, rc)
        setstr = " ".join(f"{k}={val}" for k, val in sets.items())
        row = (f"| {Path(rel).name} | {rel[5]} | {derived or 'no'} | `{setstr}` | {verdict} "
               f"| {v.get('seconds', float('nan')):.1f} ({wall:.1f} wall) | {msg} |")  # fmt: skip
        print(row, flush=True)
        rows.append(row)
        raw.append({"file": rel, "derived": derived, "set": sets, "rc": rc, "wall_s": wall,
                    "verdict": v})  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(raw, indent=1, default=str))


def controls(args: argparse.Namespace) -> None:
    raw = []
    print("| control | file | --set | expected | got | ok | message |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for what, rel, edit, sets, expected in CONTROLS:
            name = Path(rel).name
            src = (args.candidates / name).read_text()
            if edit is not None:
                assert edit[0] in src, (what, "edit does not apply")
                src = src.replace(edit[0], edit[1], 1)
            (Path(tmp) / name).write_text(src)
            v, wall, rc = gate(args.folder, Path(tmp), rel, sets)
            got, msg = summary(v, rc)
            setstr = " ".join(f"{k}={val}" for k, val in sets.items())
            ok = "yes" if got == expected else "NO"
            print(f"| {what} | {name} | `{setstr}` | {expected} | {got} | {ok} | {msg} |",
                  flush=True)  # fmt: skip
            raw.append({"control": what, "file": rel, "set": sets, "rc": rc, "wall_s": wall,
                        "expected": expected, "got": got, "verdict": v})  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(raw, indent=1, default=str))


if __name__ == "__main__":
    main()
