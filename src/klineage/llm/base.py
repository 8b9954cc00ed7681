"""The LLM backend interface: messages in, a completion with token counts out.

Backends register through one hook (registry.register_backend), built-ins included, in the
manner of simonw/llm's plugins. Every call can be logged (log.LoggedBackend) so a run replays.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Limits:
    """What one completion may take: reply tokens, sampling temperature, seconds to wait."""

    max_tokens: int
    temperature: float
    timeout_s: float


class LLMBackend(ABC):
    """A backend subclasses this (the built-ins too, as simonw/llm's models subclass llm.Model)
    and implements reply(); complete() is the one signature callers use, so its keywords and
    their defaults are written once for every backend."""

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
        return self.reply(messages, Limits(max_tokens, temperature, timeout_s))

    @abstractmethod
    def reply(self, messages: list[Message], limits: Limits) -> Completion:
        """complete() with its keywords in `limits`: what each backend implements."""
