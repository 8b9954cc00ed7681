"""The card's own ceilings, measured now (1 GiB bf16 copy, 8192^3 bf16 matmul), for turning a
% of floor into this card's: the gate's floor uses the H200's ceilings on every card unless
KLINEAGE_COPY_BYTES_PER_S / KLINEAGE_MATMUL_FLOPS_PER_S say otherwise (docs/benchmarks.md
"The floor on an H100").

    python3 benchmarks/card_ceilings.py > ceilings.json          # on the GPU
    eval "$(python3 benchmarks/card_ceilings.py --exports ceilings.json)"   # the gate uses them
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if argv[:1] == ["--exports"] and len(argv) == 2:
        c = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        print(f"export KLINEAGE_COPY_BYTES_PER_S={float(c['copy_bytes_per_s']):.6g}")
        print(f"export KLINEAGE_MATMUL_FLOPS_PER_S={float(c['bf16_matmul_flops_per_s']):.6g}")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import measure_ceilings

    row = {"card": torch.cuda.get_device_name(0), **measure_ceilings()}
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
