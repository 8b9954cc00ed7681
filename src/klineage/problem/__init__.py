"""Load KernelBench problems; resolve regimes; make inputs."""

from klineage.problem.loader import (
    Problem,
    load_problem,
    parse_source,
)

__all__ = ["Problem", "load_problem", "parse_source"]
