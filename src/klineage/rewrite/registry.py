"""The registered rewrite passes, by name. A pass registers itself with @register."""

from __future__ import annotations

from klineage.rewrite.base import RewritePass

_PASSES: dict[str, type[RewritePass]] = {}


def register(cls: type[RewritePass]) -> type[RewritePass]:
    if cls.NAME in _PASSES and _PASSES[cls.NAME] is not cls:
        raise ValueError(f"two rewrite passes are named {cls.NAME!r}")
    _PASSES[cls.NAME] = cls
    return cls


def _load_builtins() -> None:
    # Importing the package imports every pass module, each of which registers itself.
    import klineage.rewrite.passes  # noqa: F401


def all_passes() -> dict[str, RewritePass]:
    _load_builtins()
    return {name: cls() for name, cls in sorted(_PASSES.items())}


def get_pass(name: str) -> RewritePass:
    passes = all_passes()
    if name not in passes:
        from klineage.errors import UsageError

        raise UsageError(f"no rewrite pass named {name!r}; known: {', '.join(passes)}")
    return passes[name]
