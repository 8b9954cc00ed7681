"""LLM backends: the registry, the scripted backend, logging and replay, and the real openai
client against a local HTTP server that speaks the chat-completions protocol (127.0.0.1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from klineage.config import env_scope
from klineage.errors import UsageError
from klineage.llm import LLMError, Message, backend_schemes, get_backend
from klineage.llm.log import LoggedBackend, replay
from tests.chat_server import chat_server, free_port

pytest.importorskip("openai")


@pytest.fixture
def server() -> Iterator[str]:
    with chat_server() as httpd:
        yield httpd.url


def test_builtins_register_through_the_hook_and_bad_specs_are_usage_errors() -> None:
    assert {"openai", "openai-compatible", "anthropic", "scripted"} <= set(backend_schemes())
    with pytest.raises(UsageError, match="unknown backend 'gpt'"):
        get_backend("gpt:4")
    with pytest.raises(UsageError, match="expected openai-compatible:URL:MODEL"):
        get_backend("openai-compatible:localhost:8000")


def test_a_missing_key_is_an_error_before_any_work() -> None:
    with env_scope(OPENAI_API_KEY=None), pytest.raises(UsageError, match="set OPENAI_API_KEY"):
        get_backend("openai:gpt-4.1")
    with (
        env_scope(ANTHROPIC_API_KEY=None),
        pytest.raises(UsageError, match="set ANTHROPIC_API_KEY"),
    ):
        get_backend("anthropic:claude")


def test_the_openai_client_talks_to_a_local_chat_completions_server(
    server: str, tmp_path: Path
) -> None:
    llm = LoggedBackend(
        get_backend(f"openai-compatible:{server}:tiny-model"), tmp_path / "llm.jsonl"
    )
    c = llm.complete([Message("system", "be brief"), Message("user", "hello")], timeout_s=10)
    assert (
        c.text == "echo: hello"
        and c.model == "tiny-model"
        and (c.tokens_in, c.tokens_out) == (7, 3)
    )
    with pytest.raises(LLMError, match="answered HTTP 500"):
        llm.complete([Message("user", "fail")], timeout_s=10)
    with pytest.raises(LLMError, match="no reply within 1 s"):
        llm.complete([Message("user", "slow")], timeout_s=1)
    log = [json.loads(line) for line in (tmp_path / "llm.jsonl").read_text().splitlines()]
    assert [e.get("reply") for e in log] == ["echo: hello", None, None]
    assert "HTTP 500" in log[1]["error"] and log[0]["messages"][0] == {
        "role": "system",
        "content": "be brief",
    }
    assert replay(tmp_path / "llm.jsonl") == ["echo: hello"]


def test_an_unreachable_server_is_a_clear_error() -> None:
    llm = get_backend(f"openai-compatible:http://127.0.0.1:{free_port()}/v1:m")
    with pytest.raises(LLMError, match="cannot reach http://127.0.0.1"):
        llm.complete([Message("user", "hi")], timeout_s=5)


def test_the_scripted_backend_replays_queued_replies_and_errors() -> None:
    llm = get_backend("scripted")
    llm.enqueue(["first", LLMError("boom")])  # type: ignore[attr-defined]
    assert llm.complete([Message("user", "a b c")]).text == "first"
    with pytest.raises(LLMError, match="boom"):
        llm.complete([Message("user", "x")])
    with pytest.raises(LLMError, match="no reply queued"):
        llm.complete([Message("user", "x")])


def test_the_anthropic_backend_passes_temperature_only_where_the_sdk_takes_it() -> None:
    """anthropic 2.x's messages.create has no `temperature` (passing it is a TypeError);
    older SDKs take it. Both are called with what they accept."""
    pytest.importorskip("anthropic")
    from types import SimpleNamespace

    from klineage.llm.builtin import AnthropicChat

    reply = SimpleNamespace(
        content=[SimpleNamespace(text="ok")],
        model="claude-x",
        usage=SimpleNamespace(input_tokens=3, output_tokens=1),
    )
    seen: list[dict] = []

    def new_sdk(*, model, messages, max_tokens, system=None, timeout=None):
        seen.append({"model": model})
        return reply

    def old_sdk(*, model, messages, max_tokens, temperature, system=None, timeout=None):
        seen.append({"temperature": temperature})
        return reply

    llm = AnthropicChat("claude-x", "key")
    for create in (new_sdk, old_sdk):
        llm.client = SimpleNamespace(messages=SimpleNamespace(create=create))
        assert llm.complete([Message("user", "hi")], temperature=0.3).text == "ok"
    assert seen == [{"model": "claude-x"}, {"temperature": 0.3}]
