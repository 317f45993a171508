"""The client `LLM`: one endpoint, with retries, single-flight of identical requests and `run_many` concurrency.

Reads OPENAI_API_KEY and OPENAI_BASE_URL at call time (the `openai` package is imported only when a
request is sent); writes answers and failures to the request cache (`cache.Cache`). Requests are
retried on 429, 5xx, time-outs, dropped connections and unreadable answers with exponential
back-off and full jitter; a fatal error (no or bad key, cost cap, endpoint down, an endpoint that
does not answer in time: `stops`) stops new requests and retries.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from vhmine.errors import (
    CostCapError,
    InputError,
    LLMAuthError,
    LLMError,
    LLMMalformedError,
    LLMRefusalError,
    LLMUnavailableError,
)
from vhmine.llm.cache import Cache, cache_path, legacy_request_key, request_key
from vhmine.llm.deadline import Clients, RequestDeadline
from vhmine.llm.flights import Flights
from vhmine.llm.image_urls import _read_image, encode_image
from vhmine.llm.images import ImageCalls
from vhmine.llm.prices import _IMAGE_TOKENS_GUESS, Budget, load_prices, price_of
from vhmine.llm.records import Answer, ChatRequest, LLMOptions, Outcome, SentImage
from vhmine.llm.redact import _code, _describe, _msg, safe_endpoint, unreadable
from vhmine.llm.stops import Malformed, Stops, checked_body


@dataclass
class Stats:
    sent: int = 0  # HTTP requests, retries included
    cached: int = 0
    answered: int = 0  # new answers received (and cached) in this run
    retries: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)


class LLM(ImageCalls):
    """A client for one endpoint with a cache, retries, a concurrency limit and a cost cap.

    Construct it, then call `chat` / `image` / `image_edit` for one request (raising LLMError) or
    `chat_iter` / `image_iter` / `run_many` for many in flight (the image calls live
    in `images.ImageCalls`). Nothing touches the network until a request is made; a request whose
    answer is cached never does.
    """

    def __init__(self, opts: LLMOptions, budget: Budget | None = None):
        """`budget`: share one `Budget` between clients (several models of one run) so that `max_cost` caps them all."""
        if opts.concurrency < 1 or opts.max_retries < 0:
            raise InputError("--concurrency must be at least 1 and --max-retries at least 0")
        self.opts = opts
        self.base_url = opts.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.endpoint = safe_endpoint(self.base_url)
        self.prices = load_prices(opts.prices)
        self.budget = budget if budget is not None else Budget(opts.max_cost)
        self.cache = Cache(cache_path(opts.cache))
        self.stats = Stats()
        self._clients = Clients(self._new_client)  # an attempt past its deadline closes its own client
        self._stops = Stops(self.endpoint, opts.timeout_s, opts.concurrency)
        self._flights = Flights()  # single flight: identical requests in flight share one outcome

    # context manager and lifetime
    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._clients.close()
        self.cache.close()

    @property
    def spent(self) -> float:
        return self.budget.spent

    @property
    def stopped(self) -> LLMError | None:
        """Why this client sends nothing more (no or bad key, endpoint down, no such model, cost cap), or None."""
        with self._stops.lock:
            return self._stops.reason

    def fatal_stop(self, outcomes: Sequence[Outcome] = ()) -> LLMError | None:
        """Why a stage cannot go on, or None: this client stopped (no or rejected key, endpoint down, no such
        model; a cost cap is a clean stop, which leaves the run partial instead), or every one of `outcomes`
        failed as unavailable (too few requests for the down streak to stop the client)."""
        stop = self.stopped
        failed = [o for o in outcomes if not o.ok]
        if stop is None and failed and len(failed) == len(outcomes) and all(o.status == "unavailable" for o in failed):
            stop = failed[-1].error
        return None if isinstance(stop, CostCapError) else stop

    def raise_if_stopped(self, doing: str, outcomes: Sequence[Outcome] = ()) -> None:
        """End a stage with one error (the CLI prints one line) when `fatal_stop` says it cannot go on, instead of
        recording the same reason against every item that was never sent."""
        stop = self.fatal_stop(outcomes)
        if stop is not None:
            raise type(stop)(f"{doing} stopped: {stop}") from None

    @property
    def down_streak(self) -> int:
        with self._stops.lock:
            return self._stops.down_streak

    def check_prices(self, models: Iterable[str]) -> None:
        """With a cost cap, every model must have a price: fail before anything is sent."""
        if self.budget.cap is None:
            return
        missing = sorted({m for m in models if price_of(m, self.prices) is None})
        if missing:
            raise InputError(_no_price_message(missing))

    def _new_client(self):
        try:
            import openai
        except ModuleNotFoundError:
            raise InputError("model access needs the openai package: pip install 'vhmine[models]'") from None
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise self._stops.stop(
                LLMAuthError(
                    f"OPENAI_API_KEY is not set, so nothing can be sent to {self.endpoint}: "
                    "export OPENAI_API_KEY (any non-empty value for a local server that checks none)"
                )
            )
        # the library's time-out bounds each read; `deadline.Clients.run` bounds each whole try by the same figure
        client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.opts.timeout_s, max_retries=0)
        client.chat.completions, client.images  # noqa: B018  (loaded here, once, not within a try's deadline)
        return client  # we retry ourselves, with jitter and a record

    # one request, with retries
    def _cost(self, model: str, prompt_tokens: int = 0, completion_tokens: int = 0, images: int = 0) -> float:
        p = price_of(model, self.prices) or {}
        return (prompt_tokens * p.get("input", 0.0) + completion_tokens * p.get("output", 0.0)) / 1e6 + images * p.get(
            "image", 0.0
        )

    def _retry_wait(self, attempt: int, err: Exception) -> float:
        """The back-off before retry `attempt` + 1: at most min(max_wait_s, retry_wait_s * 2**attempt), or at most
        max_wait_s where the server sent Retry-After (docs/models.md states the bound this gives a request)."""
        wait_s = min(self.opts.max_wait_s, self.opts.retry_wait_s * (2**attempt))
        headers = getattr(getattr(err, "response", None), "headers", None)
        retry_after = headers.get("retry-after") if headers is not None else None
        try:
            if retry_after is not None:
                jitter = random.uniform(0, 0.1 * self.opts.retry_wait_s)
                return min(self.opts.max_wait_s, max(0.0, float(retry_after)) + jitter)
        except ValueError:
            pass
        return random.uniform(0.5, 1.0) * wait_s  # jitter: concurrent clients do not retry in lockstep

    def _send(self, kind: str, model: str, key: str, call, estimate: float, parse=None):
        """Run `call(client)` with retries, each try within --timeout, whole; `parse(raw)` reads what it got (CPU
        work, after the try's deadline). Returns (result, attempts, reserved cost). Raises LLMError."""
        stopped = self.stopped
        if stopped is not None:
            raise type(stopped)(f"not sent: {stopped}")
        if self.budget.cap is not None and price_of(model, self.prices) is None:
            # a model without a price would cost $0 forever and never reach the cap: stop, as check_prices does
            raise self._stops.stop(CostCapError(_no_price_message([model])))
        reserved = self.budget.reserve(estimate)
        try:
            self._clients.give(self._clients.take())  # before `import openai`: a missing package gets its pip hint
            import openai

            last: Exception | None = None
            tries = 0
            for attempt in range(self.opts.max_retries + 1):
                if attempt:
                    # back off; a stop (another request's time-out, say) ends the wait and this request's tries
                    self._stops.event.wait(self._retry_wait(attempt - 1, last))
                    if self._stops.event.is_set():
                        break
                    self.stats.add("retries")
                self.stats.add("sent")
                tries += 1
                try:
                    result = self._clients.run(self.opts.timeout_s, call)  # the whole exchange: its deadline
                    result = result if parse is None else parse(result)
                    self._stops.answered()
                    return result, attempt + 1, reserved
                except openai.AuthenticationError as err:
                    e = LLMAuthError(
                        f"{self.endpoint} rejected the API key (401: {_msg(err)}): check OPENAI_API_KEY; "
                        "nothing more is sent in this run"
                    )
                    self._stops.stop(e)
                    raise e from None
                except openai.PermissionDeniedError as err:
                    raise LLMRefusalError(f"{self.endpoint} refused model {model} (403: {_msg(err)})") from None
                except openai.BadRequestError as err:
                    code = _code(err)
                    if code in ("content_policy_violation", "content_filter") or "safety" in _msg(err).lower():
                        raise LLMRefusalError(
                            f"content policy: {model} at {self.endpoint} rejected the request ({_msg(err)})"
                        ) from None
                    raise LLMError(
                        f"{model} at {self.endpoint} rejected the request (400: {_msg(err)}): check "
                        "--model and the request parameters"
                    ) from None
                except openai.NotFoundError as err:
                    e = LLMError(
                        f"{self.endpoint} has no model {model} or no such route (404: {_msg(err)}): "
                        "check --model and --base-url"
                    )
                    self._stops.stop(e)
                    raise e from None
                except (openai.APITimeoutError, RequestDeadline) as err:
                    last = err
                    self._stops.timed_out()
                except openai.APIConnectionError as err:
                    last = err
                except (openai.RateLimitError, openai.InternalServerError) as err:
                    last = err
                    self._stops.replied()
                except openai.APIStatusError as err:
                    if err.status_code < 500 and err.status_code not in (408, 409, 429):
                        raise LLMError(f"{model} at {self.endpoint}: HTTP {err.status_code}: {_msg(err)}") from None
                    last = err
                    self._stops.replied()
                except (openai.APIResponseValidationError, ValueError, KeyError, TypeError) as err:
                    last = err if isinstance(err, Malformed) else Malformed(unreadable(err))
                    self._stops.replied()
            self._stops.failed(last)
            stop = self.stopped if tries <= self.opts.max_retries else None  # cut short by the run's stop
            what = _describe(last, self.opts.timeout_s)
            if isinstance(last, Malformed) and stop is None:
                raise LLMMalformedError(
                    f"{model} at {self.endpoint} sent an unreadable answer {tries} times (last: {what}); rerun later"
                ) from None
            err_type = LLMMalformedError if isinstance(last, Malformed) else LLMUnavailableError
            raise err_type(
                f"{model} at {self.endpoint} failed {tries} times (last: {what}); "
                + (f"not tried again: {stop}" if stop else "rerun later, or lower --concurrency")
            ) from None
        except BaseException:
            self.budget.settle(reserved, 0.0, answered=False)
            raise

    def _cached_or_claim(self, key: str, legacy_key):
        """The cached answer for `key`, or None once this thread has claimed the right to send it (then
        `self._flights.sent`): identical requests in flight share one outcome (`flights`). `legacy_key`: as
        `Cache.get` (a function: computed only on a miss)."""
        return self._flights.cached_or_claim(key, lambda: self.cache.get(key, legacy_key, self.endpoint))

    def chat(self, req: ChatRequest) -> Answer:
        """Ask one chat request (cached); raises LLMError on failure."""
        model = req.model or self.opts.model
        sent = [encode_image(_read_image(src), self.opts.max_image_bytes) for src in req.images]
        params = {"temperature": self.opts.temperature, "max_tokens": self.opts.max_tokens, **req.params}
        payload = {
            "system": req.system,
            "prompt": req.prompt,
            "images": [s.sha256 for _, s in sent],
            "params": params,
            "max_image_bytes": self.opts.max_image_bytes,
        }
        key = request_key("chat", model, self.endpoint, payload)
        hit = self._cached_or_claim(key, lambda: legacy_request_key("chat", model, payload))
        if hit is not None:
            self.stats.add("cached")
            return _answer_from(hit, model, key, cached=True)
        return self._flights.sent(key, lambda: self._chat_send(req, model, key, sent, params, payload))

    def _chat_send(self, req: ChatRequest, model: str, key: str, sent: list, params: dict, payload: dict) -> Answer:
        content: list[dict] = [{"type": "text", "text": req.prompt}]
        content += [{"type": "image_url", "image_url": {"url": url}} for url, _ in sent]
        messages = ([{"role": "system", "content": req.system}] if req.system else []) + [
            {"role": "user", "content": content}
        ]
        estimate = self._cost(model, len(req.prompt) // 3 + _IMAGE_TOKENS_GUESS * len(sent), params["max_tokens"])

        def call(client):  # the HTTP exchange, body read: within the try's deadline
            return client.chat.completions.with_raw_response.create(model=model, messages=messages, **params)

        def parse(raw):
            r = checked_body(raw.parse())
            if not getattr(r, "choices", None):
                raise Malformed(
                    "an answer with no choices (an empty choices list)"
                    if getattr(r, "choices", None) == []
                    else "an answer without a choices list"
                )
            return r

        try:
            r, attempts, reserved = self._send("chat", model, key, call, estimate, parse)
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
                f"{model} at {self.endpoint} gave no answer: {reason} (finish_reason {choice.finish_reason})"
            )
            self.stats.add("failed")
            self.cache.fail(key, "chat", model, self.endpoint, err.status, str(err), attempts)
            raise err
        record = {
            "text": msg.content,
            "prompt_tokens": pt,
            "completion_tokens": ct,
            "finish_reason": choice.finish_reason,
            "served_model": getattr(r, "model", None),
            "images": [asdict(s) for _, s in sent],
            "cost": cost,
        }
        self.cache.put(key, "chat", model, self.endpoint, {**payload, "sent": record["images"]}, record, cost)
        self.stats.add("answered")
        return _answer_from(record, model, key, cached=False)

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
                self._stops.stop(err)
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
            except KeyboardInterrupt:  # Ctrl-C: nothing new is sent; requests in flight finish into the cache
                self._stops.stop(LLMError("interrupted (Ctrl-C)"))
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            finally:
                bar.close()

    def chat_iter(self, requests: Sequence[ChatRequest], desc: str = "chat") -> Iterator[Outcome]:
        return self.run_many(self.chat, requests, desc)

    def chat_many(self, requests: Sequence[ChatRequest], desc: str = "chat") -> list[Outcome]:
        """Every request's Outcome, in the order of `requests`."""
        return sorted(self.chat_iter(requests, desc), key=lambda o: o.index)


def _no_price_message(models: Sequence[str]) -> str:
    return (
        f"--max-cost needs a price for {', '.join(models)}, which the built-in table lacks: "
        'pass --prices FILE with {"' + models[0] + '": {"input": USD per 1M tokens, "output": ...}}'
    )


def _answer_from(rec: dict, model: str, key: str, cached: bool) -> Answer:
    return Answer(
        rec["text"],
        model,
        key,
        0.0 if cached else rec["cost"],
        cached,
        rec["prompt_tokens"],
        rec["completion_tokens"],
        rec["finish_reason"],
        rec.get("served_model"),
        tuple(SentImage(**s) for s in rec["images"]),
    )
