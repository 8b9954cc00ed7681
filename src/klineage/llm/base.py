"""The LLM backend interface: messages in, a completion with token counts out.

Backends register through one hook (registry.register_backend), built-ins included, in the
manner of simonw/llm's plugins. Every call can be logged (log.LoggedBackend) so a run replays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from klineage.errors import KLineageError


class LLMError(KLineageError):
    """A backend could not produce a completion: unreachable server, missing key, timeout."""


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str


@dataclass
class Completion:
    text: str
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    raw: dict[str, object] = field(default_factory=dict)


class LLMBackend(Protocol):
    name: str

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 4096,
        temperature: float = 0.2,
        timeout_s: float = 120.0,
    ) -> Completion:
        """One chat completion; raises LLMError with a message a user can act on."""
        ...
