"""Why the column softmax's exp2 form fails the gate on a GPU (issue 16, 2026-12-06).

klineage's exp2_log2e turned the online column softmax's `tl.exp(a - m)` into
`tl.exp2(a * LOG2E - m * LOG2E)` (log2(e) distributed, one FFMA an element); on an H100 the gate
refused it on tall_fp16's case of 32x logits: an output of 1.041 where float64 says 0.9988. The
interpreter puts the same file within 2e-4. This runs, on one input, the exp form (trial 2 of the
store), the distributed exp2 form (trial 5) and the factored form `tl.exp2((a - m) * LOG2E)`,
and prints each one's error against float64.

    python benchmarks/exp2_forms.py SEARCH_DB [RUN_PREFIX] [SEQ_EXP] [SEQ_EXP2]
    (defaults: the call-1 store of 2026-12-06c, its column softmax run, trials 2 and 5)
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import sys
import tempfile
from pathlib import Path

import torch

LOG2E = r"1\.4426950408889634"


def factored(src: str) -> str:
    """`A * C - B * C` inside tl.exp2(...) -> `(A - B) * C`."""
    pat = re.compile(rf"tl\.exp2\(([^()]*?(?:\([^()]*\)[^()]*?)*) \* {LOG2E} - (\w+) \* {LOG2E}\)")
    return pat.sub(lambda m: f"tl.exp2(({m.group(1)} - {m.group(2)}) * 1.4426950408889634)", src)


def load(src: str, name: str):
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ModelNew()


def main() -> None:
    db = (
        sys.argv[1]
        if len(sys.argv) > 1
        else "benchmarks/results/issue16-2026-12-06c/call1-h100/search.db"
    )
    run = sys.argv[2] if len(sys.argv) > 2 else "8bfd"
    seqs = [int(a) for a in sys.argv[3:5]] or [2, 5]
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    get = "select candidate from trials where run_id like ? and seq = ?"
    exp_src, exp2_src = (con.execute(get, (run + "%", s)).fetchone()[0] for s in seqs)
    forms = {"exp": exp_src, "exp2 distributed": exp2_src, "exp2 factored": factored(exp2_src)}
    assert forms["exp2 factored"] != exp2_src, "no distributed exp2 to factor"
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    shape = (65536, 1536) if dev == "cuda" else (512, 8)
    torch.manual_seed(0)
    x = (32 * 3.0 * torch.randn(*shape)).to(torch.float16).to(dev)
    want = torch.softmax(x.double(), dim=0)
    for name, src in forms.items():
        y = load(src, re.sub(r"\W", "_", name))(x).double()
        err = (y - want).abs()
        worst = int(err.argmax())
        r, c = divmod(worst, shape[1])
        print(
            f"{name:17s} max abs err {err.max().item():.3g} at ({r}, {c}): got {y[r, c].item():.6g}, "
            f"float64 {want[r, c].item():.6g}; beyond 0.01: {int((err > 0.01).sum())}; "
            f"outputs over 1: {int((y > 1.0).sum())}"
        )


if __name__ == "__main__":
    main()
