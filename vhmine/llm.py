"""One way to reach models: OpenAI-compatible chat (with images) and image generation.

Used by probe, describe, generate and eval. Reads the API key from OPENAI_API_KEY and the endpoint
from `base_url` / OPENAI_BASE_URL at call time; the key is never written anywhere (not to the cache,
not to logs, not to error texts). Writes one SQLite file, the request cache (default
`data/llm-cache.db`, `--cache` / VHMINE_LLM_CACHE), which keeps every answer keyed by model, prompt,
image hashes and parameters, and every failure with its reason: a second run costs nothing and a
killed run resumes where it stopped.

    from vhmine.llm import LLM, LLMOptions, ChatRequest
    with LLM(LLMOptions(model="gpt-4o", max_cost=5.0)) as llm:
        ans = llm.chat(ChatRequest("Is there a dog?", images=[Path("a.png")]))   # raises LLMError
        for out in llm.chat_iter(requests):          # concurrent; outcomes as they finish
            out.index, out.ok, out.answer, out.status, out.reason

Images go as base64 data URLs, re-encoded and downscaled to stay under `max_image_bytes` (5 MB of
base64 by default); what was sent (sha256, size, format, action) is recorded in each answer.
Requests are retried on 429, 5xx, time-outs, dropped connections and unreadable answers, with
exponential back-off and full jitter, `max_retries` times at most. `max_cost` (USD, from the
reported token usage and `PRICES`, overridable by a JSON file) is checked before each request with an
estimate reserved for requests in flight, so spending stops short of the cap, cleanly.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import math
import os
import random
import re
import sqlite3
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence, Union
from urllib.parse import urlsplit, urlunsplit

from .errors import (
    CostCapError, InputError, LLMAuthError, LLMError, LLMMalformedError, LLMRefusalError, LLMUnavailableError,
)

log = logging.getLogger(__name__)

DEFAULT_CACHE = Path("data") / "llm-cache.db"
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # the API's limit on one image, counted on the base64 text
CACHE_VERSION = 1

# USD per million tokens ("input", "output") or per image ("image"). Public list prices as of 2025;
# they change: pass --prices FILE (same shape) to override or add models. Matched by longest prefix.
PRICES: dict[str, dict[str, float]] = {
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4-turbo": {"input": 10.00, "output": 30.00},
    "gpt-4-vision-preview": {"input": 10.00, "output": 30.00},
    "o4-mini": {"input": 1.10, "output": 4.40},
    "dall-e-3": {"image": 0.040},
    "dall-e-2": {"image": 0.020},
    "gpt-image-1": {"image": 0.042},
}
_IMAGE_TOKENS_GUESS = 1000  # tokens one image may cost, for the reservation before the answer is known


# --- options and records -------------------------------------------------------------------------

@dataclass(frozen=True)
class LLMOptions:
    """How to reach models; one object shared by every request of a run."""

    model: str  # the default model of requests that name none
    base_url: Optional[str] = None  # None: OPENAI_BASE_URL, else the OpenAI API
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 4
    retry_wait_s: float = 1.0  # the first back-off; doubled each retry, capped at max_wait_s, jittered
    max_wait_s: float = 30.0
    max_cost: Optional[float] = None  # USD; None: no cap
    prices: Optional[Path] = None  # JSON file {model: {"input": .., "output": .., "image": ..}}
    cache: Optional[Path] = None  # None: VHMINE_LLM_CACHE, else data/llm-cache.db
    max_image_bytes: int = MAX_IMAGE_BYTES
    temperature: float = 0.0
    max_tokens: int = 512
    progress: bool = True


@dataclass(frozen=True)
class ChatRequest:
    prompt: str
    images: Sequence[Union[Path, bytes]] = ()
    system: Optional[str] = None
    model: Optional[str] = None  # None: LLMOptions.model
    params: dict = field(default_factory=dict)  # extra create() arguments (seed, top_p, ...), part of the key


@dataclass(frozen=True)
class ImageRequest:
    prompt: str
    model: Optional[str] = None
    size: str = "1024x1024"
    variant: int = 0  # the n-th image of one prompt: part of the key, so N images are N requests
    params: dict = field(default_factory=dict)  # quality, style, ...


@dataclass(frozen=True)
class SentImage:
    """What was sent for one image (the original is identified by `sha256`)."""

    sha256: str
    sent_sha256: str
    mime: str
    width: int
    height: int
    bytes: int  # decoded size of what was sent
    action: str  # "as-is", "re-encoded" or "downscaled"


@dataclass(frozen=True)
class Answer:
    text: str
    model: str  # as asked; `served_model` is what the endpoint says answered
    key: str
    cost: float
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: Optional[str] = None
    served_model: Optional[str] = None
    images: tuple[SentImage, ...] = ()


@dataclass(frozen=True)
class ImageAnswer:
    png: bytes  # the image bytes as the endpoint sent them
    model: str
    key: str
    cost: float
    cached: bool
    revised_prompt: Optional[str] = None


@dataclass(frozen=True)
class Outcome:
    """One request's result in a batch: an answer, or the error that stopped it."""

    index: int
    answer: Optional[Union[Answer, ImageAnswer]] = None
    error: Optional[LLMError] = None

    @property
    def ok(self) -> bool:
        return self.answer is not None

    @property
    def status(self) -> str:
        return "ok" if self.ok else self.error.status

    @property
    def reason(self) -> str:
        return "" if self.ok else str(self.error)


# --- prices and the cost cap ---------------------------------------------------------------------

def load_prices(path: Optional[Path] = None) -> dict[str, dict[str, float]]:
    """The built-in price table, updated by a JSON file of the same shape."""
    table = {k: dict(v) for k, v in PRICES.items()}
    if path is None:
        return table
    try:
        extra = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read price table {path}: {err}; give a JSON object "
                         '{"model": {"input": USD per 1M tokens, "output": ..., "image": USD per image}}') from None
    if not isinstance(extra, dict):
        raise InputError(f"price table {path} is not a JSON object of models")
    for model, entry in extra.items():
        if not isinstance(entry, dict) or not set(entry) <= {"input", "output", "image"} or \
                not all(isinstance(v, (int, float)) for v in entry.values()):
            raise InputError(f"price table {path}: entry {model!r} must be an object with numeric "
                             "'input', 'output' and/or 'image' (USD per 1M tokens / per image)")
        table[model] = {k: float(v) for k, v in entry.items()}
    return table


def price_of(model: str, table: dict[str, dict[str, float]]) -> Optional[dict[str, float]]:
    """The entry whose name is the longest prefix of `model` ("gpt-4o-2024-08-06" -> "gpt-4o")."""
    names = [n for n in table if model == n or model.startswith(n + "-") or model.startswith(n + ":")]
    return table[max(names, key=len)] if names else None


class Budget:
    """Spending so far plus reservations for requests in flight, against an optional cap."""

    def __init__(self, cap: Optional[float]):
        self.cap = cap
        self.spent = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()
        self._costs: list[float] = []

    def reserve(self, estimate: float) -> float:
        with self._lock:
            if self._costs:  # the mean of real costs beats a guess once there are some
                estimate = sum(self._costs) / len(self._costs)
            if self.cap is not None and self.spent + self._reserved + estimate > self.cap + 1e-12:
                raise CostCapError(
                    f"cost cap reached: ${self.spent:.4f} spent, ${self._reserved:.4f} in flight, the next request "
                    f"would add about ${estimate:.4f}, past --max-cost ${self.cap:.4f}; rerun with a higher "
                    "--max-cost to continue (answers so far are cached)")
            self._reserved += estimate
            return estimate

    def settle(self, reserved: float, cost: float, *, answered: bool = True) -> None:
        """Swap a reservation for the real cost; `answered=False` (a failed request) costs nothing."""
        with self._lock:
            self._reserved -= reserved
            if answered:
                self.spent += cost
                self._costs.append(cost)


# --- images --------------------------------------------------------------------------------------

_MIME = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}


def _b64_len(n: int) -> int:
    return 4 * math.ceil(n / 3)


def encode_image(data: bytes, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[str, SentImage]:
    """A data URL for an image and the record of what it holds; re-encodes and downscales as needed.

    Formats every API takes (JPEG, PNG, WebP, GIF) under the limit go as they are; anything else is
    re-encoded as JPEG, and an image still over the limit is shrunk until it fits.
    """
    from PIL import Image

    sha = hashlib.sha256(data).hexdigest()
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as err:
        raise InputError(f"image {sha[:16]} cannot be decoded ({type(err).__name__}: {err}): "
                         "check the file, or remove the item") from None
    fmt = img.format or ""
    if fmt in _MIME and _b64_len(len(data)) <= max_bytes:
        out, mime, action, size = data, _MIME[fmt], "as-is", img.size
    else:
        if img.mode not in ("RGB", "L"):  # JPEG has no alpha: flatten onto white
            rgba = img.convert("RGBA")
            bg = Image.new("RGB", rgba.size, (255, 255, 255))
            bg.paste(rgba, mask=rgba.split()[-1])
            img = bg
        action, scale = "re-encoded", 1.0
        while True:
            cur = img if scale == 1.0 else img.resize(
                (max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.LANCZOS)
            buf = io.BytesIO()
            cur.save(buf, format="JPEG", quality=90)
            out = buf.getvalue()
            if _b64_len(len(out)) <= max_bytes or (cur.width <= 16 and cur.height <= 16):
                break
            scale *= 0.95 * math.sqrt(max_bytes / _b64_len(len(out)))  # area shrinks with the byte ratio
            action = "downscaled"
        mime, size = "image/jpeg", cur.size
    url = f"data:{mime};base64," + base64.b64encode(out).decode("ascii")
    return url, SentImage(sha, hashlib.sha256(out).hexdigest(), mime, size[0], size[1], len(out), action)


def _read_image(src: Union[Path, bytes]) -> bytes:
    if isinstance(src, (bytes, bytearray)):
        return bytes(src)
    try:
        return Path(src).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read image {src}: {err.strerror}; restore the file") from None


# --- the cache -----------------------------------------------------------------------------------

def cache_path(override: Optional[os.PathLike | str] = None) -> Path:
    return Path(override or os.environ.get("VHMINE_LLM_CACHE") or DEFAULT_CACHE)


def safe_endpoint(base_url: Optional[str]) -> str:
    """The endpoint without user info, query or fragment: what may be recorded."""
    if not base_url:
        return "https://api.openai.com/v1"
    p = urlsplit(base_url)
    host = p.hostname or ""
    netloc = host + (f":{p.port}" if p.port else "")
    return urlunsplit((p.scheme, netloc, p.path, "", ""))


class Cache:
    """Answers by request key, and failures with reasons, in one SQLite file (WAL; one writer lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
                             "model TEXT NOT NULL, endpoint TEXT, request TEXT NOT NULL, answer TEXT NOT NULL, "
                             "cost REAL NOT NULL, created_at TEXT NOT NULL)")
            self._db.execute("CREATE TABLE IF NOT EXISTS failures (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                             "key TEXT NOT NULL, kind TEXT NOT NULL, model TEXT NOT NULL, endpoint TEXT, "
                             "status TEXT NOT NULL, reason TEXT NOT NULL, attempts INTEGER, created_at TEXT NOT NULL)")
        except sqlite3.Error as err:
            raise InputError(f"cannot open the request cache {self.path}: {err}; pass --cache FILE") from None

    def get(self, key: str) -> Optional[dict]:
        with self._lock:
            row = self._db.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, kind: str, model: str, endpoint: str, request: dict, answer: dict, cost: float) -> None:
        with self._lock:  # autocommit: an answer on disk survives a kill right after
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (key, kind, model, endpoint, json.dumps(request, sort_keys=True),
                              json.dumps(answer, sort_keys=True), cost, _now()))

    def fail(self, key: str, kind: str, model: str, endpoint: str, status: str, reason: str, attempts: int) -> None:
        with self._lock:
            self._db.execute("INSERT INTO failures (key, kind, model, endpoint, status, reason, attempts, created_at) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (key, kind, model, endpoint, status, reason, attempts, _now()))

    def failures(self) -> list[dict]:
        with self._lock:
            cur = self._db.execute("SELECT key, kind, model, status, reason, attempts FROM failures ORDER BY id")
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def request_key(kind: str, model: str, payload: dict) -> str:
    """sha256 of the canonical JSON of everything that decides an answer (never the key or endpoint)."""
    blob = json.dumps({"v": CACHE_VERSION, "kind": kind, "model": model, **payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# --- the client ----------------------------------------------------------------------------------

@dataclass
class Stats:
    sent: int = 0  # HTTP requests, retries included
    cached: int = 0
    retries: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)


class LLM:
    """A client for one endpoint with a cache, retries, a concurrency limit and a cost cap.

    Construct it, then call `chat` / `image` for one request (raising LLMError) or `chat_iter` /
    `image_iter` / `run_many` for many in flight. Nothing touches the network until a request is
    made; a request whose answer is cached never does.
    """

    def __init__(self, opts: LLMOptions):
        if opts.concurrency < 1 or opts.max_retries < 0:
            raise InputError("--concurrency must be at least 1 and --max-retries at least 0")
        self.opts = opts
        self.base_url = opts.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.endpoint = safe_endpoint(self.base_url)
        self.prices = load_prices(opts.prices)
        self.budget = Budget(opts.max_cost)
        self.cache = Cache(cache_path(opts.cache))
        self.stats = Stats()
        self._client = None
        self._client_lock = threading.Lock()
        self._abort: Optional[LLMError] = None
        self._down_streak = 0
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()

    # context manager and lifetime
    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self.cache.close()

    @property
    def spent(self) -> float:
        return self.budget.spent

    def check_prices(self, models: Iterable[str]) -> None:
        """With a cost cap, every model must have a price: fail before anything is sent."""
        if self.opts.max_cost is None:
            return
        missing = sorted({m for m in models if price_of(m, self.prices) is None})
        if missing:
            raise InputError(f"--max-cost needs a price for {', '.join(missing)}, which the built-in table lacks: "
                             'pass --prices FILE with {"' + missing[0] + '": {"input": USD per 1M tokens, "output": ...}}')

    def _openai(self):
        with self._client_lock:
            if self._client is None:
                try:
                    import openai
                except ModuleNotFoundError:
                    raise InputError("model access needs the openai package: pip install 'vhmine[models]'") from None
                key = os.environ.get("OPENAI_API_KEY")
                if not key:
                    raise LLMAuthError(f"OPENAI_API_KEY is not set, so nothing can be sent to {self.endpoint}: export "
                                       "OPENAI_API_KEY (any non-empty value for a local server that checks none)")
                self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.opts.timeout_s,
                                             max_retries=0)  # we retry ourselves, with jitter and a record
            return self._client

    # one request, with retries
    def _cost(self, model: str, prompt_tokens: int = 0, completion_tokens: int = 0, images: int = 0) -> float:
        p = price_of(model, self.prices) or {}
        return (prompt_tokens * p.get("input", 0.0) + completion_tokens * p.get("output", 0.0)) / 1e6 \
            + images * p.get("image", 0.0)

    def _retry_wait(self, attempt: int, err: Exception) -> float:
        wait_s = min(self.opts.max_wait_s, self.opts.retry_wait_s * (2 ** attempt))
        headers = getattr(getattr(err, "response", None), "headers", None)
        retry_after = headers.get("retry-after") if headers is not None else None
        try:
            if retry_after is not None:
                return min(self.opts.max_wait_s, float(retry_after)) + random.uniform(0, 0.1 * self.opts.retry_wait_s)
        except ValueError:
            pass
        return random.uniform(0.5, 1.0) * wait_s  # jitter: concurrent clients do not retry in lockstep

    def _send(self, kind: str, model: str, key: str, call, estimate: float):
        """Run `call(client)` with retries; returns (raw result, attempts). Raises LLMError."""
        import openai

        if self._abort is not None:
            raise type(self._abort)(f"not sent: {self._abort}")
        reserved = self.budget.reserve(estimate)
        try:
            client = self._openai()
            last: Optional[Exception] = None
            for attempt in range(self.opts.max_retries + 1):
                if attempt:
                    self.stats.add("retries")
                    time.sleep(self._retry_wait(attempt - 1, last))
                self.stats.add("sent")
                try:
                    result = call(client)
                    self._down_streak = 0
                    return result, attempt + 1, reserved
                except openai.AuthenticationError as err:
                    e = LLMAuthError(f"{self.endpoint} rejected the API key (401: {_msg(err)}): check OPENAI_API_KEY; "
                                     "nothing more is sent in this run")
                    self._abort = e
                    raise e from None
                except openai.PermissionDeniedError as err:
                    raise LLMRefusalError(f"{self.endpoint} refused model {model} (403: {_msg(err)})") from None
                except openai.BadRequestError as err:
                    code = _code(err)
                    if code in ("content_policy_violation", "content_filter") or "safety" in _msg(err).lower():
                        raise LLMRefusalError(f"content policy: {model} at {self.endpoint} rejected the request "
                                              f"({_msg(err)})") from None
                    raise LLMError(f"{model} at {self.endpoint} rejected the request (400: {_msg(err)}): check "
                                   "--model and the request parameters") from None
                except openai.NotFoundError as err:
                    e = LLMError(f"{self.endpoint} has no model {model} or no such route (404: {_msg(err)}): "
                                 "check --model and --base-url")
                    self._abort = e
                    raise e from None
                except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                        openai.APIConnectionError) as err:
                    last = err
                except openai.APIStatusError as err:
                    if err.status_code < 500 and err.status_code not in (408, 409, 429):
                        raise LLMError(f"{model} at {self.endpoint}: HTTP {err.status_code}: {_msg(err)}") from None
                    last = err
                except (openai.APIResponseValidationError, ValueError, KeyError, TypeError) as err:
                    last = _Malformed(f"{type(err).__name__}: {str(err)[:200]}")
            self._down_streak += 1
            if isinstance(last, _Malformed):
                raise LLMMalformedError(f"{model} at {self.endpoint} sent an unreadable answer "
                                        f"{self.opts.max_retries + 1} times ({last}); rerun later") from None
            e = LLMUnavailableError(f"{model} at {self.endpoint} failed {self.opts.max_retries + 1} times "
                                    f"(last: {_describe(last)}); rerun later, or lower --concurrency")
            if self._down_streak >= max(3, self.opts.concurrency):  # endpoint down: stop hammering it
                self._abort = LLMUnavailableError(f"{self.endpoint} is down ({self._down_streak} requests in a row "
                                                  f"failed, last: {_describe(last)}); rerun when it is back")
            raise e
        except BaseException:
            self.budget.settle(reserved, 0.0, answered=False)
            raise

    def _cached_or_claim(self, key: str):
        """The cached answer for `key`, or None once this thread has claimed the right to send it.

        Identical requests in flight at once (the same judge prompt twice in a batch) are sent once:
        a twin waits for the first and then reads its answer from the cache; if the first failed,
        the twin tries itself.
        """
        while True:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
            with self._inflight_lock:
                twin = self._inflight.get(key)
                if twin is None:
                    self._inflight[key] = threading.Event()
                    return None
            twin.wait()

    def _release(self, key: str) -> None:
        with self._inflight_lock:
            done = self._inflight.pop(key, None)
        if done is not None:
            done.set()

    def chat(self, req: ChatRequest) -> Answer:
        """Ask one chat request (cached); raises LLMError on failure."""
        model = req.model or self.opts.model
        sent = [encode_image(_read_image(src), self.opts.max_image_bytes) for src in req.images]
        params = {"temperature": self.opts.temperature, "max_tokens": self.opts.max_tokens, **req.params}
        payload = {"system": req.system, "prompt": req.prompt, "images": [s.sha256 for _, s in sent],
                   "params": params, "max_image_bytes": self.opts.max_image_bytes}
        key = request_key("chat", model, payload)
        hit = self._cached_or_claim(key)
        if hit is not None:
            self.stats.add("cached")
            return _answer_from(hit, model, key, cached=True)
        try:
            return self._chat_send(req, model, key, sent, params, payload)
        finally:
            self._release(key)

    def _chat_send(self, req: ChatRequest, model: str, key: str, sent: list, params: dict, payload: dict) -> Answer:
        content: list[dict] = [{"type": "text", "text": req.prompt}]
        content += [{"type": "image_url", "image_url": {"url": url}} for url, _ in sent]
        messages = ([{"role": "system", "content": req.system}] if req.system else []) + \
            [{"role": "user", "content": content}]
        estimate = self._cost(model, len(req.prompt) // 3 + _IMAGE_TOKENS_GUESS * len(sent), params["max_tokens"])

        def call(client):
            r = client.chat.completions.create(model=model, messages=messages, **params)
            if not getattr(r, "choices", None):
                raise ValueError("the answer has no choices")
            return r

        try:
            r, attempts, reserved = self._send("chat", model, key, call, estimate)
        except LLMError as err:
            self.stats.add("failed")
            self.cache.fail(key, "chat", model, self.endpoint, err.status, str(err), None)
            raise
        choice = r.choices[0]
        msg = choice.message
        usage = getattr(r, "usage", None)
        pt, ct = (usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else (0, 0)
        cost = self._cost(model, pt, ct)
        self.budget.settle(reserved, cost)
        refusal = getattr(msg, "refusal", None)
        if refusal or choice.finish_reason == "content_filter" or (msg.content is None and not refusal):
            reason = refusal or ("content filter" if choice.finish_reason == "content_filter" else "an empty answer")
            err = (LLMRefusalError if (refusal or choice.finish_reason == "content_filter") else LLMMalformedError)(
                f"{model} at {self.endpoint} gave no answer: {reason} (finish_reason {choice.finish_reason})")
            self.stats.add("failed")
            self.cache.fail(key, "chat", model, self.endpoint, err.status, str(err), attempts)
            raise err
        record = {"text": msg.content, "prompt_tokens": pt, "completion_tokens": ct, "finish_reason": choice.finish_reason,
                  "served_model": getattr(r, "model", None), "images": [asdict(s) for _, s in sent], "cost": cost}
        self.cache.put(key, "chat", model, self.endpoint, {**payload, "sent": record["images"]}, record, cost)
        return _answer_from(record, model, key, cached=False)

    def image(self, req: ImageRequest) -> ImageAnswer:
        """Generate one image (cached); raises LLMError on failure."""
        model = req.model or self.opts.model
        params = {"size": req.size, **req.params}
        payload = {"prompt": req.prompt, "variant": req.variant, "params": params}
        key = request_key("image", model, payload)
        hit = self._cached_or_claim(key)
        if hit is not None:
            self.stats.add("cached")
            return _image_from(hit, model, key, cached=True)
        try:
            return self._image_send(req, model, key, params, payload)
        finally:
            self._release(key)

    def _image_send(self, req: ImageRequest, model: str, key: str, params: dict, payload: dict) -> ImageAnswer:
        extra = {"response_format": "b64_json"} if model.startswith("dall-e") else {}  # gpt-image-* always sends b64

        def call(client):
            r = client.images.generate(model=model, prompt=req.prompt, n=1, **params, **extra)
            if not r.data or not getattr(r.data[0], "b64_json", None):
                raise ValueError("the answer holds no b64_json image")
            return r

        try:
            r, attempts, reserved = self._send("image", model, key, call, self._cost(model, images=1))
        except LLMError as err:
            self.stats.add("failed")
            self.cache.fail(key, "image", model, self.endpoint, err.status, str(err), None)
            raise
        cost = self._cost(model, images=1)
        self.budget.settle(reserved, cost)
        d = r.data[0]
        record = {"b64": d.b64_json, "revised_prompt": getattr(d, "revised_prompt", None), "cost": cost}
        self.cache.put(key, "image", model, self.endpoint, payload, record, cost)
        return _image_from(record, model, key, cached=False)

    # many requests
    def run_many(self, fn, items: Sequence, desc: str = "requests") -> Iterator[Outcome]:
        """`fn(item)` for every item, `concurrency` at a time; Outcomes as they finish (index = position).

        A fatal error (no or bad key, cost cap, endpoint down) stops new requests: the items not yet
        sent come back with that error, so the caller records every item once.
        """
        from tqdm.auto import tqdm

        items = list(items)
        bar = tqdm(total=len(items), desc=desc, unit="req", disable=not self.opts.progress or not items, leave=False)

        def one(i: int) -> Outcome:
            try:
                return Outcome(i, answer=fn(items[i]))
            except CostCapError as err:
                self._abort = self._abort or err
                return Outcome(i, error=err)
            except LLMError as err:
                return Outcome(i, error=err)
            except InputError as err:  # an unreadable image: this item only
                return Outcome(i, error=LLMError(str(err)))

        pending = set()
        nxt = 0
        with ThreadPoolExecutor(max_workers=self.opts.concurrency) as pool:
            try:
                while nxt < len(items) or pending:
                    # keep at most `concurrency` submitted, so a stop leaves the rest unsent
                    while nxt < len(items) and len(pending) < self.opts.concurrency:
                        pending.add(pool.submit(one, nxt))
                        nxt += 1
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        bar.update(1)
                        yield f.result()
            finally:
                bar.close()

    def chat_iter(self, requests: Sequence[ChatRequest], desc: str = "chat") -> Iterator[Outcome]:
        return self.run_many(self.chat, requests, desc)

    def image_iter(self, requests: Sequence[ImageRequest], desc: str = "images") -> Iterator[Outcome]:
        return self.run_many(self.image, requests, desc)

    def chat_many(self, requests: Sequence[ChatRequest], desc: str = "chat") -> list[Outcome]:
        """Every request's Outcome, in the order of `requests`."""
        return sorted(self.chat_iter(requests, desc), key=lambda o: o.index)


class _Malformed(Exception):
    pass


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


def _answer_from(rec: dict, model: str, key: str, cached: bool) -> Answer:
    return Answer(rec["text"], model, key, 0.0 if cached else rec["cost"], cached, rec["prompt_tokens"],
                  rec["completion_tokens"], rec["finish_reason"], rec.get("served_model"),
                  tuple(SentImage(**s) for s in rec["images"]))


def _image_from(rec: dict, model: str, key: str, cached: bool) -> ImageAnswer:
    return ImageAnswer(base64.b64decode(rec["b64"]), model, key, 0.0 if cached else rec["cost"], cached,
                       rec.get("revised_prompt"))
