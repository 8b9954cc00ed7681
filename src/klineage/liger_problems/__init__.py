"""Reference problems for Liger-Kernel ops the corpus has no problem for (klineage/liger.py)."""
