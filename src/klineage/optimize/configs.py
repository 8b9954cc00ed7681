"""Which configs of a tunable kernel's space to time: what the experts used (klineage's prior).

A lifted kernel (rewrite/passes/tunables.py) has a space of hundreds or thousands of configs;
one gate call times at most `configs_per_call` of them. The klineage policy spends that share
on the configs nearest to the ones expert kernels of the same kind use: the tables and launch
values in the skills' exemplars (the experts' own code), matched by role (the M, N and K of a
matmul tile; elements per program otherwise) and by warps and stages. Baselines draw theirs at
random from the same space (tunables.draw), so the budget binds and the prior has to earn its
keep; the gate's sweep then measures which config is fastest per regime.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from klineage.rewrite.blocks import _is_block_name
from klineage.rewrite.launches import Launch
from klineage.skills.model import Skill

_ROLE_ALIASES = {"Q": "M", "T": "M", "KV": "N", "S": "N"}


def role(name: str) -> str:
    """BLOCK_SIZE_M / TILE_M / BLOCK_M -> M; Q_BLOCK -> M (attention queries); else X."""
    parts = [p for p in name.upper().replace("BLOCK", "_").replace("TILE", "_").split("_") if p]
    for p in (parts[-1:] + parts[:1]) if parts else []:
        if p in ("M", "N", "K"):
            return p
        if p in _ROLE_ALIASES:
            return _ROLE_ALIASES[p]
    return "X"


@dataclass(frozen=True)
class ExpertConfig:
    sizes: tuple[tuple[str, int], ...]  # role -> size
    warps: int | None
    stages: int | None
    dot: bool  # the expert's kernel multiplies tiles (tl.dot)
    source: str  # which skill's exemplar it came from
    scan: bool = False  # the expert's kernel scans (tl.cumsum, tl.associative_scan)

    @property
    def elements(self) -> int:
        return math.prod(v for _, v in self.sizes) if self.sizes else 0


def _int(node: ast.expr) -> int | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, int) else None


def _from_source(text: str, origin: str) -> list[ExpertConfig]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    dot = "tl.dot" in text or ".dot(" in text
    scan = scans(text)
    out: list[ExpertConfig] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = ast.unparse(node.func)
        pairs: list[tuple[str, int]] = []
        if callee.endswith("Config") and node.args and isinstance(node.args[0], ast.Dict):
            for k, v in zip(node.args[0].keys, node.args[0].values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _int(v):
                    pairs.append((k.value, _int(v) or 0))
        elif isinstance(node.func, ast.Subscript):  # a launch: kernel[grid](..., BLOCK=128)
            pairs = [
                (k.arg, _int(k.value) or 0)
                for k in node.keywords
                if k.arg and _is_block_name(k.arg) and _int(k.value)
            ]
        else:
            continue
        kw = {k.arg: _int(k.value) for k in node.keywords if k.arg in ("num_warps", "num_stages")}
        if not pairs and not kw:
            continue
        sizes = tuple(sorted((role(n), v) for n, v in pairs if _is_block_name(n)))
        # Triton's defaults where the expert wrote none: 4 warps (3 stages only matter in loops).
        out.append(
            ExpertConfig(sizes, kw.get("num_warps") or 4, kw.get("num_stages"), dot, origin, scan)
        )
    return out


def scans(text: str) -> bool:
    """Whether a kernel's source scans (its tile's cost is the scan's, not the load's)."""
    return any(f in text for f in ("tl.cumsum", "tl.cumprod", "associative_scan"))


def expert_configs(skills: list[Skill]) -> list[ExpertConfig]:
    """Every config and literal launch an expert wrote, from the skills' exemplars."""
    seen: set[str] = set()
    out: list[ExpertConfig] = []
    for s in skills:
        for text in (s.exemplar.after, str(s.rewrite.params.get("configs", ""))):
            if text and text not in seen:
                seen.add(text)
                out.extend(_from_source(text, s.name))
    return list(dict.fromkeys(out))


def _distance(c: dict[str, int], launch: Launch, e: ExpertConfig) -> float:
    mine: dict[str, int] = {}
    for t in launch.tunables:
        r = role(t.name)
        mine[r] = mine.get(r, 1) * c.get(t.name, t.value)
    theirs = dict(e.sizes)
    d = 0.0
    shared = [r for r in mine if r in theirs and r != "X"]
    if shared:
        d += sum(abs(math.log2(mine[r]) - math.log2(theirs[r])) for r in shared)
    elif mine and e.elements:  # the whole tile, with the sizes the launcher computes
        tile = math.prod(mine.values()) * math.prod(launch.fixed.values())
        d += abs(math.log2(tile) - math.log2(e.elements))
    if e.warps:
        d += abs(math.log2(c.get("num_warps", 4)) - math.log2(e.warps))
    if e.stages and "num_stages" in c:
        d += 0.5 * abs(c["num_stages"] - e.stages)
    return d


def nearest_configs(
    launch: Launch,
    experts: list[ExpertConfig],
    count: int,
    *,
    dot: bool,
    space: list[dict[str, int]] | None = None,
    scan: bool = False,
) -> tuple[list[dict[str, int]], str]:
    """The current config and the count - 1 configs of the space (launch.space() unless given)
    nearest to an expert's of the same kind (multiplying tiles, scanning them, or neither); and
    a note saying what they were matched to. Without one, the configs nearest the current one
    (what the structural pass chose): on the H100 (2026-12-07) the reverse cumsum's [4, CHUNK]
    scan ran 244-278 us at CHUNK 64-128 on its short and mid rows and 266-9394 us at 1024-4096,
    the tiles of the copy and reduction experts it had been matched to (trial 7's gate record
    in benchmarks/results/issue16-2026-12-07d/call2-h100/search.db)."""
    space = space if space is not None else launch.space()
    same = list(dict.fromkeys(e for e in experts if e.dot == dot and e.scan == scan and e.sizes))
    if not same:
        return _around(launch, space, count)
    # Round robin over the experts' configs: each in turn gets its nearest config not chosen
    # yet, so the share covers every expert's choice before a second neighbour of any.
    chosen = [space[0]]
    taken = {_key(space[0])}
    # Ties (the same tile in several shapes, a [ROWS, CHUNK] of 4096 as 16 x 256 or 4 x 1024)
    # go to the shape nearest the current one, every size moved a little rather than one a
    # lot: in space order, the first size's smallest value came first, so the reverse cumsum's
    # lifted rows and chunk got 16-column chunks of 64 to 1024 rows.
    current = space[0]
    queues = [
        sorted(space[1:], key=lambda c, e=e: (_distance(c, launch, e), _moved(c, current, launch)))  # type: ignore[misc]
        for e in same
    ]
    while len(chosen) < count and any(queues):
        for q in queues:
            while q and _key(q[0]) in taken:
                q.pop(0)
            if q and len(chosen) < count:
                taken.add(_key(q[0]))
                chosen.append(q.pop(0))
    names = sorted({e.source for e in same})
    return chosen, f"nearest of {len(space)} to {len(same)} expert configs ({', '.join(names[:4])})"


def _around(
    launch: Launch, space: list[dict[str, int]], count: int
) -> tuple[list[dict[str, int]], str]:
    """Without an expert of the kind: the current config's neighbourhood, what the structural
    pass chose. First every size from half to four times its value at the current warps and
    stages, nearest first; then the other warps and stages of the current sizes."""
    here = space[0]
    sizes = [t.name for t in launch.tunables]

    def near(c: dict[str, int]) -> bool:
        return all(0.5 <= c[n] / here[n] <= 4 for n in sizes) and all(
            c.get(k) == here.get(k) for k in ("num_warps", "num_stages")
        )

    shapes = sorted((c for c in space[1:] if near(c)), key=lambda c: _moved(c, here, launch))
    # the current sizes at other warps and stages, by the experts' distance to the current ones
    own = ExpertConfig((), here.get("num_warps"), here.get("num_stages"), False, "current")
    others = sorted(
        (c for c in space[1:] if all(c[n] == here[n] for n in sizes) and c not in shapes),
        key=lambda c: _distance(c, launch, own),
    )
    chosen = [here, *shapes, *others][: max(1, count)]
    return (
        chosen,
        f"no expert config of this kind: {len(chosen)} of {len(space)} around the current one",
    )


def _moved(c: dict[str, int], current: dict[str, int], launch: Launch) -> float:
    """How far a config's sizes are from the current ones: squared steps of two."""
    return sum(
        (math.log2(c.get(t.name, t.value)) - math.log2(current.get(t.name, t.value))) ** 2
        for t in launch.tunables
    )


def _key(c: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(c.items()))
