"""klineage: learn when GPU kernel optimizations pay off and are safe, from expert kernels."""

__version__ = "0.1.0"
