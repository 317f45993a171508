"""What may be recorded about a request: the endpoint without credentials, and error texts without keys.

Reads OPENAI_API_KEY (to mask it) and the endpoint's error bodies; writes nothing. The client builds
its error messages, and so the failures it records in the cache, from these texts.
"""

from __future__ import annotations

import os
import re
from typing import Optional
from urllib.parse import urlsplit, urlunsplit


def safe_endpoint(base_url: Optional[str]) -> str:
    """The endpoint without user info, query or fragment: what may be recorded."""
    if not base_url:
        return "https://api.openai.com/v1"
    p = urlsplit(base_url)
    host = p.hostname or ""
    netloc = host + (f":{p.port}" if p.port else "")
    return urlunsplit((p.scheme, netloc, p.path, "", ""))


def _error_body(err: Exception) -> dict:
    body = getattr(err, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    return body if isinstance(body, dict) else {}


_KEYLIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_*\-]{6,}")


def scrub(text: str) -> str:
    """`text` with the API key, and anything shaped like a key, masked: for messages that get recorded."""
    key = os.environ.get("OPENAI_API_KEY")
    if key and len(key) >= 4:
        text = text.replace(key, "***")
    return _KEYLIKE.sub(lambda m: m.group(1) + "-***", text)


def _msg(err: Exception) -> str:
    return scrub(str(_error_body(err).get("message") or getattr(err, "message", None) or err))[:300]


def _code(err: Exception) -> Optional[str]:
    return getattr(err, "code", None) or _error_body(err).get("code")


def _describe(err: Optional[Exception]) -> str:
    if err is None:
        return "unknown"
    status = getattr(err, "status_code", None)
    name = {429: "429 rate limited"}.get(status, f"HTTP {status}" if status else type(err).__name__)
    return f"{name}: {_msg(err)}" if status else name

