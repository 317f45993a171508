"""vhmine.llm against a real OpenAI-compatible server on loopback: images as data URLs (downscaled
under the limit), the cache, retries with back-off, time-outs, malformed answers, refusals, the cost
cap, concurrency, and the key never reaching the cache."""

from __future__ import annotations

import hashlib
import io
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import API_KEY, chat_images, png_bytes

from vhmine import llm as L
from vhmine.errors import (
    CostCapError,
    InputError,
    LLMAuthError,
    LLMMalformedError,
    LLMRefusalError,
    LLMUnavailableError,
)


def _llm(srv, tmp_path, **kw):
    opts = dict(
        model="fake-vlm",
        base_url=srv.base_url,
        cache=tmp_path / "cache.db",
        retry_wait_s=0.01,
        timeout_s=0.5,
        progress=False,
    )
    opts.update(kw)
    return L.LLM(L.LLMOptions(**opts))


def test_chat_sends_the_image_and_a_second_ask_costs_nothing(openai_server, tmp_path):
    srv = openai_server
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-vlm": {"input": 10.0, "output": 100.0}}))
    img = png_bytes(3)
    with _llm(srv, tmp_path, prices=prices) as llm:
        a = llm.chat(L.ChatRequest("Is there a cat? Please answer yes or no.", images=[img]))
        assert a.text == "Yes, there are." and not a.cached
        assert a.cost == pytest.approx((100 * 10.0 + 20 * 100.0) / 1e6)
        [body] = srv.chats()
        assert chat_images(body) == [hashlib.sha256(img).hexdigest()]
        assert body["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert srv.requests[0]["headers"]["authorization"] == f"Bearer {API_KEY}"
        assert a.images[0].action == "as-is" and a.images[0].sent_sha256 == a.images[0].sha256
        b = llm.chat(L.ChatRequest("Is there a cat? Please answer yes or no.", images=[img]))
        assert (b.text, b.cached, b.cost, b.key) == (a.text, True, 0.0, a.key)
        # another parameter, prompt or image is another request
        llm.chat(L.ChatRequest("Is there a cat? Please answer yes or no.", images=[png_bytes(4)]))
        llm.chat(L.ChatRequest("Is there a cat? Please answer yes or no.", images=[img], params={"seed": 1}))
        assert len(srv.chats()) == 3
    # a new client on the same cache file (a second run) sends nothing
    with _llm(srv, tmp_path, prices=prices) as llm:
        assert llm.chat(L.ChatRequest("Is there a cat? Please answer yes or no.", images=[img])).cached
        assert llm.stats.sent == 0 and llm.spent == 0.0
    assert len(srv.chats()) == 3
    assert API_KEY.encode() not in (tmp_path / "cache.db").read_bytes()


@pytest.mark.parametrize("fault", ["429", "500", "hang", "malformed"])
def test_transient_faults_are_retried(openai_server, tmp_path, fault):
    srv = openai_server
    srv.hang_s = 1.5  # past the 0.5 s time-out
    srv.faults = [fault, fault]
    with _llm(srv, tmp_path) as llm:
        a = llm.chat(L.ChatRequest("What is it?"))
        assert a.text == "An answer to: What is it?"
        assert (llm.stats.sent, llm.stats.retries) == (3, 2)
    assert len(srv.chats()) == 3


def test_retries_are_bounded_and_back_off_grows(openai_server, tmp_path):
    srv = openai_server
    srv.faults = ["500"] * 10
    with _llm(srv, tmp_path, max_retries=3, retry_wait_s=0.05, max_wait_s=10) as llm:
        t = time.monotonic()
        with pytest.raises(
            LLMUnavailableError,
            match=r"^fake-vlm at http://127\.0\.0\.1:\d+/v1 failed 4 times "
            r"\(last: HTTP 500: The server had an error\); rerun later, or lower --concurrency$",
        ):
            llm.chat(L.ChatRequest("What is it?"))
        waited = time.monotonic() - t
        [fail] = llm.cache.failures()
    assert len(srv.chats()) == 4
    assert 0.5 * (0.05 + 0.1 + 0.2) <= waited < 2.0  # 0.05, 0.1, 0.2 s, each jittered to 50-100 %
    assert fail["status"] == "unavailable" and "failed 4 times" in fail["reason"]
    srv.faults = ["malformed"] * 10
    with _llm(srv, tmp_path, max_retries=1) as llm:
        with pytest.raises(LLMMalformedError, match="sent an unreadable answer 2 times"):
            llm.chat(L.ChatRequest("Another?"))


def test_refusals_and_content_policy_are_not_retried(openai_server, tmp_path):
    srv = openai_server
    with _llm(srv, tmp_path) as llm:
        with pytest.raises(
            LLMRefusalError, match=r"gave no answer: I can't help with that\. \(finish_reason content_filter\)"
        ):
            llm.chat(L.ChatRequest("Please REFUSE this"))
        with pytest.raises(
            LLMRefusalError,
            match=r"^content policy: dall-e-3 at .* rejected the request \(Your request "
            r"was rejected as a result of our safety system\.\)$",
        ):
            llm.image(L.ImageRequest("a FORBIDDEN thing", model="dall-e-3"))
        outs = llm.chat_many([L.ChatRequest("one"), L.ChatRequest("REFUSE two"), L.ChatRequest("three")])
        assert [o.status for o in outs] == ["ok", "refused", "ok"]
        assert [f["status"] for f in llm.cache.failures()] == ["refused", "refused", "refused"]
    assert len(srv.chats()) == 4 and len([r for r in srv.requests if "images" in r["path"]]) == 1


def test_images_are_reencoded_and_downscaled_under_the_limit(openai_server, tmp_path):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    noise = Image.fromarray(rng.integers(0, 255, (600, 600, 3), dtype=np.uint8))
    buf = io.BytesIO()
    noise.save(buf, format="PNG")
    big = buf.getvalue()
    assert len(big) > 1_000_000
    url, sent = L.encode_image(big, max_bytes=200_000)
    assert sent.action == "downscaled" and sent.mime == "image/jpeg" and len(url.split(",", 1)[1]) <= 200_000
    assert sent.width < 600 and sent.sha256 == hashlib.sha256(big).hexdigest() != sent.sent_sha256
    tif = io.BytesIO()
    Image.new("RGBA", (40, 30), (10, 20, 30, 128)).save(tif, format="TIFF")
    _, sent2 = L.encode_image(tif.getvalue())
    assert (sent2.action, sent2.mime, sent2.width, sent2.height) == ("re-encoded", "image/jpeg", 40, 30)
    with pytest.raises(InputError, match=r"^image [0-9a-f]{16} cannot be decoded"):
        L.encode_image(b"not an image")
    srv = openai_server
    with _llm(srv, tmp_path, max_image_bytes=200_000) as llm:
        a = llm.chat(L.ChatRequest("What is it?", images=[big]))
    assert chat_images(srv.chats()[0]) == [a.images[0].sent_sha256]  # what is recorded is what was sent


def test_cost_cap_stops_before_spending_past_it(openai_server, tmp_path):
    srv = openai_server
    srv.usage = (1000, 0)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-vlm": {"input": 10.0, "output": 0.0}}))  # $0.01 per request
    reqs = [L.ChatRequest(f"q{i}") for i in range(6)]
    with _llm(srv, tmp_path, prices=prices, max_cost=0.035, concurrency=1, max_tokens=1) as llm:
        outs = llm.chat_many(reqs)
        assert [o.status for o in outs] == ["ok"] * 3 + ["cost-cap"] * 3
        assert llm.spent == pytest.approx(0.03) and llm.spent <= 0.035
        assert isinstance(outs[3].error, CostCapError)
        assert "rerun with a higher --max-cost to continue" in outs[3].reason
    assert len(srv.chats()) == 3
    with _llm(
        srv, tmp_path, prices=prices, max_cost=0.5, concurrency=1, max_tokens=1
    ) as llm:  # a rerun pays for the rest
        assert all(o.ok for o in llm.chat_many(reqs)) and llm.stats.cached == 3
        assert llm.spent == pytest.approx(0.03)
    with pytest.raises(
        InputError,
        match=r"^--max-cost needs a price for other-model, which the built-in table lacks: "
        r"pass --prices FILE",
    ):
        _llm(srv, tmp_path, max_cost=1.0).check_prices(["other-model"])


def test_price_table_matches_by_longest_prefix_and_validates(tmp_path):
    table = L.load_prices()
    assert L.price_of("gpt-4o-2024-08-06", table) == L.PRICES["gpt-4o"]
    assert L.price_of("gpt-4o-mini-2024-07-18", table) == L.PRICES["gpt-4o-mini"]
    assert L.price_of("gpt-4ox", table) is None and L.price_of("llava", table) is None
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"m": {"input": "cheap"}}))
    with pytest.raises(InputError, match=r"entry 'm' must be an object with numeric"):
        L.load_prices(bad)


def test_requests_run_concurrently(openai_server, tmp_path):
    srv = openai_server
    srv.delay_s = 0.3
    with _llm(srv, tmp_path, concurrency=4, timeout_s=5) as llm:
        t = time.monotonic()
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(8)])
        took = time.monotonic() - t
    assert all(o.ok for o in outs) and [o.index for o in outs] == list(range(8))
    assert srv.max_inflight == 4 and took < 1.5  # two waves of 0.3 s, not eight


def test_identical_requests_in_flight_are_sent_once(openai_server, tmp_path):
    srv = openai_server
    srv.delay_s = 0.3  # the twins overlap: both are in flight before the first answer arrives
    reqs = [L.ChatRequest("Same question?")] * 3 + [L.ChatRequest("Other question?")]
    with _llm(srv, tmp_path, concurrency=4, timeout_s=5) as llm:
        outs = llm.chat_many(reqs)
    assert all(o.ok for o in outs) and len({o.answer.text for o in outs[:3]}) == 1
    assert sorted(c["messages"][-1]["content"][0]["text"] for c in srv.chats()) == ["Other question?", "Same question?"]
    assert [o.answer.cached for o in outs].count(False) == 2


def test_missing_or_rejected_key_stops_the_run(openai_server, tmp_path, monkeypatch):
    srv = openai_server
    monkeypatch.delenv("OPENAI_API_KEY")
    with _llm(srv, tmp_path) as llm:
        with pytest.raises(LLMAuthError, match=r"^OPENAI_API_KEY is not set, so nothing can be sent to http://127"):
            llm.chat(L.ChatRequest("q"))
    assert srv.requests == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-but-secret-42")
    with _llm(srv, tmp_path, concurrency=1) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(4)])
        failures = json.dumps(llm.cache.failures())
    assert [o.status for o in outs] == ["auth"] * 4
    assert "rejected the API key (401: Incorrect API key provided: ***): check OPENAI_API_KEY" in outs[0].reason
    assert "wrong-but-secret" not in failures and "wrong-but-secret" not in outs[0].reason
    assert L.scrub("bad key sk-proj-abcdEFGH1234 here") == "bad key sk-*** here"
    assert outs[1].reason.startswith("not sent: ")
    assert len(srv.requests) == 1  # nothing more was sent after the 401


def test_endpoint_down_is_retried_then_the_run_stops(tmp_path, monkeypatch):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    opts = L.LLMOptions(
        model="m",
        base_url=f"http://127.0.0.1:{port}/v1",
        cache=tmp_path / "c.db",
        retry_wait_s=0.01,
        max_retries=1,
        concurrency=1,
        progress=False,
    )
    with L.LLM(opts) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(6)])
        assert llm.stats.sent == 6  # three requests x two attempts, then the run stops
    assert [o.status for o in outs] == ["unavailable"] * 6
    assert "(last: could not connect (Connection refused))" in outs[0].reason
    assert "is down (3 requests in a row failed, last: could not connect (Connection refused))" in outs[5].reason


def test_endpoint_with_credentials_is_recorded_without_them():
    assert L.safe_endpoint("https://user:pw@gw.example.com:8443/v1?key=abc") == "https://gw.example.com:8443/v1"
    assert L.safe_endpoint(None) == "https://api.openai.com/v1"


def test_endpoint_with_a_key_in_its_path_is_recorded_without_it():
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5q" * 2
    assert L.safe_endpoint(f"https://gw.example.com/{key}/v1") == "https://gw.example.com/sk-***/v1"
    assert L.safe_endpoint(f"https://gw.example.com/v1/{key}") == "https://gw.example.com/v1/sk-***"
    assert L.safe_endpoint("https://gw.example.com/api-key/Zq81xw7Hk2/v1") == "https://gw.example.com/api-key/***/v1"
    google = "AIza" + "Sy" + "D3f9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh"
    assert (
        L.safe_endpoint(f"https://gw.example.com/{google}/v1beta/openai")
        == "https://gw.example.com/AIza***/v1beta/openai"
    )
    assert L.safe_endpoint(f"https://gw.example.com/hf_{'a1B2c3D4e5' * 3}/v1") == "https://gw.example.com/hf_***/v1"
    # what is no key stays as it is: deployment names, versions
    kept = "https://x.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat?api-version=2024-06-01"
    assert L.safe_endpoint(kept) == kept
    assert L.scrub(f"bad key {key} given") == "bad key sk-*** given"


def test_an_unreadable_image_answer_is_retried_and_never_cached(openai_server, tmp_path):
    srv = openai_server
    srv.faults = ["bad-image", "bad-image"]
    with _llm(srv, tmp_path, max_retries=1) as llm:
        with pytest.raises(
            LLMMalformedError,
            match=r"^dall-e-3 at .* sent an unreadable answer 2 times \(last: "
            r"the b64_json image cannot be decoded",
        ):
            llm.image(L.ImageRequest("a cup", model="dall-e-3"))
    srv.faults = ["bad-image"]
    with _llm(srv, tmp_path) as llm:  # a rerun asks again (nothing bad was cached) and gets a real image
        a = llm.image(L.ImageRequest("a cup", model="dall-e-3"))
        assert not a.cached and a.png[:8] == b"\x89PNG\r\n\x1a\n" and llm.stats.retries == 1


def test_a_model_without_a_price_is_never_sent_under_a_cap(openai_server, tmp_path):
    srv = openai_server
    with _llm(srv, tmp_path, max_cost=1.0, concurrency=1) as llm:  # check_prices not called: the client refuses anyway
        outs = llm.chat_many([L.ChatRequest("q1"), L.ChatRequest("q2")])
    assert [o.status for o in outs] == ["cost-cap", "cost-cap"] and srv.requests == []
    assert outs[0].reason.startswith("--max-cost needs a price for fake-vlm, which the built-in table lacks")


def test_missing_openai_package_gets_the_pip_hint(openai_server, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` now fails as if it were not installed
    with _llm(openai_server, tmp_path) as llm:
        with pytest.raises(
            InputError, match=r"^model access needs the openai package: pip install 'vhmine\[models\]'$"
        ):
            llm.chat(L.ChatRequest("q"))


def test_a_negative_retry_after_does_not_crash_the_back_off(tmp_path):
    class Resp:
        headers = {"retry-after": "-5"}

    class Err(Exception):
        response = Resp()

    llm = L.LLM(L.LLMOptions(model="m", cache=tmp_path / "c.db", progress=False))
    try:
        assert 0.0 <= llm._retry_wait(0, Err()) <= 0.1
    finally:
        llm.close()


def test_the_cache_key_holds_the_endpoint_without_credentials_and_old_answers_stay_found(tmp_path, two_servers):
    a, b = two_servers
    assert (
        L.safe_endpoint("https://u:pw@GW.example.com:443/v1/?api-key=abc&token=t&api-version=2024-06-01")
        == "https://gw.example.com/v1?api-version=2024-06-01"
    )
    assert L.safe_endpoint("http://127.0.0.1:8000/v1?sig=s3cret") == "http://127.0.0.1:8000/v1"
    # an answer an older vhmine cached (key without the endpoint) is found on the endpoint it came from only
    from vhmine.llm.cache import legacy_request_key

    with L.LLM(L.LLMOptions(model="m", base_url=a.base_url, cache=tmp_path / "c.db", progress=False)) as llm:
        req = L.ChatRequest("Old question?")
        payload = {
            "system": None,
            "prompt": req.prompt,
            "images": [],
            "params": {"temperature": 0.0, "max_tokens": 512},
            "max_image_bytes": L.MAX_IMAGE_BYTES,
        }
        record = {
            "text": "an old answer from a",
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "finish_reason": "stop",
            "served_model": "m",
            "images": [],
            "cost": 0.0,
        }
        llm.cache.put(legacy_request_key("chat", "m", payload), "chat", "m", a.base_url, payload, record, 0.0)
        assert llm.chat(req).text == "an old answer from a" and a.requests == []
    with L.LLM(L.LLMOptions(model="m", base_url=b.base_url, cache=tmp_path / "c.db", progress=False)) as llm:
        assert llm.chat(req).text == "There are 9." and len(b.requests) == 1


def test_concurrent_failures_count_exactly_and_the_first_stop_reason_holds(openai_server, tmp_path):
    srv = openai_server
    srv.faults = ["500"] * 200  # every request fails; no retries: each failure is one streak step
    with L.LLM(
        L.LLMOptions(
            model="m", base_url=srv.base_url, cache=tmp_path / "c.db", max_retries=0, concurrency=8, progress=False
        )
    ) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(64)])
        sent = len(srv.chats())
        assert llm.stats.sent == sent and llm.down_streak == sent  # every failure counted once
        assert str(llm.stopped).endswith(
            "is down (8 requests in a row failed, last: HTTP 500: The server had an error); rerun when it is back"
        )
    assert 8 <= sent < 64 and [o.status for o in outs] == ["unavailable"] * 64
    not_sent = {o.reason for o in outs if o.reason.startswith("not sent: ")}
    assert (
        not_sent == {f"not sent: {llm.stopped}"}
        and len([o for o in outs if o.reason.startswith("not sent")]) == 64 - sent
    )


def test_concurrent_answers_settle_the_budget_exactly(openai_server, tmp_path):
    srv = openai_server
    srv.usage = (1000, 0)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 1.0, "output": 0.0}}))  # $0.001 a request
    with L.LLM(
        L.LLMOptions(
            model="m",
            base_url=srv.base_url,
            cache=tmp_path / "c.db",
            concurrency=8,
            max_cost=10.0,
            prices=prices,
            progress=False,
        )
    ) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(120)])
        assert all(o.ok for o in outs) and llm.stats.sent == 120 and llm.down_streak == 0
        assert llm.spent == pytest.approx(0.12, abs=1e-12) and llm.budget._reserved == pytest.approx(0.0, abs=1e-12)


def _slow_run(srv, tmp_path, n, concurrency, max_retries, timeout_s, retry_wait_s):
    """`n` requests to a server that takes connections but answers after 30 s: (outcomes, stop, seconds, sent)."""
    import openai  # noqa: F401  (imported before the clock starts: the bound is on waiting for the endpoint)

    srv.delay_s = 30.0
    with _llm(
        srv, tmp_path, concurrency=concurrency, max_retries=max_retries, timeout_s=timeout_s, retry_wait_s=retry_wait_s
    ) as llm:
        t = time.monotonic()
        outs = llm.chat_many([L.ChatRequest(f"q{i} {tmp_path.name}") for i in range(n)])
        took = time.monotonic() - t
        return outs, llm.stopped, took, llm.stats.sent


def _back_off_s(retry_wait_s: float, k: int) -> float:
    """The most a run can wait in back-off between k requests of one slot: retry_wait_s doubled each retry."""
    return sum(retry_wait_s * 2**a for a in range(k - 1))


@pytest.mark.parametrize("concurrency", [1, 4])
def test_an_endpoint_that_does_not_answer_in_time_stops_after_the_time_outs_it_states(
    openai_server, tmp_path, concurrency
):
    """16 requests, 4 retries each, --timeout 0.5: max(3, concurrency) time-outs in a row stop the run, so it ends
    within that many --timeout periods and their back-off (not 16 x 5 periods), and says so in words."""
    k = max(3, concurrency)
    outs, stop, took, sent = _slow_run(openai_server, tmp_path, 16, concurrency, 4, 0.5, 0.2)
    assert str(stop) == (
        f"{openai_server.base_url} does not answer in time: {k} requests in a row timed out after "
        "0.5 s each (--timeout), so nothing more is sent; if the model is only slow, raise --timeout "
        "or lower --concurrency"
    )
    assert k <= sent <= k + concurrency - 1 and len(openai_server.chats()) == sent  # nothing sent after the stop
    assert took < k * 0.5 + _back_off_s(0.2, k) + 2.0, (
        took
    )  # the stated figure: k requests x 0.5 s (2 s: a loaded machine)
    assert [o.status for o in outs] == ["unavailable"] * 16
    assert all("Error" not in o.reason and "is down" not in o.reason for o in outs), outs[0].reason


@pytest.mark.slow
@settings(max_examples=8)
@given(n=st.integers(1, 12), concurrency=st.integers(1, 6), max_retries=st.integers(0, 3))
def test_property_time_outs_bound_the_run_whatever_the_number_of_requests(
    openai_server, tmp_path_factory, n, concurrency, max_retries
):
    """Whatever the requests, slots and retries: at most max(3, concurrency) + concurrency - 1 requests are sent to
    an endpoint that never answers in time, and the run ends within k periods of --timeout and their back-off."""
    timeout_s, k = 0.2, max(3, concurrency)
    openai_server.reset()
    outs, stop, took, sent = _slow_run(
        openai_server, tmp_path_factory.mktemp("slow"), n, concurrency, max_retries, timeout_s, 0.05
    )
    attempts = n * (max_retries + 1)
    assert sent <= min(attempts, k + concurrency - 1)
    assert took < k * timeout_s + _back_off_s(0.05, k) + 2.0, took
    assert [o.status for o in outs] == ["unavailable"] * n
    if attempts >= k:
        assert str(stop).startswith(
            f"{openai_server.base_url} does not answer in time: {k} requests in a row timed out"
        )
    assert stop is None or "does not answer in time" in str(stop)


@pytest.mark.parametrize(
    "fault, got",
    [
        ("malformed", 'a body that is not JSON (\'{"id": "chatcmpl-x", "choices": [ {"message":\')'),
        ("no-choices", "an answer with no choices (an empty choices list)"),
    ],
)
def test_an_unreadable_answer_says_what_came_back(openai_server, tmp_path, fault, got):
    srv = openai_server
    srv.faults = [fault] * 40
    with _llm(srv, tmp_path, concurrency=4, max_retries=1) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(8)])
        stop = llm.stopped
    assert outs[0].reason == f"fake-vlm at {srv.base_url} sent an unreadable answer 2 times (last: {got}); rerun later"
    assert str(stop) == (
        f"{srv.base_url} answers, but nothing readable (4 requests in a row got {got}): check that "
        "--base-url is an OpenAI-compatible endpoint"
    )
    assert [o.status for o in outs] == ["malformed"] * 8 and len(srv.chats()) < 16  # the stop cut the rest short
    assert all("Malformed" not in o.reason and "Error" not in o.reason for o in outs)
