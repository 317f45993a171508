"""What may be recorded about a request: the endpoint without credentials, and error texts without keys.

Reads OPENAI_API_KEY (to mask it) and the endpoint's error bodies; writes nothing. The client builds
its error messages, and so the failures it records in the cache, from these texts: what failed is said
in words (`_describe`, `unreadable`: what came back), never as a library's class name.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

from vhmine.files import SECRET_PARAM as _SECRET_PARAM  # the credential query parameters (Azure's `code`, `sig`)
from vhmine.files import display_url

_DEFAULT_PORT = {"http": 80, "https": 443}


def safe_endpoint(base_url: str | None) -> str:
    """The endpoint without credentials: no user info, no key-like query parameters or path segments
    (`/sk-proj-.../v1`, or the segment after `/key/`), no fragment.

    What may be recorded, and what the request cache and probe's stored responses are keyed by: two
    spellings of one endpoint (host case, default port, trailing slash) give the same text.
    """
    from urllib.parse import parse_qsl, urlencode

    if not base_url:
        return "https://api.openai.com/v1"
    p = urlsplit(display_url(base_url.strip()))  # masked first: a password typed with `/` or `@` stays out
    scheme = p.scheme.lower()
    host = (p.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
    netloc = host + (f":{p.port}" if p.port and p.port != _DEFAULT_PORT.get(scheme) else "")
    query = sorted(
        (k, v)
        for k, v in parse_qsl(p.query, keep_blank_values=True)
        if not _SECRET_PARAM.search(k) and not _KEYLIKE.search(v)
    )
    return urlunsplit((scheme, netloc, _safe_path(p.path.rstrip("/")), urlencode(query), ""))


# a path segment that names the credential in the next one (`/api-key/XYZ/v1`)
_KEY_SEGMENT = re.compile(r"(?:api[-_]?)?(?:key|token|secret)|access[-_]token|apikey", re.I)


def _safe_path(path: str) -> str:
    out, after_key = [], False
    for seg in path.split("/"):
        out.append("***" if after_key and seg else _KEYLIKE.sub(_mask, seg))
        after_key = bool(_KEY_SEGMENT.fullmatch(seg))
    return "/".join(out)


def _error_body(err: Exception) -> dict:
    body = getattr(err, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    return body if isinstance(body, dict) else {}


# key shapes: OpenAI-style `sk-...` (and key-/token-, xAI, Perplexity, NVIDIA), Groq / Hugging Face /
# Replicate `gsk_` / `hf_` / `r8_`, Google `AIza...`; the mask keeps the prefix so a reader knows which
_KEYLIKE = re.compile(
    r"\b(?P<p>(?:sk|key|token|xai|pplx|nvapi)-)[A-Za-z0-9_*\-]{6,}"
    r"|\b(?P<q>(?:gsk|hf|r8)_)[A-Za-z0-9]{20,}|\b(?P<r>AIza)[0-9A-Za-z_\-]{30,}"
)


def _mask(m: re.Match) -> str:
    return (m.group("p") or m.group("q") or m.group("r")) + "***"


def scrub(text: str) -> str:
    """`text` with the API key, and anything shaped like a key, masked: for messages that get recorded."""
    key = os.environ.get("OPENAI_API_KEY")
    if key and len(key) >= 4:
        text = text.replace(key, "***")
    return _KEYLIKE.sub(_mask, text)


def _msg(err: Exception) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, str) and body.strip():  # an error status with a page, not an API error (a proxy's 502)
        return not_json(body)
    return scrub(str(_error_body(err).get("message") or getattr(err, "message", None) or err))[:300]


def _code(err: Exception) -> str | None:
    return getattr(err, "code", None) or _error_body(err).get("code")


def _describe(err: Exception | None, timeout_s: float | None = None) -> str:
    """What went wrong with a request, in words (never a library's class name): for the messages a user reads."""
    if err is None:
        return "unknown"
    status = getattr(err, "status_code", None)
    if status:
        return ("429 rate limited" if status == 429 else f"HTTP {status}") + f": {_msg(err)}"
    kind = type(err).__name__
    if kind in ("APITimeoutError", "RequestDeadline"):  # a read, or the whole attempt (vhmine.llm.deadline)
        return f"no answer within {timeout_s:g} s" if timeout_s else "no answer in time"
    if kind == "APIConnectionError":
        cause = re.sub(r"^\[Errno -?\d+\]\s*", "", str(err.__cause__ or "").strip())  # "[Errno 111] Connection refused"
        # refused or unresolved: never connected; else the connection broke mid-answer (a body cut short)
        never = "Connect" in type(err.__cause__).__name__ or not isinstance(err.__cause__, Exception)
        return ("could not connect" if never else "the connection broke") + (
            f" ({scrub(cause)[:120]})" if cause else ""
        )
    return scrub(str(err))[:300] or "unknown"


def unreadable(err: Exception) -> str:
    """What came back, for an answer that could not be read (`err` from parsing or checking it), in words."""
    import json

    if isinstance(err, json.JSONDecodeError):
        return not_json(err.doc)
    if type(err).__name__ == "APIResponseValidationError":
        return f"an answer not shaped as the API's ({_msg(err)[:120]})"
    if isinstance(err, (KeyError, TypeError)):
        return f"an answer missing a field ({scrub(str(err))[:120]})"
    return scrub(str(err))[:200]


def not_json(body: str) -> str:
    """What came back, for a body that is not JSON, in words (the words docs/eval.md quotes)."""
    body = body.strip()
    return f"a body that is not JSON ({_snippet(body)})" if body else "an empty body"


def _snippet(body: str, n: int = 60) -> str:
    """The start of a body, quoted, marked where it is cut."""
    body = scrub(" ".join(body.split()))
    return repr(body[:n]) + (f" ... {len(body)} characters" if len(body) > n else "")
