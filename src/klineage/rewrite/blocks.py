"""Block-size names and literals, shared by the passes that read or change them (block_size,
tunables' analysis in rewrite/launches.py, the config prior in optimize/configs.py)."""

from __future__ import annotations

import re

import libcst as cst

from klineage.rewrite.base import dotted

_UPPER = re.compile(r"BLOCK|TILE|ROWS")
_LOWER = re.compile(r"(block|tile)(_?size)?(_[a-z]{1,2})?")
_COUNT = re.compile(r"^(NUM|N)_|BLOCKS|TILES", re.IGNORECASE)


def _is_block_name(name: str) -> bool:
    bare = name.lstrip("_")
    if _COUNT.search(bare):
        return False
    return bool(_UPPER.search(bare) or _LOWER.fullmatch(bare))


def _literal(value: cst.BaseExpression) -> cst.Integer | None:
    if isinstance(value, cst.Integer):
        return value
    # BLOCK = tl.constexpr(128)
    if (
        isinstance(value, cst.Call)
        and dotted(value.func).split(".")[-1] == "constexpr"
        and len(value.args) == 1
        and isinstance(value.args[0].value, cst.Integer)
    ):
        return value.args[0].value
    return None


def _tile_counts(grid: cst.BaseExpression, block: int) -> list[tuple[cst.Integer, int]]:
    """Literals in a launch grid that count tiles of `block`: the divisor of `cdiv(n, 64)` or of
    `x // 64`, and the `63` of `(n + 63) // 64`. A block size changed at the launch alone left
    the grid at the old tile count (twice the programs, or half the elements covered)."""
    found: list[tuple[cst.Integer, int]] = []

    def integer(node: cst.BaseExpression, value: int) -> cst.Integer | None:
        if isinstance(node, cst.Integer) and int(node.evaluated_value) == value:
            return node
        return None

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func).split(".")[-1] == "cdiv" and len(node.args) == 2:
                hit = integer(node.args[1].value, block)
                if hit is not None:
                    found.append((hit, block))

        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if not isinstance(node.operator, cst.FloorDivide):
                return
            hit = integer(node.right, block)
            if hit is None:
                return
            found.append((hit, block))
            left = node.left
            if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Add):
                pad = integer(left.right, block - 1)
                if pad is not None:
                    found.append((pad, block - 1))

    grid.visit(V())
    return found
