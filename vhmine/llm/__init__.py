"""One way to reach models: OpenAI-compatible chat (with images), image generation and image edits.

Used by probe, describe, generate, eval and manipulate. Reads the API key from OPENAI_API_KEY and the
endpoint from `base_url` / OPENAI_BASE_URL at call time; the key is never written anywhere (not to the cache,
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
exponential back-off and full jitter, `max_retries` times at most; each try is abandoned `timeout_s` after
it starts, whatever the server sends (`deadline`), so a request ends within (max_retries + 1) * timeout_s
plus its back-off. `max_cost` (USD, from the
reported token usage and `PRICES`, overridable by a JSON file) is checked before each request with an
estimate reserved for requests in flight, so spending stops at the cap, cleanly (give or take one
request's difference from its estimate); under a cap a model with no price is never sent.

The layer, one module per concern: `records` (options, requests, answers), `image_urls` (images as
data URLs under the size limit), `prices` (the price table and the cost budget), `cache` (the SQLite
request cache and request keys), `redact` (endpoint and error texts safe to record), `deadline` (each try
abandoned at its deadline, its connection closed), `stops` (when a client stops sending), `client`
(the `LLM` class: retries, single-flight, `run_many`) and `images` (its `image` and `image_edit`
calls). Everything is re-exported here.
"""

from __future__ import annotations

import logging

from vhmine.llm.cache import CACHE_VERSION, DEFAULT_CACHE, Cache, cache_path, request_key
from vhmine.llm.client import LLM, Stats
from vhmine.llm.image_urls import encode_image
from vhmine.llm.prices import PRICES, Budget, load_prices, price_of
from vhmine.llm.records import (
    MAX_IMAGE_BYTES,
    Answer,
    ChatRequest,
    ImageAnswer,
    ImageEditRequest,
    ImageRequest,
    LLMOptions,
    Outcome,
    SentImage,
)
from vhmine.llm.redact import safe_endpoint, scrub

log = logging.getLogger(__name__)

__all__ = [
    "CACHE_VERSION",
    "DEFAULT_CACHE",
    "MAX_IMAGE_BYTES",
    "PRICES",
    "LLMOptions",
    "ChatRequest",
    "ImageRequest",
    "ImageEditRequest",
    "SentImage",
    "Answer",
    "ImageAnswer",
    "Outcome",
    "load_prices",
    "price_of",
    "Budget",
    "encode_image",
    "cache_path",
    "safe_endpoint",
    "Cache",
    "request_key",
    "Stats",
    "LLM",
    "scrub",
]
