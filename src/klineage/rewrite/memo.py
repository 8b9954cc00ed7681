"""Remembered analyses: a pass's sites per source text, and per-node facts per node identity.

A walk, a probe and an optimize loop ask every pass for its sites on the same few kernels again
and again (retrieval, then the materializer, then the report), and several passes analyse the
same launch the same way. LibCST does not make that cheap: each traversal rebuilds what it
visits, so a pass costs about 0.03 s per kernel on a 2-core machine even when it finds nothing
(23 passes x 28 held-out kernels: 20.7 s, benchmarks/sites_cost.py).
Sites depend only on the pass and the source text (passes hold no state), so they are
remembered per (pass type, direction, source) and a caller gets its own copies: a Site is
frozen, but its params are a dict a caller may change.

Facts computed per node (positions, statement lists) are remembered per node *identity* in an
`IdentityMemo`, which keeps the node alive so that its id cannot be reused by another object.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

# (pass, direction, source) entries kept: a kernel file is a few KB and its sites fewer, so
# 4096 of them (about 80 kernels for every pass both ways) stay small.
SITES_REMEMBERED = 4096


class IdentityMemo(Generic[K, V]):
    """value = compute(key), remembered per key identity for the last `size` keys.

    The key itself is held beside its value, so its id stays its own while remembered."""

    def __init__(self, compute: Callable[[K], V], size: int = 64) -> None:
        self._compute = compute
        self._size = size
        self._items: OrderedDict[int, tuple[K, V]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, key: K) -> V:
        with self._lock:
            hit = self._items.get(id(key))
            if hit is not None and hit[0] is key:
                self._items.move_to_end(id(key))
                return hit[1]
        value = self._compute(key)
        with self._lock:
            self._items[id(key)] = (key, value)
            self._items.move_to_end(id(key))
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_sites: OrderedDict[tuple[type, str, str], list[Any]] = OrderedDict()
_sites_lock = threading.Lock()
_enabled = True


def set_enabled(on: bool) -> bool:
    """Turn remembering sites on or off (benchmarks time both); returns the previous setting."""
    global _enabled
    before, _enabled = _enabled, on
    return before


def clear() -> None:
    with _sites_lock:
        _sites.clear()


def remember_sites(method: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """Wrap a pass's `backward_sites` / `forward_sites`: the sites of a source already seen by
    that pass type come from memory, as deep copies. Only (self, source) calls are remembered."""

    if getattr(method, "__remembered__", False):
        return method

    @functools.wraps(method)
    def wrapper(self: Any, source: str, *args: Any, **kwargs: Any) -> list[Any]:
        if args or kwargs or not _enabled or not isinstance(source, str):
            return method(self, source, *args, **kwargs)
        key = (type(self), method.__name__, source)
        with _sites_lock:
            hit = _sites.get(key)
            if hit is not None:
                _sites.move_to_end(key)
        if hit is None:
            hit = method(self, source)
            with _sites_lock:
                _sites[key] = hit
                while len(_sites) > SITES_REMEMBERED:
                    _sites.popitem(last=False)
        return copy.deepcopy(hit)

    wrapper.__remembered__ = True  # type: ignore[attr-defined]
    return wrapper
