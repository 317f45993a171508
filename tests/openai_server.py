"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests (no mocks of the openai client).

Serves `POST /v1/chat/completions` (text and image_url parts), `POST /v1/images/generations`
(`b64_json` PNGs), `POST /v1/images/edits` (multipart image + mask; a canned `b64_json` PNG, `edit_png`)
and `GET /v1/models`. A test steers it through attributes of the server object:

- `faults`: a list consumed one per request, front first: "429", "500", "hang" (sleep `hang_s` before
  answering, past the client's time-out), "malformed" (200 with a body that is not JSON), "no-choices" (200 with a
  chat answer whose `choices` list is empty), "bad-image" (an image answer whose `b64_json` is base64 of bytes
  that are no image), "401", and the slow and strange deliveries of tests/slow_server.py ("silent",
  "trickle:D", "slow-headers:D", "partial-hang", "partial-close", "html", "html-json", "html-502");
  None or "ok" answers normally;
- `responder(body) -> str`: the chat answer for a parsed request body (default: `default_answer`);
- `delay_s`: sleep before every answer (to kill a client mid-run; past `timeout_s`: an endpoint that takes
  connections but does not answer in time);
- `usage`: (prompt_tokens, completion_tokens) reported for every chat answer;
- `refuse(body) -> bool`: chat requests it picks get a refusal (finish_reason content_filter;
  default: the text contains "REFUSE"); an image prompt containing "FORBIDDEN" gets a 400
  `content_policy_violation`.

Every request is kept in `requests` (path, lower-cased headers, parsed body, `at`: time.monotonic() on arrival).
The fixture `openai_server` is
registered for every test by tests/conftest.py: a test names it as a parameter.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import slow_server

API_KEY = "sk-test-vhmine-NEVER-ON-DISK-7f3a9c"


def chat_text(body: dict) -> str:
    """All text parts of the last user message of a chat request."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p.get("type") == "text")


def chat_images(body: dict) -> list[str]:
    """sha256 of every image sent in a chat request (decoded from its data URL)."""
    out = []
    for m in body["messages"]:
        if isinstance(m["content"], list):
            for p in m["content"]:
                if p.get("type") == "image_url":
                    url = p["image_url"]["url"]
                    out.append(hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest())
    return out


def default_answer(body: dict) -> str:
    text = chat_text(body)
    if "correct, incorrect or unclear" in text:
        return "incorrect"
    if re.search(r"yes or no", text, re.I):
        return "Yes, there are."
    return f"An answer to: {text[:60]}"


def png_bytes(seed: int, size: int = 32) -> bytes:
    from PIL import Image

    h = hashlib.sha256(str(seed).encode()).digest()
    img = Image.new("RGB", (size, size), tuple(h[:3]))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.faults: list[str | None] = []
        self.responder: Callable[[dict], str] = default_answer
        self.refuse: Callable[[dict], bool] = lambda body: "REFUSE" in chat_text(body)
        self.delay_s = 0.0
        self.hang_s = 3.0
        self.usage = (100, 20)
        self.api_key = API_KEY
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.images_made = 0
        self.inflight = 0
        self.max_inflight = 0  # the most requests handled at once

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            self.requests.clear()
        self.responder = default_answer
        self.refuse = lambda body: "REFUSE" in chat_text(body)
        self.delay_s = 0.0
        self.usage = (100, 20)

    def chats(self) -> list[dict]:
        with self.lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def next_fault(self) -> str | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI
    protocol_version = "HTTP/1.1"
    slow: str | None = None  # this request's fault from tests/slow_server.py, if any

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, payload, headers: dict | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        if self.slow:  # this request's answer goes out slowly or strangely
            return slow_server.deliver(self, self.slow, status, data)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (time-out test)
            pass

    def _error(self, status: int, message: str, code: str, etype: str = "invalid_request_error", headers=None) -> None:
        self._send(status, {"error": {"message": message, "type": etype, "code": code, "param": None}}, headers)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "fake-vlm", "object": "model", "owned_by": "test"}]})

    def do_POST(self) -> None:
        srv = self.server
        with srv.lock:
            srv.inflight += 1
            srv.max_inflight = max(srv.max_inflight, srv.inflight)
        try:
            self._post()
        finally:
            with srv.lock:
                srv.inflight -= 1

    def _post(self) -> None:
        srv = self.server
        self.slow = None
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = (
                _multipart(self.headers.get("Content-Type"), raw)
                if self.path.endswith("/images/edits")
                else json.loads(raw)
            )
        except ValueError:
            return self._error(400, "body is not JSON", "bad_json")
        with srv.lock:
            srv.requests.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                    "at": time.monotonic(),
                }
            )
        presented = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if presented != srv.api_key:  # echoes the key it got, worse than OpenAI (which masks most of it)
            return self._error(
                401, f"Incorrect API key provided: {presented}", "invalid_api_key", "authentication_error"
            )
        fault = srv.next_fault()
        if slow_server.is_slow(fault):
            self.slow, fault = fault, None
        if srv.delay_s:
            time.sleep(srv.delay_s)
        if fault == "429":
            return self._error(429, "Rate limit reached", "rate_limit_exceeded", "requests", {"Retry-After": "0"})
        if fault == "500":
            return self._error(500, "The server had an error", "server_error", "server_error")
        if fault == "401":
            return self._error(401, "Incorrect API key provided", "invalid_api_key", "authentication_error")
        if fault == "hang":
            time.sleep(srv.hang_s)
        if fault == "malformed":
            return self._send(200, b'{"id": "chatcmpl-x", "choices": [ {"message": ')
        if fault == "no-choices":
            return self._send(
                200,
                {
                    "id": "chatcmpl-x",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [],
                },
            )
        if self.path.endswith("/images/edits"):
            return self._edit(body, fault)
        if fault == "bad-image" and self.path.endswith("/images/generations"):
            return self._send(
                200, {"created": int(time.time()), "data": [{"b64_json": base64.b64encode(b"no image").decode()}]}
            )
        if self.path.endswith("/chat/completions"):
            return self._chat(body)
        if self.path.endswith("/images/generations"):
            return self._image(body)
        return self._error(404, f"no route {self.path}", "not_found")

    def _chat(self, body: dict) -> None:
        srv = self.server
        text = chat_text(body)
        refused = srv.refuse(body)
        answer = None if refused else srv.responder(body)
        msg = {"role": "assistant", "content": answer, "refusal": "I can't help with that." if refused else None}
        pt, ct = srv.usage
        self._send(
            200,
            {
                "id": "chatcmpl-" + hashlib.sha256(text.encode()).hexdigest()[:12],
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [{"index": 0, "message": msg, "finish_reason": "content_filter" if refused else "stop"}],
                "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
            },
        )

    def _image(self, body: dict) -> None:
        srv = self.server
        prompt = body.get("prompt", "")
        if "FORBIDDEN" in prompt:
            return self._error(
                400, "Your request was rejected as a result of our safety system.", "content_policy_violation"
            )
        with srv.lock:
            srv.images_made += 1
            seed = srv.images_made  # a new picture per request, as a real model draws
        self._send(
            200,
            {
                "created": int(time.time()),
                "data": [
                    {
                        # srv.image_png: one picture for every request (a model that draws the same twice)
                        "b64_json": base64.b64encode(getattr(srv, "image_png", None) or png_bytes(seed)).decode(),
                        "revised_prompt": f"revised: {prompt[:40]}",
                    }
                ],
            },
        )

    def _edit(self, body: dict, fault: str | None) -> None:
        """`/v1/images/edits`: a canned PNG (`srv.edit_png`, default a flat magenta picture of 40x24 px, so the
        client must fit it back to its image), or a prompt with FORBIDDEN refused as the generator does."""
        if "FORBIDDEN" in body.get("prompt", ""):
            return self._error(
                400, "Your request was rejected as a result of our safety system.", "content_policy_violation"
            )
        if "image" not in body or "mask" not in body:
            return self._error(400, "image and mask are required", "missing_file")
        png = getattr(self.server, "edit_png", None) or _flat_png((255, 0, 255), (40, 24))
        data = b"no image" if fault == "bad-image" else png
        self._send(200, {"created": int(time.time()), "data": [{"b64_json": base64.b64encode(data).decode()}]})


def _flat_png(color: tuple, size: tuple) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def _multipart(content_type: str | None, raw: bytes) -> dict:
    """A multipart/form-data body as {field: text, or bytes for a file part}; ValueError if it is none."""
    from email.parser import BytesParser
    from email.policy import HTTP

    if not (content_type or "").startswith("multipart/form-data"):
        raise ValueError("not multipart/form-data")
    msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    out: dict = {}
    for part in msg.iter_parts():
        name, data = part.get_param("name", header="content-disposition"), part.get_payload(decode=True)
        out[name] = data if part.get_filename() else data.decode()
    return out


def start_server() -> FakeOpenAI:
    srv = FakeOpenAI()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def openai_server(monkeypatch):
    """A running FakeOpenAI with OPENAI_API_KEY / OPENAI_BASE_URL pointing at it."""
    srv = start_server()
    monkeypatch.setenv("OPENAI_API_KEY", srv.api_key)
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
    yield srv
    srv.shutdown()
    srv.server_close()
