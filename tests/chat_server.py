"""A local HTTP server that speaks the chat-completions protocol, for tests of the real openai
client. Replies come from `server.replies` (a queue the test fills) when it is not empty, else
by the last user message: "fail" -> HTTP 500, "slow" -> a 3 s delay, anything else is echoed.

Queue items: a string (the reply), ("sleep", seconds, text) for a reply that comes too late,
or ("status", code) for an HTTP error.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def do_GET(self) -> None:  # GET /v1/models: the reachability probe
        self._send(
            200,
            {
                "object": "list",
                "data": [{"id": "tiny-model", "object": "model", "created": 0, "owned_by": "test"}],
            },
        )

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        prompt = body["messages"][-1]["content"]
        item: Any = self.server.replies.popleft() if self.server.replies else None
        if item is None:
            if prompt == "fail":
                item = ("status", 500)
            elif prompt == "slow":
                item = ("sleep", 3, f"echo: {prompt}")
            else:
                item = f"echo: {prompt}"
        if isinstance(item, tuple) and item[0] == "status":
            self._send(item[1], {"error": {"message": "model crashed", "type": "server_error"}})
            return
        if isinstance(item, tuple) and item[0] == "sleep":
            time.sleep(item[1])
            item = item[2]
        self._send(200, {
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": item}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        })  # fmt: skip

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def log_message(self, *args: object) -> None:
        pass


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: deque[Any] = deque()
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    httpd = ChatServer()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
