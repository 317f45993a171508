"""Server behaviours slower or stranger than an answer, for the loopback server of tests/openai_server.py.

A test puts one of these in `FakeOpenAI.faults` (one per request, as the other faults) and the server delivers
that request's answer so (`deliver`, called by the handler where it would send the answer):

- "silent": reads the request and sends nothing, until the client goes away;
- "trickle:D": the headers at once, then the answer one byte at a time, spread over D seconds (D = 30: one
  byte every tenth of a second or so, never a read time-out, never an end);
- "slow-headers:D": the status line and headers one byte at a time over D seconds, then the answer;
- "partial-hang": headers saying the whole length, half the JSON, then nothing until the client goes away;
- "partial-close": headers saying the whole length, half the JSON, then the connection closed;
- "html": 200 with an HTML page (Content-Type text/html), as a captive portal or a web server's default page;
- "html-json": the same page sent as application/json;
- "html-502": 502 with an HTML page, as a proxy in front of a dead model server.

Reads nothing but the handler's socket; writes only to it. A behaviour that waits for the client stops when the
client closes its end (or after `WAIT_S`), so a client that abandons a request leaves no thread behind here.
"""

from __future__ import annotations

import select
import time

HTML = b"<html><head><title>Welcome</title></head><body><h1>It works!</h1><p>A web server, no model.</p></body></html>"
WAIT_S = 60.0  # the most a behaviour waits for a client that never goes away


def is_slow(fault: str | None) -> bool:
    name = (fault or "").split(":")[0]
    return name in (
        "silent",
        "trickle",
        "slow-headers",
        "partial-hang",
        "partial-close",
        "html",
        "html-json",
        "html-502",
    )


def deliver(handler, fault: str, status: int, data: bytes) -> None:
    """Send `data` (the answer the server would send with `status`) as `fault` says, on `handler`'s connection."""
    name, _, arg = fault.partition(":")
    handler.close_connection = True  # a strange answer is the connection's last
    try:
        if name == "silent":
            return _wait_for_close(handler)
        if name.startswith("html"):
            code, ctype = (502, "text/html") if name == "html-502" else (200, "text/html")
            if name == "html-json":
                ctype = "application/json"
            return _write(handler, _head(code, ctype, len(HTML)) + HTML)
        head = _head(status, "application/json", len(data))
        if name == "trickle":
            _write(handler, head)
            return _spread(handler, data, float(arg))
        if name == "slow-headers":
            _spread(handler, head, float(arg))
            return _write(handler, data)
        _write(handler, head + data[: len(data) // 2])
        if name == "partial-hang":
            _wait_for_close(handler)
    except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up: what a deadline does
        pass


def _head(status: int, ctype: str, length: int) -> bytes:
    reason = {200: "OK", 502: "Bad Gateway"}.get(status, "Status")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()


def _write(handler, data: bytes) -> None:
    handler.wfile.write(data)
    handler.wfile.flush()


def _spread(handler, data: bytes, seconds: float) -> None:
    """`data` one byte at a time, evenly over `seconds`; stops early when the client has gone."""
    step = seconds / max(1, len(data))
    start = time.monotonic()
    for i in range(len(data)):
        _write(handler, data[i : i + 1])
        pause = start + (i + 1) * step - time.monotonic()
        if pause > 0 and _closed(handler, pause):
            return


def _closed(handler, wait_s: float) -> bool:
    """Whether the client closed its end within `wait_s` seconds (EOF or reset on the connection)."""
    sock = handler.connection
    ready, _, _ = select.select([sock], [], [], wait_s)
    if not ready:
        return False
    try:
        return sock.recv(1024) == b""
    except OSError:
        return True


def _wait_for_close(handler) -> None:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end and not _closed(handler, min(0.5, end - time.monotonic())):
        pass
