"""Identical requests in flight share one attempt's outcome, so each of them ends within the stated bound.

A real loopback server (tests/openai_server.py, with the silent and trickling deliveries of tests/slow_server.py)
gets batches in which prompts repeat. The first of identical requests in flight asks; its twins wait for that
request's outcome, its answer or its failure, and never send it again themselves. So every request of a batch
ends within docs/models.md's (R + 1) x T + back-offs, and the server sees each distinct prompt at most R + 1
times. Reads nothing but the server; writes a request cache under the test's tmp_path.
"""

from __future__ import annotations

import itertools
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from vhmine import llm as L
from vhmine.errors import LLMError

RETRY_WAIT_S, MAX_WAIT_S = 0.05, 0.1
SLACK_S = 0.5  # the request's own work around its attempts (the cache, a new client), on a loaded machine
_n = itertools.count()


def bound_s(timeout_s: float, max_retries: int) -> float:
    """docs/models.md: (R + 1) x T + the sum over k < R of min(max wait, retry wait x 2^k)."""
    return (max_retries + 1) * timeout_s + sum(min(MAX_WAIT_S, RETRY_WAIT_S * 2**k) for k in range(max_retries))


def run_batch(srv, cache_dir, prompts, behaviours, timeout_s: float, max_retries: int, kind: str = "chat"):
    """Every prompt of `prompts` at once (one thread each, as run_many at that concurrency) against the server
    delivering `behaviours` in the order the tries arrive; each request's (seconds taken, answer text or error)."""
    srv.reset()
    n = next(_n)
    opts = L.LLMOptions(
        model="fake-vlm",
        base_url=srv.base_url,
        cache=cache_dir / f"cache{n}.db",
        timeout_s=timeout_s,
        max_retries=max_retries,
        retry_wait_s=RETRY_WAIT_S,
        max_wait_s=MAX_WAIT_S,
        concurrency=len(prompts),
        progress=False,
    )
    with L.LLM(opts) as llm:
        llm.chat(L.ChatRequest(f"warm up {n}"))  # the client's lazy imports and first connection: not a twin's time
        llm.image(L.ImageRequest(f"warm up {n}"))
        srv.reset()
        srv.faults = list(behaviours)
        got: list = [None] * len(prompts)
        go = threading.Barrier(len(prompts))

        def ask(i: int) -> None:
            go.wait()
            t = time.monotonic()
            try:
                prompt = f"b{n} {prompts[i]}"
                out = llm.chat(L.ChatRequest(prompt)).text if kind == "chat" else llm.image(L.ImageRequest(prompt)).png
            except LLMError as err:
                out = err
            got[i] = (time.monotonic() - t, out)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    return got


def check_batch(srv, cache_dir, prompts, behaviours, timeout_s: float, max_retries: int, kind: str = "chat"):
    got = run_batch(srv, cache_dir, prompts, behaviours, timeout_s, max_retries, kind)
    limit = bound_s(timeout_s, max_retries) + SLACK_S
    assert all(g is not None and g[0] <= limit for g in got), ([g and round(g[0], 2) for g in got], limit)
    with srv.lock:
        bodies = [
            r["body"] for r in srv.requests if r["path"].endswith("/completions" if kind == "chat" else "/generations")
        ]
    sent = [b["messages"][-1]["content"][0]["text"] if kind == "chat" else b["prompt"] for b in bodies]
    assert all(sent.count(p) <= max_retries + 1 for p in set(sent)), sent
    for p in set(prompts):  # twins end alike: the same answer, or a failure in the same words
        outs = {str(out) for (_, out), q in zip(got, prompts) if q == p}
        assert len(outs) == 1, (p, outs)
    return got


@settings(derandomize=True, max_examples=10, deadline=None)
@given(
    kind=st.sampled_from(["chat", "image"]),
    prompts=st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=6),
    max_retries=st.integers(0, 1),
    behaviours=st.lists(st.sampled_from(["silent", "trickle:30", "ok"]), min_size=12, max_size=12),
)
def test_property_twins_in_flight_end_within_the_stated_bound(
    openai_server, tmp_path, kind, prompts, max_retries, behaviours
):
    behaviours = [None if b == "ok" else b for b in behaviours]
    check_batch(openai_server, tmp_path, prompts, behaviours, 0.3, max_retries, kind)


def test_four_twins_against_a_silent_server_end_together(openai_server, tmp_path):
    """Issue 43, item 6: four identical prompts in one batch (T = 1 s, a silent server) ended at 1.2, 2.4, 3.6 and
    4.6 s, each waiting twin sending the request again once the one before gave up. Now the first asks, the others
    share its failure: all four end at T, and the server sees the prompt once."""
    got = check_batch(openai_server, tmp_path, ["same"] * 4, ["silent"] * 4, 0.3, 0)
    assert all(isinstance(out, LLMError) and "(last: no answer within 0.3 s)" in str(out) for _, out in got), got
    assert len(openai_server.chats()) == 1
