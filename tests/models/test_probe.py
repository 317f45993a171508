"""vhmine.models.probe and `vhmine probe` against a real loopback OpenAI-compatible server: YNQ judged by
rule, OEQ by an LLM judge or left for workers, reruns that cost nothing, a refusal recorded with the run
going on and exit status 3, a killed run that resumes, and no API key in any file written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import make_ready_store, mode_responses, probed_store
from openai_server import API_KEY, chat_images, chat_text

from vhmine import curate as C
from vhmine import llm as L
from vhmine.llm import LLMOptions
from vhmine.models.probe import ProbeOptions, hallucinations, judge_verdict, probe
from vhmine.rules import answers as A

REPO = Path(__file__).resolve().parents[2]


def _responses(store):
    from sqlalchemy import select

    from vhmine.store import Response

    with store.session(write=False) as s:
        return list(s.scalars(select(Response)))


def _opts(srv, tmp_path, **kw):
    return LLMOptions(
        model="victim-vlm",
        base_url=srv.base_url,
        cache=tmp_path / "cache.db",
        retry_wait_s=0.01,
        timeout_s=5,
        progress=False,
        **kw,
    )


def test_probe_judges_by_rule_and_llm_and_a_rerun_asks_nothing(openai_server, tmp_path):
    srv = openai_server
    store = make_ready_store(tmp_path)
    res = probe(store, ProbeOptions(_opts(srv, tmp_path), judge="judge-llm"))
    per = res.per_mode()
    for mode in ("counting", "color"):
        assert per[mode] == Counter(instances=6, answered=6, hallucinated=4, correct=2)
    assert not res.partial and res.sent == 12 + 4  # 12 victim answers, 4 OEQ judged
    rows = _responses(store)
    assert len(rows) == 12 and {r.model for r in rows} == {"victim-vlm"}
    ynq = [r for r in rows if r.prompt.endswith("Please answer yes or no.")]
    assert len(ynq) == 8 and {r.judge for r in ynq} == {"rule:vhtest"}
    oeq = [r for r in rows if r not in ynq]
    assert {r.verdict for r in oeq} == {"hallucinated"}
    assert all(r.judge.startswith("llm:judge-llm judge_oeq@v1#") for r in oeq)
    # the victim saw the image and the bare question; the judge the question, references and answer
    victim = [b for b in srv.chats() if b["model"] == "victim-vlm"]
    assert all(len(chat_images(b)) == 1 for b in victim)
    judged = [chat_text(b) for b in srv.chats() if b["model"] == "judge-llm"]
    assert any(
        "Question: How many cats are there in the picture?\nReference answer(s), any one of which is correct: 3\n"
        "Student's answer: An answer to: How many cats are there in the picture?" in t
        for t in judged
    )
    # every instance hallucinated on counts once, with the error spelled out
    hs = hallucinations(store, "counting")
    assert len(hs) == 4 and all(h.model == "victim-vlm" for h in hs)
    assert any(h.error == "the model answered yes, but the correct answer is no" for h in hs)
    # a rerun: nothing asked, nothing added
    n = len(srv.requests)
    again = probe(store, ProbeOptions(_opts(srv, tmp_path), judge="judge-llm"))
    assert len(srv.requests) == n and {i.status for i in again.items} == {"cached"}
    assert again.per_mode()["color"]["hallucinated"] == 4 and len(_responses(store)) == 12
    assert "counting         6        6       4       2       0        0      0" in again.summary()
    store.close()


def test_without_a_judge_oeq_waits_for_workers_then_a_judge_fills_in(openai_server, tmp_path):
    srv = openai_server
    store = make_ready_store(tmp_path)
    res = probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["counting"]))
    assert res.per_mode()["counting"] == Counter(instances=6, answered=6, hallucinated=2, correct=2, unjudged=2)
    oeq = [r for r in _responses(store) if r.verdict is None]
    assert len(oeq) == 2 and {r.judge for r in oeq} == {None}
    C.add_worker(store, "bob")
    C.work.label_response(store, "bob", oeq[0].id, "hallucinated")  # a worker's label counts as a success
    assert len(hallucinations(store, "counting")) == 3
    n = len(srv.chats())
    probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["counting"], judge="judge-llm"))
    assert [b["model"] for b in srv.chats()[n:]] == ["judge-llm", "judge-llm"]  # the victim is not asked again
    assert len(hallucinations(store, "counting")) == 4
    store.close()


def test_an_answer_labelled_no_answer_is_counted_apart_and_is_no_hallucination(openai_server, tmp_path):
    # issue 32: "I cannot tell from this image." had only correct / hallucinated to be labelled with
    srv = openai_server
    store = make_ready_store(tmp_path)
    probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["counting"]))
    oeq = [r for r in _responses(store) if r.verdict is None]
    C.add_worker(store, "bob")
    C.work.label_response(store, "bob", oeq[0].id, "no answer")
    assert C.work.response_verdicts(store, [oeq[0].id])[oeq[0].id].verdict == "no answer"
    res = probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["counting"]))  # from the cache: the verdicts now
    want = Counter(instances=6, answered=6, hallucinated=2, correct=2, unjudged=1)
    want["no answer"] = 1
    assert res.per_mode()["counting"] == want
    assert len(hallucinations(store, "counting")) == 2  # not an example of a hallucination to describe
    lines = res.summary().splitlines()
    assert lines[1].split()[5:8] == ["no", "ans.", "unjudged"]
    assert next(x for x in lines if x.startswith("counting")).split() == ["counting", "6", "6", "2", "2", "1", "1", "0"]
    store.close()


def _cli(tmp_path, srv, *args, extra_env=None):
    env = dict(os.environ, OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=srv.base_url, HF_HUB_OFFLINE="1")
    env.update(extra_env or {})
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "probe",
        "--model",
        "victim-vlm",
        "--db",
        str(tmp_path / "store.db"),
        "--cache",
        str(tmp_path / "cache.db"),
        "--retry-wait",
        "0.01",
        *args,
    ]
    return cmd, env


@pytest.mark.slow
def test_probe_ends_by_naming_the_next_step(openai_server, tmp_path):
    """Judged: describe the hallucinations; open answers left unjudged: label them first (the app's page)."""
    make_ready_store(tmp_path).close()

    def last_line(*args):
        cmd, env = _cli(tmp_path, openai_server, *args)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()[-1]

    assert last_line("--mode", "counting") == (
        "next: label the 2 unjudged answer(s) on the app's Label answers page (vhmine curate --db store.db), "
        "or probe again with --judge MODEL; then vhmine describe --model MODEL --db store.db"
    )
    assert last_line("--judge", "judge-llm") == (
        "next: vhmine describe --model MODEL --db store.db   (what makes victim-vlm hallucinate, per mode, from its 8 "
        "hallucination(s); then vhmine generate)"
    )


@pytest.mark.slow
def test_cli_records_a_refusal_goes_on_exits_3_and_writes_no_key(openai_server, tmp_path):
    srv = openai_server
    make_ready_store(tmp_path).close()
    srv.refuse = lambda body: "exactly 2" in chat_text(body)
    cmd, env = _cli(tmp_path, srv, "--judge", "judge-llm")
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "counting         6        4       3       1       0        0      2" in r.stdout
    assert "color            6        6       4       2       0        0      0" in r.stdout
    assert r.stdout.count(": refused: victim-vlm at http://127.0.0.1:") == 2
    assert "partial run: 2 instance(s) not answered; rerun the same command to ask only those" in r.stdout
    # the key: sent on every request, written nowhere
    assert {q["headers"]["authorization"] for q in srv.requests} == {f"Bearer {API_KEY}"}
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "cache.db" for p in written) and any(p.name == "store.db" for p in written)
    assert [p for p in written if API_KEY.encode() in p.read_bytes()] == []
    assert API_KEY not in r.stdout + r.stderr
    # a rerun asks only the two refused ones (still refused) and nothing else
    n = len(srv.chats())
    r2 = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r2.returncode == 3 and len(srv.chats()) == n + 2
    srv.refuse = lambda body: False
    r3 = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r3.returncode == 0, r3.stdout + r3.stderr
    assert "counting         6        6       4       2       0        0      0" in r3.stdout


@pytest.mark.slow
def test_a_killed_probe_resumes_where_it_stopped(openai_server, tmp_path):
    srv = openai_server
    make_ready_store(tmp_path).close()
    srv.delay_s = 0.4
    cmd, env = _cli(tmp_path, srv, "--concurrency", "1", "--kind", "YNQ")
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = time.monotonic()
    while len(srv.chats()) < 4 and time.monotonic() - t < 60:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    first = [(chat_text(b), chat_images(b)[0]) for b in srv.chats()]
    assert 4 <= len(first) < 8  # killed mid-run
    srv.delay_s = 0.0
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    every = Counter((chat_text(b), chat_images(b)[0]) for b in srv.chats())
    assert len(every) == 8  # the 8 YNQ instances, each (question, image) asked...
    assert sum(n - 1 for n in every.values()) <= 1  # ...once, but the one in flight at the kill
    from vhmine.store import open_store

    with open_store(tmp_path / "store.db") as store:
        rows = _responses(store)
    assert len(rows) == 8 and len({r.instance_id for r in rows}) == 8  # one response per instance


@pytest.mark.slow
def test_cli_cost_cap_stops_cleanly(openai_server, tmp_path):
    srv = openai_server
    srv.usage = (1000, 0)
    make_ready_store(tmp_path).close()
    (tmp_path / "prices.json").write_text('{"victim-vlm": {"input": 10.0, "output": 0.0}}')
    cmd, env = _cli(
        tmp_path, srv, "--concurrency", "1", "--max-cost", "0.045", "--prices", str(tmp_path / "prices.json")
    )
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert len(srv.chats()) == 4 and "$0.0400 spent" in r.stdout
    assert r.stdout.count("past --max-cost") == 1, r.stdout  # one line for the 8 instances the cap left unsent
    assert "  not sent: 8 instance(s) past the cost cap: cost cap reached: $0.0400 spent, $0.0000 in flight" in r.stdout
    assert "past --max-cost $0.0450; rerun with a higher --max-cost" in r.stdout and ": cost-cap: " not in r.stdout
    cmd, env = _cli(tmp_path, srv, "--max-cost", "0.045")
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--max-cost needs a price for victim-vlm" in r.stderr and len(srv.chats()) == 4


@pytest.mark.parametrize(
    "answer, vhtest, firstword, pope, strict",
    [
        ("Yes", True, True, True, True),
        ("yes.", True, True, True, True),
        ("No, there is not.", False, False, False, None),
        ("Yes, but it is not red.", True, True, False, None),  # POPE: any "not" in the first sentence means no
        ("There is no cat.", None, None, False, None),
        ("I think so", None, None, True, None),
        ("", None, None, True, None),
        ("Yesterday", True, None, True, None),  # VHTest reads the first letters, not the first word
        ("Not sure", False, None, True, None),  # POPE looks for "not", "no" and "No", not "Not"
        ("Nope", False, None, True, None),
    ],
)
def test_yes_no_rules(answer, vhtest, firstword, pope, strict):
    assert tuple(A.parse_yes_no(answer, r) for r in ("vhtest", "firstword", "pope", "strict")) == (
        vhtest,
        firstword,
        pope,
        strict,
    )
    assert A.parse_yes_no(answer) is vhtest  # the default rule


def test_judge_verdicts_and_unknown_rule():
    assert [judge_verdict(t) for t in ("Correct.", "**incorrect**", "unclear", "The answer is correct", "")] == [
        "correct",
        "hallucinated",
        None,
        None,
        None,
    ]
    from vhmine.errors import InputError

    with pytest.raises(
        InputError, match=r"^unknown yes/no rule 'lenient': choose one of vhtest, firstword, pope, strict, vlmevalkit$"
    ):
        A.get_rule("lenient")


def test_an_unreadable_yes_no_answer_labelled_by_a_worker_keeps_its_words(openai_server, tmp_path):
    srv = openai_server
    srv.responder = lambda body: "I cannot tell from this picture."
    store = make_ready_store(tmp_path)
    res = probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["color"], kinds=["YNQ"]))
    assert res.per_mode()["color"]["unjudged"] == 4  # unreadable: no verdict, not "no"
    rid = next(r.id for r in _responses(store) if r.verdict is None)
    C.work.label_response(store, "alice", rid, "hallucinated")
    [h] = hallucinations(store, "color")
    assert h.error.startswith("the model answered 'I cannot tell from this picture.', but the correct answer is ")
    store.close()


def test_probe_on_two_endpoints_never_mixes_their_answers(tmp_path, two_servers):
    from sqlalchemy import select

    from vhmine.models.probe import ProbeOptions, hallucinations, probe
    from vhmine.store import Response

    a, b = two_servers
    store = make_ready_store(tmp_path)

    def run(srv):
        opts = L.LLMOptions(
            model="same-name", base_url=srv.base_url, cache=tmp_path / "cache.db", retry_wait_s=0.01, progress=False
        )
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


def test_probe_hallucinations_follow_the_workers(tmp_path, openai_server):
    from vhmine.models.probe import ProbeOptions, hallucinations, probe

    srv = openai_server
    srv.responder = lambda body: "Yes"
    store = probed_store(tmp_path, srv)
    rows = mode_responses(store, "counting")
    wrong = [rid for rid, v in rows if v == "hallucinated"]
    right = [rid for rid, v in rows if v == "correct"]
    assert len(wrong) == 2 and len(right) == 2
    assert {h.response_id for h in hallucinations(store, "counting")} == set(wrong)
    C.work.label_response(store, "bob", wrong[0], "correct")  # the rule said hallucinated; the workers say correct
    C.work.label_response(store, "carol", wrong[0], "correct")
    C.work.label_response(store, "bob", wrong[1], "correct")  # a tie: no verdict
    C.work.label_response(store, "carol", wrong[1], "hallucinated")
    C.work.label_response(store, "bob", right[0], "hallucinated")  # the rule said correct; one worker says hallucinated
    assert {h.response_id for h in hallucinations(store, "counting")} == {right[0]}
    # probe's own summary of a rerun shows the verdicts that count
    again = probe(
        store,
        ProbeOptions(
            L.LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "cache.db", progress=False),
            kinds=["YNQ"],
            modes=["counting"],
        ),
    )
    assert again.per_mode()["counting"] == {
        "instances": 4,
        "answered": 4,
        "hallucinated": 1,
        "correct": 2,
        "unjudged": 1,
    }
    store.close()


def test_probe_adopts_a_response_stored_before_endpoints_were_recorded(tmp_path, openai_server):
    from sqlalchemy import select

    from vhmine.models.probe import ProbeOptions, probe, probe_prompt
    from vhmine.store import Response

    srv = openai_server
    srv.responder = lambda body: "Yes"
    store = make_ready_store(tmp_path)
    ynq = [r for r in C.ready_instances(store) if r.kind == "YNQ" and r.mode == "counting"]
    same, other = ynq[0], ynq[1]
    old_same = C.work.add_response(store, same.id, "victim", probe_prompt("YNQ").render(question=same.question), "Yes")
    old_other = C.work.add_response(
        store, other.id, "victim", probe_prompt("YNQ").render(question=other.question), "No"
    )
    C.work.label_response(store, "alice", old_same, "hallucinated")
    res = probe(
        store,
        ProbeOptions(
            L.LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "c.db", progress=False),
            kinds=["YNQ"],
            modes=["counting"],
        ),
    )
    by_id = {i.instance_id: i for i in res.items}
    assert (by_id[same.id].status, by_id[same.id].verdict) == ("cached", "hallucinated")  # the label still counts
    with store.session(write=False) as s:
        rows = {r.id: r for r in s.scalars(select(Response))}
    assert rows[old_same].endpoint == srv.base_url  # adopted: this endpoint gave the same answer
    assert rows[old_other].endpoint is None  # another answer: kept apart, and a new response added
    assert len(rows) == 1 + 4 and by_id[other.id].status == "answered"


def test_a_rerun_reads_stored_yes_no_answers_against_the_current_truth(openai_server, tmp_path):
    """A truth fixed in place (a store from before errata carried through, curate.derived): the rerun's verdicts
    follow it without asking anything. Before, the stored verdict stayed."""
    from vhmine.store import Instance

    srv = openai_server
    store = make_ready_store(tmp_path)
    probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["color"], kinds=["YNQ"]))
    yes_no = [r for r in C.ready_instances(store, "color", "YNQ") if not r.truth]  # the victim says "yes": wrong
    with store.session() as s:
        s.get(Instance, yes_no[0].id).truth = True
        s.get(Instance, yes_no[0].id).answers = ["Yes"]
    n = len(srv.requests)
    again = probe(store, ProbeOptions(_opts(srv, tmp_path), modes=["color"], kinds=["YNQ"]))
    assert len(srv.requests) == n
    assert {i.instance_id: i.verdict for i in again.items}[yes_no[0].id] == "correct"
    assert {r.instance_id: r.verdict for r in _responses(store)}[yes_no[0].id] == "correct"
    assert again.per_mode()["color"]["hallucinated"] == 1
    store.close()


def test_probe_of_an_endpoint_that_does_not_answer_in_time_stops_in_one_line(openai_server, tmp_path):
    """The same client stop as eval's: 12 questions, a server that answers after 30 s, --timeout 0.5 at
    --concurrency 4: one line after 4 time-outs (about one --timeout), not 12 x 5 of them."""
    from vhmine.errors import LLMUnavailableError

    srv = openai_server
    store = make_ready_store(tmp_path)
    srv.delay_s = 30.0
    opts = LLMOptions(
        model="victim-vlm",
        base_url=srv.base_url,
        cache=tmp_path / "cache.db",
        retry_wait_s=0.01,
        timeout_s=0.5,
        concurrency=4,
        progress=False,
    )
    t = time.monotonic()
    with pytest.raises(LLMUnavailableError) as got:
        probe(store, ProbeOptions(opts))
    assert time.monotonic() - t < 4 * 0.5 + 2.0
    assert str(got.value) == (
        f"probe of victim-vlm stopped: {srv.base_url} does not answer in time: 4 requests in a "
        "row timed out after 0.5 s each (--timeout), so nothing more is sent; if the model is "
        "only slow, raise --timeout or lower --concurrency"
    )
    assert _responses(store) == []
