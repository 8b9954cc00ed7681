"""Built-in backends: OpenAI and OpenAI-compatible servers, Anthropic, and a scripted backend
for tests. Each registers through registry.register_backend like any plugin."""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from klineage.errors import UsageError
from klineage.llm.base import Completion, LLMError, Message
from klineage.llm.registry import register_backend


class OpenAIChat:
    """Any server that speaks the chat-completions protocol, through the official client."""

    def __init__(self, model: str, base_url: str | None, api_key: str) -> None:
        try:
            import openai
        except ImportError as e:
            raise UsageError(
                "the openai backend needs the llm extra: pip install 'klineage[llm]'"
            ) from e
        self._openai = openai
        self.model = model
        self.base_url = base_url
        self.name = f"openai-compatible:{base_url}:{model}" if base_url else f"openai:{model}"
        self.client: Any = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)

    def probe(self, timeout_s: float = 10.0) -> None:
        """Fail before any work if the server cannot be reached (GET /models). A server that
        answers with an HTTP error is reachable; the first completion will say more."""
        o = self._openai
        try:
            self.client.models.list(timeout=timeout_s)
        except o.APIConnectionError as e:
            raise UsageError(
                f"--llm {self.name}: cannot reach {self.base_url or 'the OpenAI API'} ({e}); no work was started"
            ) from e
        except o.APIStatusError:
            pass

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 4096,
        temperature: float = 0.2,
        timeout_s: float = 120.0,
    ) -> Completion:
        o = self._openai
        where = self.base_url or "the OpenAI API"
        try:
            r = self.client.chat.completions.create(
                model=self.model, messages=[{"role": m.role, "content": m.content} for m in messages],
                max_tokens=max_tokens, temperature=temperature, timeout=timeout_s,
            )  # fmt: skip
        except o.APITimeoutError as e:
            raise LLMError(f"{where}: no reply within {timeout_s:g} s") from e
        except o.APIConnectionError as e:
            raise LLMError(f"cannot reach {where}: {e}") from e
        except o.APIStatusError as e:
            raise LLMError(f"{where} answered HTTP {e.status_code}: {str(e)[:300]}") from e
        if not r.choices:
            raise LLMError(f"{where} returned no choices")
        usage = r.usage
        return Completion(
            text=r.choices[0].message.content or "", model=r.model or self.model,
            tokens_in=usage.prompt_tokens if usage else 0, tokens_out=usage.completion_tokens if usage else 0,
        )  # fmt: skip


class AnthropicChat:
    def __init__(self, model: str, api_key: str) -> None:
        try:
            import anthropic
        except ImportError as e:
            raise UsageError(
                "the anthropic backend needs the llm extra: pip install 'klineage[llm]'"
            ) from e
        self._anthropic = anthropic
        self.model = model
        self.name = f"anthropic:{model}"
        self.client: Any = anthropic.Anthropic(api_key=api_key, max_retries=0)

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 4096,
        temperature: float = 0.2,
        timeout_s: float = 120.0,
    ) -> Completion:
        a = self._anthropic
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat: list[Any] = [
            {"role": m.role, "content": m.content} for m in messages if m.role != "system"
        ]
        try:
            r = self.client.messages.create(
                model=self.model,
                system=system or a.NOT_GIVEN,
                messages=chat,
                max_tokens=max_tokens,
                temperature=temperature,
                timeout=timeout_s,
            )
        except a.APITimeoutError as e:
            raise LLMError(f"Anthropic API: no reply within {timeout_s:g} s") from e
        except a.APIConnectionError as e:
            raise LLMError(f"cannot reach the Anthropic API: {e}") from e
        except a.APIStatusError as e:
            raise LLMError(f"Anthropic API answered HTTP {e.status_code}: {str(e)[:300]}") from e
        text = "".join(getattr(b, "text", "") for b in r.content)
        return Completion(
            text=text,
            model=r.model,
            tokens_in=r.usage.input_tokens,
            tokens_out=r.usage.output_tokens,
        )


class ScriptedBackend:
    """Replies queued in advance (strings, or exceptions to raise), for tests and demos."""

    name = "scripted"

    def __init__(self) -> None:
        self.replies: deque[str | Exception] = deque()
        self.prompts: list[list[Message]] = []

    def enqueue(self, replies: list[str | Exception]) -> ScriptedBackend:
        self.replies.extend(replies)
        return self

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 4096,
        temperature: float = 0.2,
        timeout_s: float = 120.0,
    ) -> Completion:
        self.prompts.append(list(messages))
        if not self.replies:
            raise LLMError("scripted backend: no reply queued")
        reply = self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        return Completion(
            text=reply,
            model="scripted",
            tokens_in=sum(len(m.content.split()) for m in messages),
            tokens_out=len(reply.split()),
        )


def _key(var: str, what: str) -> str:
    key = os.environ.get(var, "")
    if not key:
        raise UsageError(f"{what} needs an API key: set {var} (no work was started)")
    return key


@register_backend("openai")
def _openai(model: str) -> OpenAIChat:
    if not model:
        raise UsageError("--llm openai:MODEL: name a model, e.g. openai:gpt-4.1")
    return OpenAIChat(
        model, os.environ.get("OPENAI_BASE_URL") or None, _key("OPENAI_API_KEY", "--llm openai")
    )


@register_backend("openai-compatible")
def _compatible(rest: str) -> OpenAIChat:
    url, sep, model = rest.rpartition(":")
    if not sep or not url.startswith(("http://", "https://")) or not model:
        raise UsageError(
            f"--llm openai-compatible:{rest}: expected openai-compatible:URL:MODEL, e.g. openai-compatible:http://localhost:8000/v1:Qwen2.5-Coder"
        )
    # Local servers (vLLM, Ollama, llama.cpp) usually take any key.
    return OpenAIChat(
        model,
        url,
        os.environ.get("KLINEAGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY") or "none",
    )


@register_backend("anthropic")
def _anthropic(model: str) -> AnthropicChat:
    if not model:
        raise UsageError("--llm anthropic:MODEL: name a model")
    return AnthropicChat(model, _key("ANTHROPIC_API_KEY", "--llm anthropic"))


@register_backend("scripted")
def _scripted(_: str) -> ScriptedBackend:
    return ScriptedBackend()
