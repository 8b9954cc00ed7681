"""LLM backends as plugins: one registration hook, built-ins registered through it."""

from klineage.llm.base import Completion, LLMBackend, LLMError, Message
from klineage.llm.registry import backend_schemes, connect, get_backend, register_backend

__all__ = [
    "Completion",
    "LLMBackend",
    "LLMError",
    "Message",
    "backend_schemes",
    "connect",
    "get_backend",
    "register_backend",
]
