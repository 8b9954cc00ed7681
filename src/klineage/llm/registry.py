"""Choose a backend from a spec: `openai:MODEL`, `anthropic:MODEL`,
`openai-compatible:URL:MODEL` (vLLM, SGLang, Ollama, llama.cpp servers) or `scripted`.

Backends register with @register_backend(SCHEME); the built-ins use the same hook. A missing key
is an error here, before any work starts.
"""

from __future__ import annotations

from collections.abc import Callable

from klineage.errors import UsageError
from klineage.llm.base import LLMBackend

Factory = Callable[[str], LLMBackend]  # the part of the spec after "SCHEME:"
_BACKENDS: dict[str, Factory] = {}


def register_backend(scheme: str) -> Callable[[Factory], Factory]:
    def deco(factory: Factory) -> Factory:
        _BACKENDS[scheme] = factory
        return factory

    return deco


def backend_schemes() -> list[str]:
    import klineage.llm.builtin  # noqa: F401 - registers the built-ins

    return sorted(_BACKENDS)


def get_backend(spec: str) -> LLMBackend:
    """The backend a `--llm` spec names; UsageError for an unknown scheme or a malformed spec."""
    schemes = backend_schemes()
    scheme, _, rest = spec.partition(":")
    if scheme not in _BACKENDS:
        raise UsageError(
            f"--llm {spec}: unknown backend {scheme!r}; known: {', '.join(schemes)} (e.g. openai:gpt-4.1, openai-compatible:http://localhost:8000/v1:MODEL)"
        )
    return _BACKENDS[scheme](rest)


def connect(spec: str) -> LLMBackend:
    """The backend a spec names, checked before any work: a missing key (UsageError from the
    factory) or an unreachable server (a backend's `probe`, when it has one) fails here."""
    backend = get_backend(spec)
    probe = getattr(backend, "probe", None)
    if probe is not None:
        probe()
    return backend
