"""Issue 8, right answers from models, against real loopback OpenAI-compatible servers (openai_server.py):

- `vhmine eval --model` never turns a failed request into a score: no key, a rejected key or an
  unreachable endpoint stop it with the reason; failed items are listed, left out of every figure, and the
  run exits 3 (partial), as probe does;
- the request cache and probe's "already answered" check are keyed by the endpoint: two servers that serve
  one model name never see each other's answers;
- workers' labels override the automatic verdict in probe's hallucinations, describe's examples and eval's
  `labels` scorer, through one majority function (a tie: no verdict);
- the client's shared state (stop reason, failure streak, budget) counts exactly under concurrency.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from openai_server import API_KEY, chat_text, openai_server, start_server  # noqa: F401  (fixture)
from helpers import make_ready_store, write_tiny_bench

from vhmine import curate as C
from vhmine import llm as L


@pytest.fixture
def bench_dir(tmp_path):
    """Six items over two images: two OEQ (counting), four YNQ (two counting, two color)."""
    return write_tiny_bench(tmp_path, {"o2": "How many dogs are there in the picture?", "y2": "Are there exactly 3 dogs in the picture?"})


def _says_yes(body):
    """Yes to every yes/no question but the blue car; three to every open one."""
    text = chat_text(body)
    if "ONLY answer yes or no." in text:
        return "No" if "blue" in text else "Yes"
    return "There are 3."


def _eval(tmp_path, *args, out="ev"):
    from typer.testing import CliRunner

    from vhmine.cli import app

    return CliRunner().invoke(app, ["eval", "--cache", str(tmp_path / "cache.db"), "--retry-wait", "0.01",
                                    "--out", str(tmp_path / out), *args])


def _details(folder: Path, model: str) -> dict[str, dict]:
    return {d["id"]: d for d in map(json.loads, (folder / f"answers-{model}.jsonl").read_text().splitlines())}


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- eval: failed requests are never a score -------------------------------------------------------------

def test_eval_without_a_key_stops_with_the_reason(bench_dir, tmp_path, openai_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    r = _eval(tmp_path, "--bench", str(bench_dir), "--model", "fake-vlm")
    assert r.exit_code == 2, r.output
    assert "eval stopped while asking fake-vlm, nothing scored: OPENAI_API_KEY is not set, so nothing can be sent " \
           f"to {openai_server.base_url}: export OPENAI_API_KEY" in r.output
    assert "accuracy" not in r.output and not (tmp_path / "ev" / "report.json").exists()
    assert openai_server.requests == []


def test_eval_with_a_rejected_key_stops_with_the_reason(bench_dir, tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-rejected-but-secret-1234")
    r = _eval(tmp_path, "--bench", str(bench_dir), "--model", "fake-vlm", "--concurrency", "1")
    assert r.exit_code == 2, r.output
    assert f"nothing scored: {openai_server.base_url} rejected the API key (401: Incorrect API key provided: ***): " \
           "check OPENAI_API_KEY" in r.output
    assert "rejected-but-secret" not in r.output and not (tmp_path / "ev" / "report.json").exists()
    assert len(openai_server.requests) == 1  # the client stopped at the first 401


@pytest.mark.parametrize("concurrency, why", [
    ("4", "{url} is down (4 requests in a row failed, last: APIConnectionError); rerun when it is back"),  # client stop
    ("8", "fake-vlm at {url} failed 1 times (last: APIConnectionError)"),  # 6 requests: no stop, yet none answered
])
def test_eval_against_an_unreachable_endpoint_stops_with_the_reason(bench_dir, tmp_path, monkeypatch, concurrency, why):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    r = _eval(tmp_path, "--bench", str(bench_dir), "--model", "fake-vlm", "--base-url", url, "--max-retries", "0",
              "--concurrency", concurrency)
    assert r.exit_code == 2, r.output
    assert "eval stopped while asking fake-vlm, nothing scored: " + why.format(url=url) in r.output
    assert not (tmp_path / "ev" / "report.json").exists()


def test_eval_with_some_failed_requests_is_partial_and_never_scores_them(bench_dir, tmp_path, openai_server):
    srv = openai_server
    srv.responder = _says_yes
    srv.refuse = lambda body: "red" in chat_text(body)  # y3: a content-filter refusal
    srv.faults = ["500"]  # the first request (o1, at concurrency 1) gets a 500, and no retry is allowed
    args = ["--bench", str(bench_dir), "--model", "fake-vlm", "--base-url", srv.base_url, "--concurrency", "1",
            "--max-retries", "0"]
    r = _eval(tmp_path, *args)
    assert r.exit_code == 3, r.output
    # o2 wrong (3 is not 4 or 5), y1 right, y2 wrong (yes), y4 right: 2 of 4; o1 and y3 are not scored
    assert "fake-vlm: accuracy 50.0% over 4 item(s); 2 failed, not scored (refused 1, unavailable 1)" in r.output
    assert "    no answer: o1: unavailable: fake-vlm at http://127.0.0.1:" in r.output
    assert "    no answer: y3: refused: fake-vlm at http://127.0.0.1:" in r.output
    assert "partial run: failed items are left out of every figure" in r.output
    report = json.loads((tmp_path / "ev" / "report.json").read_text())["models"]["fake-vlm"]
    assert (report["answered"], report["failed"]) == (4, 2)
    assert report["failed_by_status"] == {"refused": 1, "unavailable": 1}
    assert [f["id"] for f in report["failed_items"]] == ["o1", "y3"]
    overall = report["metrics"]["overall"]
    assert (overall["n"], overall["correct"], overall["unreadable"]) == (4, 2, 0)  # a failure is never "unreadable"
    assert report["oeq_unjudged"] == 0
    details = _details(tmp_path / "ev", "fake-vlm")
    failed = {i for i, d in details.items() if d["read_as"] == "failed"}
    answered = {i for i, d in details.items() if d["read_as"] != "failed"}
    assert failed == {"o1", "y3"} and answered == {"o2", "y1", "y2", "y4"} and not failed & answered
    assert all(details[i]["correct"] is None and details[i]["failure"] for i in failed)
    assert not any("failure" in details[i] for i in answered)
    md = (tmp_path / "ev" / "report.md").read_text()
    assert "- fake-vlm: 2 (refused 1, unavailable 1)" in md
    # a rerun asks only the two that failed; with the server well again, every item is scored
    srv.refuse = lambda body: False
    n = len(srv.chats())
    r = _eval(tmp_path, *args, out="ev2")
    assert r.exit_code == 0, r.output
    assert len(srv.chats()) == n + 2
    assert "fake-vlm: accuracy 66.7% over 6 item(s)" in r.output


def test_a_judge_that_fails_leaves_its_item_unscored(bench_dir, tmp_path, openai_server):
    from vhmine.eval.job import EvalOptions, evaluate

    srv = openai_server
    srv.responder = lambda body: "correct" if "correct, incorrect or unclear" in chat_text(body) else _says_yes(body)
    srv.refuse = lambda body: "correct, incorrect or unclear" in chat_text(body) and "dogs" in chat_text(body)
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", models=["fake-vlm"], judge="fake-judge",
                               base_url=srv.base_url, llm={"cache": tmp_path / "c.db", "progress": False}))
    m = res.report["models"]["fake-vlm"]
    assert res.partial and (m["answered"], m["failed"], m["oeq_unjudged"]) == (5, 1, 0)
    assert m["failed_items"][0]["id"] == "o2"
    assert m["failed_items"][0]["why"].startswith("refused: the judge fake-judge gave no verdict: ")
    assert _details(tmp_path / "ev", "fake-vlm")["o2"]["answer"] == "There are 3."  # the model's answer is kept


# --- the endpoint is part of every "already answered" -------------------------------------------------

@pytest.fixture
def two_servers(monkeypatch):
    """Two loopback servers serving the same model name: one says yes to everything, the other no."""
    a, b = start_server(), start_server()
    a.responder = lambda body: "Yes" if "yes or no" in chat_text(body).lower() else "There are 3."
    b.responder = lambda body: "No" if "yes or no" in chat_text(body).lower() else "There are 9."
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield a, b
    for s in (a, b):
        s.shutdown()
        s.server_close()


def test_eval_on_two_endpoints_never_mixes_their_answers(bench_dir, tmp_path, two_servers):
    a, b = two_servers
    assert _eval(tmp_path, "--bench", str(bench_dir), "--model", "same-name", "--base-url", a.base_url,
                 out="ev-a").exit_code == 0
    assert _eval(tmp_path, "--bench", str(bench_dir), "--model", "same-name", "--base-url", b.base_url,
                 out="ev-b").exit_code == 0
    assert len(a.chats()) == 6 and len(b.chats()) == 6  # one cache file, yet b was asked everything
    ans_a = {i: d["answer"] for i, d in _details(tmp_path / "ev-a", "same-name").items()}
    ans_b = {i: d["answer"] for i, d in _details(tmp_path / "ev-b", "same-name").items()}
    assert set(ans_a.values()) == {"Yes", "There are 3."} and set(ans_b.values()) == {"No", "There are 9."}
    # the same endpoint spelled with a trailing slash is the same endpoint: answered from the cache
    assert _eval(tmp_path, "--bench", str(bench_dir), "--model", "same-name", "--base-url", b.base_url + "/",
                 out="ev-b2").exit_code == 0
    assert len(b.chats()) == 6
    assert {i: d["answer"] for i, d in _details(tmp_path / "ev-b2", "same-name").items()} == ans_b


def test_probe_on_two_endpoints_never_mixes_their_answers(tmp_path, two_servers):
    from sqlalchemy import select

    from vhmine.models.probe import ProbeOptions, hallucinations, probe
    from vhmine.store import Response

    a, b = two_servers
    store = make_ready_store(tmp_path)

    def run(srv):
        opts = L.LLMOptions(model="same-name", base_url=srv.base_url, cache=tmp_path / "cache.db", retry_wait_s=0.01,
                            progress=False)
        return probe(store, ProbeOptions(opts, kinds=["YNQ"]))

    ra = run(a)
    rb = run(b)
    assert {i.status for i in ra.items} == {"answered"} and {i.status for i in rb.items} == {"answered"}
    assert len(a.chats()) == 8 and len(b.chats()) == 8
    # all-yes hallucinates on the "no" questions, all-no on the "yes" ones
    assert ra.per_mode()["counting"]["hallucinated"] == 2 and rb.per_mode()["counting"]["hallucinated"] == 2
    with store.session(write=False) as s:
        rows = s.execute(select(Response.endpoint, Response.answer)).all()
    assert sorted(set(rows)) == sorted({(a.base_url, "Yes"), (b.base_url, "No")})
    # a rerun on either endpoint asks nothing and finds its own responses
    assert {i.status for i in run(b).items} == {"cached"} and len(b.chats()) == 8
    assert len(hallucinations(store, "counting")) == 4  # each instance once, from whichever endpoint failed it
    store.close()


def test_the_cache_key_holds_the_endpoint_without_credentials_and_old_answers_stay_found(tmp_path, two_servers):
    a, b = two_servers
    assert L.safe_endpoint("https://u:pw@GW.example.com:443/v1/?api-key=abc&token=t&api-version=2024-06-01") == \
        "https://gw.example.com/v1?api-version=2024-06-01"
    assert L.safe_endpoint("http://127.0.0.1:8000/v1?sig=s3cret") == "http://127.0.0.1:8000/v1"
    # an answer an older vhmine cached (key without the endpoint) is found on the endpoint it came from only
    from vhmine.llm.cache import legacy_request_key

    with L.LLM(L.LLMOptions(model="m", base_url=a.base_url, cache=tmp_path / "c.db", progress=False)) as llm:
        req = L.ChatRequest("Old question?")
        payload = {"system": None, "prompt": req.prompt, "images": [],
                   "params": {"temperature": 0.0, "max_tokens": 512}, "max_image_bytes": L.MAX_IMAGE_BYTES}
        record = {"text": "an old answer from a", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop",
                  "served_model": "m", "images": [], "cost": 0.0}
        llm.cache.put(legacy_request_key("chat", "m", payload), "chat", "m", a.base_url, payload, record, 0.0)
        assert llm.chat(req).text == "an old answer from a" and a.requests == []
    with L.LLM(L.LLMOptions(model="m", base_url=b.base_url, cache=tmp_path / "c.db", progress=False)) as llm:
        assert llm.chat(req).text == "There are 9." and len(b.requests) == 1


# --- workers' labels override the automatic verdict, one majority ------------------------------------

def test_majority_verdict_ties_give_no_verdict():
    assert C.majority_verdict(["correct", "hallucinated", "correct"]) == "correct"
    assert C.majority_verdict(["hallucinated"]) == "hallucinated"
    assert C.majority_verdict(["correct", "hallucinated"]) is None and C.majority_verdict([]) is None
    assert C.decide_verdict("hallucinated", "rule:vhtest", []) == C.ResponseVerdict("hallucinated", "rule:vhtest")
    assert C.decide_verdict("hallucinated", "rule:vhtest", ["correct"]) == C.ResponseVerdict("correct", "workers", 1)
    assert C.decide_verdict("correct", "rule:vhtest", ["correct", "hallucinated"]).verdict is None


def _probed_store(tmp_path, srv):
    """A probed store (YNQ by rule: the all-yes victim is wrong on the 'no' questions), workers bob and carol."""
    from vhmine.models.probe import ProbeOptions, probe

    store = make_ready_store(tmp_path)
    probe(store, ProbeOptions(L.LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "cache.db",
                                           progress=False), kinds=["YNQ"]))
    for w in ("bob", "carol"):
        C.add_worker(store, w)
    return store


def _responses(store, mode):
    from sqlalchemy import select

    from vhmine.store import Instance, Response

    with store.session(write=False) as s:
        return s.execute(select(Response.id, Response.verdict).join(Instance, Instance.id == Response.instance_id)
                         .where(Instance.mode == mode).order_by(Response.id)).all()


def test_probe_hallucinations_follow_the_workers(tmp_path, openai_server):
    from vhmine.models.probe import ProbeOptions, hallucinations, probe

    srv = openai_server
    srv.responder = lambda body: "Yes"
    store = _probed_store(tmp_path, srv)
    rows = _responses(store, "counting")
    wrong = [rid for rid, v in rows if v == "hallucinated"]
    right = [rid for rid, v in rows if v == "correct"]
    assert len(wrong) == 2 and len(right) == 2
    assert {h.response_id for h in hallucinations(store, "counting")} == set(wrong)
    C.label_response(store, "bob", wrong[0], "correct")  # the rule said hallucinated; the workers say correct
    C.label_response(store, "carol", wrong[0], "correct")
    C.label_response(store, "bob", wrong[1], "correct")  # a tie: no verdict
    C.label_response(store, "carol", wrong[1], "hallucinated")
    C.label_response(store, "bob", right[0], "hallucinated")  # the rule said correct; one worker says hallucinated
    assert {h.response_id for h in hallucinations(store, "counting")} == {right[0]}
    # probe's own summary of a rerun shows the verdicts that count
    again = probe(store, ProbeOptions(L.LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "cache.db",
                                                   progress=False), kinds=["YNQ"], modes=["counting"]))
    assert again.per_mode()["counting"] == {"instances": 4, "answered": 4, "hallucinated": 1, "correct": 2,
                                            "unjudged": 1}
    store.close()


def test_describe_explains_only_what_the_workers_call_hallucinated(tmp_path, openai_server):
    from vhmine.models.describe import DescribeOptions, describe

    srv = openai_server
    srv.responder = lambda body: "Yes"
    store = _probed_store(tmp_path, srv)
    wrong = [rid for rid, v in _responses(store, "color") if v == "hallucinated"]
    for w in ("bob", "carol"):
        C.label_response(store, w, wrong[0], "correct")
    srv.responder = lambda body: "An explanation."
    res = describe(store, DescribeOptions(L.LLMOptions(model="describer", base_url=srv.base_url,
                                                       cache=tmp_path / "cache.db", progress=False),
                                          modes=["color"], examples=5, min_real=1))
    [md] = res.modes
    assert (md.real, md.hypothetical) == (1, 0)
    from sqlalchemy import select

    from vhmine.store import Description

    with store.session(write=False) as s:
        [example] = s.scalars(select(Description).where(Description.kind == "example")).all()
    assert example.sources[1] == wrong[1]  # the one the workers did not overturn
    store.close()


def test_eval_labels_scorer_uses_the_verdict_that_counts(tmp_path):
    from vhmine import formats as F
    from vhmine.eval.job import EvalOptions, evaluate
    from vhmine.export.job import ExportOptions, export_benchmark

    store = make_ready_store(tmp_path)
    export_benchmark(store, ExportOptions(out=tmp_path / "b", format="hf"))
    bench = F.load(tmp_path / "b")
    oeq = sorted(it.id for it in bench if it.kind == "OEQ")
    C.add_worker(store, "bob")
    judge = "llm:some-judge judge_oeq@v1#00000000"
    C.add_response(store, oeq[0], "m", "p", "an answer", "hallucinated", judge)  # judged only: the judge counts
    r1 = C.add_response(store, oeq[1], "m", "p", "an answer", "hallucinated", judge)  # workers overturn the judge
    C.label_response(store, "alice", r1, "correct")
    C.label_response(store, "bob", r1, "correct")
    r2 = C.add_response(store, oeq[2], "m", "p", "an answer", "correct", judge)  # tied workers: no verdict
    C.label_response(store, "alice", r2, "correct")
    C.label_response(store, "bob", r2, "hallucinated")
    r3 = C.add_response(store, oeq[3], "m", "p", "other words", "correct", judge)  # another answer: does not apply
    C.label_response(store, "alice", r3, "correct")
    store.close()
    preds = tmp_path / "m.jsonl"
    preds.write_text("".join(json.dumps({"id": it.id, "answer": "Yes" if it.kind == "YNQ" else "an answer"}) + "\n"
                             for it in bench))
    evaluate(EvalOptions(bench=tmp_path / "b", out=tmp_path / "ev", predictions=[("m", preds)], oeq="labels",
                         db=str(tmp_path / "store.db")))
    read_as = {i: d["read_as"] for i, d in _details(tmp_path / "ev", "m").items()}
    assert [read_as[i] for i in oeq] == ["wrong", "right", "unjudged", "unjudged"]


# --- the client's shared state under concurrency -------------------------------------------------------

def test_concurrent_failures_count_exactly_and_the_first_stop_reason_holds(openai_server, tmp_path):
    srv = openai_server
    srv.faults = ["500"] * 200  # every request fails; no retries: each failure is one streak step
    with L.LLM(L.LLMOptions(model="m", base_url=srv.base_url, cache=tmp_path / "c.db", max_retries=0, concurrency=8,
                            progress=False)) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(64)])
        sent = len(srv.chats())
        assert llm.stats.sent == sent and llm.down_streak == sent  # every failure counted once
        assert str(llm.stopped).endswith("is down (8 requests in a row failed, last: HTTP 500: The server had an "
                                         "error); rerun when it is back")
    assert 8 <= sent < 64 and [o.status for o in outs] == ["unavailable"] * 64
    not_sent = {o.reason for o in outs if o.reason.startswith("not sent: ")}
    assert not_sent == {f"not sent: {llm.stopped}"} and len([o for o in outs if o.reason.startswith("not sent")]) == 64 - sent


def test_concurrent_answers_settle_the_budget_exactly(openai_server, tmp_path):
    srv = openai_server
    srv.usage = (1000, 0)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 1.0, "output": 0.0}}))  # $0.001 a request
    with L.LLM(L.LLMOptions(model="m", base_url=srv.base_url, cache=tmp_path / "c.db", concurrency=8, max_cost=10.0,
                            prices=prices, progress=False)) as llm:
        outs = llm.chat_many([L.ChatRequest(f"q{i}") for i in range(120)])
        assert all(o.ok for o in outs) and llm.stats.sent == 120 and llm.down_streak == 0
        assert llm.spent == pytest.approx(0.12, abs=1e-12) and llm.budget._reserved == pytest.approx(0.0, abs=1e-12)


def test_probe_adopts_a_response_stored_before_endpoints_were_recorded(tmp_path, openai_server):
    from sqlalchemy import select

    from vhmine.models.probe import ProbeOptions, probe, probe_prompt
    from vhmine.store import Response

    srv = openai_server
    srv.responder = lambda body: "Yes"
    store = make_ready_store(tmp_path)
    ynq = [r for r in C.ready_instances(store) if r.kind == "YNQ" and r.mode == "counting"]
    same, other = ynq[0], ynq[1]
    old_same = C.add_response(store, same.id, "victim", probe_prompt("YNQ").render(question=same.question), "Yes")
    old_other = C.add_response(store, other.id, "victim", probe_prompt("YNQ").render(question=other.question), "No")
    C.label_response(store, "alice", old_same, "hallucinated")
    res = probe(store, ProbeOptions(L.LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "c.db",
                                                 progress=False), kinds=["YNQ"], modes=["counting"]))
    by_id = {i.instance_id: i for i in res.items}
    assert (by_id[same.id].status, by_id[same.id].verdict) == ("cached", "hallucinated")  # the label still counts
    with store.session(write=False) as s:
        rows = {r.id: r for r in s.scalars(select(Response))}
    assert rows[old_same].endpoint == srv.base_url  # adopted: this endpoint gave the same answer
    assert rows[old_other].endpoint is None  # another answer: kept apart, and a new response added
    assert len(rows) == 1 + 4 and by_id[other.id].status == "answered"
    store.close()


# --- a missing or rejected key stops every model stage once, with one line, as eval does ------------------

STAGE_ARGS = {
    "probe": ["probe", "--model", "fake-vlm"],
    "draft": ["draft", "--model", "fake-vlm"],
    "blind": ["blind", "--model", "fake-llm"],
    "describe": ["describe", "--model", "fake-vlm", "--mode", "counting", "--examples", "3"],
    "generate": ["generate", "--backend", "openai:dall-e-3", "--per-mode", "2", "--mode", "counting"],
}


@pytest.mark.parametrize("key", ["missing", "rejected"])
@pytest.mark.parametrize("stage", list(STAGE_ARGS))
def test_a_missing_or_rejected_key_stops_the_stage_once_with_one_line(tmp_path, openai_server, monkeypatch, stage, key):
    from typer.testing import CliRunner

    from vhmine.cli import app
    from vhmine.seed import seed_pairs

    store = make_ready_store(tmp_path)
    seed_pairs(store, tmp_path / "runs" / "t" / "pairs.parquet", per_mode=1, modes=["shape"])  # open pair tasks: draft
    store.close()
    base = ["--db", str(tmp_path / "store.db"), "--cache", str(tmp_path / "cache.db"), "--concurrency", "1",
            "--retry-wait", "0.01"]
    if stage == "generate":  # a description to render, written with a good key
        r = CliRunner().invoke(app, STAGE_ARGS["describe"] + base)
        assert r.exit_code == 0, r.output
    openai_server.requests.clear()
    if key == "missing":
        monkeypatch.delenv("OPENAI_API_KEY")
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-rejected-but-secret-1234")
    r = CliRunner().invoke(app, STAGE_ARGS[stage] + base)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if "OPENAI_API_KEY" in ln]
    assert len(lines) == 1, r.output  # once, not once per item
    assert lines[0].startswith("error: ") and " stopped: " in lines[0], lines[0]
    why = ("OPENAI_API_KEY is not set, so nothing can be sent to" if key == "missing" else
           f"{openai_server.base_url} rejected the API key (401")
    assert why in lines[0]
    assert "partial run" not in r.output and "not answered" not in r.output and "rejected-but-secret" not in r.output
    assert len(openai_server.requests) == (0 if key == "missing" else 1)  # the first 401 stops the client
