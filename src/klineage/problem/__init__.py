"""Load KernelBench problems and candidate kernels; resolve regimes; make inputs."""

from klineage.problem.loader import (
    Candidate,
    Problem,
    load_candidate,
    load_problem,
    parse_source,
)

__all__ = ["Candidate", "Problem", "load_candidate", "load_problem", "parse_source"]
