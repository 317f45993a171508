"""vhmine.eval.job: predictions files scored the same way as answers fetched from a model (a real OpenAI-
compatible server on loopback); reports side by side; unreadable answers counted, never taken as "no"."""

import json
import socket
from pathlib import Path

import pytest
from anchors import anchor
from helpers import answer_details, interrupt_when, without_intervals, write_tiny_bench
from openai_server import API_KEY, chat_images, chat_text

from vhmine import formats as F
from vhmine.errors import EvalError, FormatError, InputError
from vhmine.eval.job import EvalOptions, evaluate, load_predictions, match_oeq
from vhmine.rules.judge import judge_name, judge_prompt


@pytest.fixture
def bench_dir(tmp_path):
    return write_tiny_bench(tmp_path)


def _preds(path: Path, answers: dict) -> Path:
    path.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    return path


def test_match_accepts_any_reference_as_whole_words():
    assert match_oeq("I count four cats.", ("4", "5")) and match_oeq("Five.", ("4", "5"))
    assert not match_oeq("There are 14 cats.", ("4",)) and not match_oeq("", ("4",))


def test_predictions_of_two_models_side_by_side(bench_dir, tmp_path):
    a = _preds(
        tmp_path / "a.jsonl",
        {
            "o1": "There are three cats.",
            "o2": "4 or so",
            "y1": "Yes.",
            "y2": "Yes, three.",
            "y3": "I cannot tell.",
            "y4": "No",
        },
    )
    b = _preds(tmp_path / "b.jsonl", {"o1": "2", "o2": "2", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"})
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("model-a", a), ("model-b", b)]))
    ma = res.report["models"]["model-a"]["metrics"]
    # model-a: OEQ 2/2 right; YNQ y1 right, y2 wrong (said yes), y3 unreadable, y4 right
    assert ma["overall"]["accuracy"] == pytest.approx(4 / 6)
    assert ma["modes"]["counting"]["accuracy"] == pytest.approx(3 / 4) and ma["modes"]["color"]["accuracy"] == 0.5
    assert (ma["overall"]["unreadable"], ma["overall"]["tn"], ma["overall"]["fp"]) == (
        1,
        1,
        1,
    )  # unreadable is not "no"
    assert ma["overall"]["yes_ratio"] == pytest.approx(2 / 4)
    assert ma["overall"]["pair_accuracy"] == pytest.approx(1 / 2)  # OEQ pair right, YNQ pair wrong
    assert ma["overall"]["image_accuracy"] == 0.0  # A: y3 unreadable; B: y2 wrong
    md = without_intervals((tmp_path / "ev" / "report.md").read_text())
    assert "| model | counting | color | overall | pair accuracy | image accuracy |" in md
    assert "| model-a | 75.0 | 50.0 | 66.7 | 50.0 | 0.0 |" in md and "| model-b | 50.0 | 100.0 | 66.7 |" in md
    assert (tmp_path / "ev" / "accuracy_by_mode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    detail = [json.loads(line) for line in (tmp_path / "ev" / "answers-model-a.jsonl").read_text().splitlines()]
    assert {d["id"]: d["read_as"] for d in detail}["y3"] == "unreadable"
    assert json.loads((tmp_path / "ev" / "report.json").read_text())["rule"] == "vhtest"


def test_bad_predictions_are_named(bench_dir, tmp_path):
    bench = F.load(bench_dir)
    with pytest.raises(
        FormatError, match=r"1 id\(s\) are not in the benchmark .*\(first: 'zz'\): is it the right benchmark\?"
    ):
        load_predictions(_preds(tmp_path / "p.jsonl", {"o1": "3", "zz": "yes"}), bench)
    (tmp_path / "q.jsonl").write_text('{"id": "o1", "answer": "3"}\n{"id": "o2"}\n')
    with pytest.raises(FormatError, match=r"q\.jsonl, line 2, field answer: missing"):
        load_predictions(tmp_path / "q.jsonl", bench)
    with pytest.raises(EvalError, match=r"^5 of 6 items have no answer from m in predictions:.*--partial"):
        evaluate(
            EvalOptions(
                bench=bench_dir, out=tmp_path / "ev", predictions=[("m", _preds(tmp_path / "r.jsonl", {"o1": "3"}))]
            )
        )
    with pytest.raises(Exception, match=r"unknown yes/no rule 'loose'"):
        evaluate(
            EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", tmp_path / "r.jsonl")], rule="loose")
        )


def test_hallusionbench_result_file_is_scored_with_its_measures(tmp_path):
    res = evaluate(
        EvalOptions(
            bench=anchor("hallusionbench/HallusionBench.json"),
            out=tmp_path / "hb",
            partial=True,
            predictions=[("sample", anchor("hallusionbench/HallusionBench_result_sample.json"))],
        )
    )
    hb = res.report["models"]["sample"]["hallusionbench"]
    # the sample answers 254 of the benchmark's 1129 questions and cuts through 15 of the 117 question pairs it
    # touches: those are left out of qAcc (28 of the 102 complete pairs right; scored in part they gave 38 / 117)
    assert (round(hb["aAcc"] * 254), round(hb["qAcc"] * 102), round(hb["fAcc"] * 69)) == (152, 28, 13)
    assert (hb["question_pairs"], hb["figures"]) == (102, 69)
    assert (hb["incomplete_question_pairs"], hb["incomplete_figures"]) == (353, 277)  # the unanswered ones included
    assert "## HallusionBench" in (tmp_path / "hb" / "report.md").read_text()


@pytest.mark.slow
def test_model_on_a_loopback_server_with_a_judge(bench_dir, tmp_path, openai_server):
    srv = openai_server
    bench = F.load(bench_dir)

    def responder(body):
        text = chat_text(body)
        if "Reply with exactly one word: correct, incorrect or unclear." in text:  # the judge (judge.py's prompt)
            return "correct" if "any one of which is correct: 3\n" in text else "incorrect"  # the model always says 3
        if "ONLY answer yes or no." in text:
            return "Yes." if "exactly 3" in text or "red" in text else "I am not sure."
        return "There are 3 cats."

    srv.responder = responder
    llm = {"cache": tmp_path / "cache.db", "progress": False}
    res = evaluate(
        EvalOptions(
            bench=bench_dir,
            out=tmp_path / "ev",
            models=["fake-vlm"],
            oeq="judge",
            judge="fake-judge",
            base_url=srv.base_url,
            llm=llm,
        )
    )
    m = res.report["models"]["fake-vlm"]["metrics"]["overall"]
    # OEQ: judge says o1 right, o2 wrong; YNQ: y1 yes (right), y2 yes (wrong), y3 yes (right), y4 unreadable
    assert (m["correct"], m["n"], m["unreadable"]) == (3, 6, 1)
    chats = srv.chats()
    model_calls = [c for c in chats if c["model"] == "fake-vlm"]
    assert len(model_calls) == 6 and len([c for c in chats if c["model"] == "fake-judge"]) == 2
    sent = {chat_text(c): chat_images(c) for c in model_calls}
    import hashlib

    assert sent["Is the car red? ONLY answer yes or no."] == [
        hashlib.sha256(bench.image_bytes(bench.by_id()["y3"])).hexdigest()
    ]
    assert res.report["oeq"] == {
        "scorer": "judge",
        "judge": judge_name("fake-judge"),
        "judge_prompt": judge_prompt().id,
    }
    # a second run is answered from the cache: nothing more is sent
    evaluate(
        EvalOptions(
            bench=bench_dir,
            out=tmp_path / "ev2",
            models=["fake-vlm"],
            oeq="judge",
            judge="fake-judge",
            base_url=srv.base_url,
            llm=llm,
        )
    )
    assert len(srv.chats()) == len(chats)


def test_cli_eval(bench_dir, tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    p = _preds(tmp_path / "p.jsonl", {"o1": "3", "o2": "5", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"})
    r = CliRunner().invoke(
        app, ["eval", "--bench", str(bench_dir), "--predictions", f"perfect={p}", "--out", str(tmp_path / "e")]
    )
    assert r.exit_code == 0, r.output
    assert "perfect: accuracy 100.0% over 6 item(s)" in without_intervals(r.output)
    r = CliRunner().invoke(app, ["eval", "--bench", str(bench_dir), "--predictions", str(p)])
    assert r.exit_code == 2 and "is not NAME=FILE" in r.output


def test_eval_out_is_a_new_folder_or_one_eval_wrote(bench_dir, tmp_path):
    """`eval --out photos` would put the report and its chart among the photos, and the next `vhmine embed`
    would index the chart: refused in one line, with nothing written; a new folder, or eval's own again, is fine."""
    from helpers import write_photos
    from typer.testing import CliRunner

    from vhmine.cli import app

    p = _preds(tmp_path / "p.jsonl", {"o1": "3", "o2": "5", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"})
    photos = tmp_path / "photos"
    write_photos(photos, ("coffee", "rocket"))
    before = sorted(x.name for x in photos.iterdir())
    r = CliRunner().invoke(app, ["eval", "--bench", str(bench_dir), "--predictions", f"m={p}", "--out", str(photos)])
    assert r.exit_code == 2
    assert (
        f"--out {photos}: the folder exists and is not a report that `vhmine eval` wrote (no report.json from it)"
        in r.output
    )
    assert "Traceback" not in r.output and sorted(x.name for x in photos.iterdir()) == before
    with pytest.raises(InputError, match="is not a report that `vhmine eval` wrote"):  # nor into the benchmark's folder
        evaluate(EvalOptions(bench=bench_dir, out=bench_dir, predictions=[("m", p)]))
    for _ in range(2):  # a new folder, then the same one again: eval's own
        r = CliRunner().invoke(
            app, ["eval", "--bench", str(bench_dir), "--predictions", f"m={p}", "--out", str(tmp_path / "ev")]
        )
        assert r.exit_code == 0, r.output
    assert sorted(x.name for x in (tmp_path / "ev").iterdir()) == [
        "accuracy_by_mode.png",
        "answers-m.jsonl",
        "report.html",
        "report.json",
        "report.md",
    ]


def test_oeq_scored_by_worker_labels_from_the_store(tmp_path):
    """--oeq labels: the workers' majority verdict on this model's stored response; ties and no labels: unjudged."""
    from helpers import make_ready_store

    from vhmine import curate as C
    from vhmine.export.job import ExportOptions, export_benchmark

    store = make_ready_store(tmp_path)  # the store at tmp_path / "store.db"
    export_benchmark(store, ExportOptions(out=tmp_path / "b", format="hf"))
    bench = F.load(tmp_path / "b")
    oeq = sorted(it.id for it in bench if it.kind == "OEQ")
    assert len(oeq) == 4
    C.add_worker(store, "bob")
    plan = {
        oeq[0]: ("correct", "correct"),
        oeq[1]: ("hallucinated", "hallucinated"),
        oeq[2]: ("correct", "hallucinated"),
    }
    for iid, (va, vb) in plan.items():
        rid = C.work.add_response(store, iid, "m", "the prompt", "an answer")
        C.work.label_response(store, "alice", rid, va)
        C.work.label_response(store, "bob", rid, vb)
    other = C.work.add_response(store, oeq[1], "other-model", "the prompt", "another answer")  # must not count for m
    C.work.label_response(store, "alice", other, "correct")
    store.close()
    preds = tmp_path / "m.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": it.id, "answer": "Yes" if it.kind == "YNQ" else "an answer"}) + "\n" for it in bench)
    )
    res = evaluate(
        EvalOptions(
            bench=tmp_path / "b",
            out=tmp_path / "ev",
            predictions=[("m", preds)],
            oeq="labels",
            db=str(tmp_path / "store.db"),
        )
    )
    read_as = {
        r["id"]: r["read_as"] for r in map(json.loads, (tmp_path / "ev" / "answers-m.jsonl").read_text().splitlines())
    }
    assert [read_as[i] for i in oeq] == ["right", "wrong", "unjudged", "unjudged"]
    assert res.report["oeq"]["scorer"] == "labels" and res.report["models"]["m"]["oeq_unjudged"] == 2
    assert "Open answers with no verdict (scored wrong): m: 2" in (tmp_path / "ev" / "report.md").read_text()
    assert "2 open answers with no workers' verdict (tied or not labelled), scored wrong" in res.summary()


def test_an_answer_labelled_no_answer_is_scored_wrong_and_counted_apart(tmp_path):
    """issue 32: "I cannot tell from this image." labelled "no answer" is a miss (VHTest counts a refusal as one),
    read as "no answer", counted apart in the report; a tie between "no answer" and "correct" is no verdict."""
    from helpers import make_ready_store

    from vhmine import curate as C
    from vhmine.export.job import ExportOptions, export_benchmark

    store = make_ready_store(tmp_path)
    export_benchmark(store, ExportOptions(out=tmp_path / "b", format="hf"))
    bench = F.load(tmp_path / "b")
    oeq = sorted(it.id for it in bench if it.kind == "OEQ")
    C.add_worker(store, "bob")
    for iid, (va, vb) in {oeq[0]: ("no answer", "no answer"), oeq[1]: ("no answer", "correct")}.items():
        rid = C.work.add_response(store, iid, "m", "the prompt", "I cannot tell from this image.")
        C.work.label_response(store, "alice", rid, va)
        C.work.label_response(store, "bob", rid, vb)
    store.close()
    preds = tmp_path / "m.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"id": it.id, "answer": "Yes" if it.kind == "YNQ" else "I cannot tell from this image."}) + "\n"
            for it in bench
        )
    )
    res = evaluate(
        EvalOptions(
            bench=tmp_path / "b",
            out=tmp_path / "ev",
            predictions=[("m", preds)],
            oeq="labels",
            db=str(tmp_path / "store.db"),
        )
    )
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "ev" / "answers-m.jsonl").read_text().splitlines())}
    assert [(rows[i]["read_as"], rows[i]["correct"]) for i in oeq[:2]] == [("no answer", False), ("unjudged", False)]
    assert rows[oeq[0]]["verdict"]["reason"] == "the store's verdict on this answer: no answer (scored wrong)"
    m = res.report["models"]["m"]
    assert (m["oeq_no_answer"], m["oeq_unjudged"]) == (1, 3)
    assert (
        "Open answers that do not answer, by the store's labels (scored wrong): m: 1"
        in (tmp_path / "ev" / "report.md").read_text()
    )
    assert "1 open answers that do not answer" in res.summary()


def test_max_cost_caps_the_whole_run_not_each_model(bench_dir, tmp_path, openai_server):
    """--max-cost is one budget for every model (and judge) of an eval run; a model without a price is refused."""
    srv = openai_server
    srv.usage = (1000, 0)  # $0.01 per request at the prices below
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"vlm-a": {"input": 10.0, "output": 0.0}, "vlm-b": {"input": 10.0, "output": 0.0}}))
    llm = {
        "cache": tmp_path / "cache.db",
        "progress": False,
        "concurrency": 1,
        "max_tokens": 1,
        "max_cost": 0.085,
        "prices": prices,
    }
    res = evaluate(
        EvalOptions(
            bench=bench_dir,
            out=tmp_path / "ev",
            models=["vlm-a", "vlm-b"],
            base_url=srv.base_url,
            partial=True,
            llm=llm,
        )
    )
    assert len(srv.chats()) == 8  # 6 for vlm-a ($0.06), 2 for vlm-b; a ninth would pass $0.085
    assert res.report["models"]["vlm-a"]["failed"] == 0 and res.report["models"]["vlm-b"]["failed"] == 4
    details = [json.loads(line) for line in (tmp_path / "ev" / "answers-vlm-b.jsonl").read_text().splitlines()]
    assert sum(d.get("failure", "").startswith("cost-cap: ") for d in details) == 4
    with pytest.raises(Exception, match=r"^--max-cost needs a price for vlm-c, which the built-in table lacks"):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev2", models=["vlm-c"], base_url=srv.base_url, llm=llm))
    assert len(srv.chats()) == 8


@pytest.fixture
def dogs_bench(tmp_path):
    """Six items over two images: two OEQ (counting), four YNQ (two counting, two color)."""
    return write_tiny_bench(
        tmp_path, {"o2": "How many dogs are there in the picture?", "y2": "Are there exactly 3 dogs in the picture?"}
    )


def _says_yes(body):
    """Yes to every yes/no question but the blue car; three to every open one."""
    text = chat_text(body)
    if "ONLY answer yes or no." in text:
        return "No" if "blue" in text else "Yes"
    return "There are 3."


def _eval(tmp_path, *args, out="ev"):
    from typer.testing import CliRunner

    from vhmine.cli import app

    return CliRunner().invoke(
        app,
        ["eval", "--cache", str(tmp_path / "cache.db"), "--retry-wait", "0.01", "--out", str(tmp_path / out), *args],
    )


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_eval_without_a_key_stops_with_the_reason(dogs_bench, tmp_path, openai_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    r = _eval(tmp_path, "--bench", str(dogs_bench), "--model", "fake-vlm")
    assert r.exit_code == 2, r.output
    assert (
        "eval stopped while asking fake-vlm, nothing scored: OPENAI_API_KEY is not set, so nothing can be sent "
        f"to {openai_server.base_url}: export OPENAI_API_KEY" in r.output
    )
    assert "accuracy" not in r.output and not (tmp_path / "ev" / "report.json").exists()
    assert openai_server.requests == []


def test_eval_with_a_rejected_key_stops_with_the_reason(dogs_bench, tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-rejected-but-secret-1234")
    r = _eval(tmp_path, "--bench", str(dogs_bench), "--model", "fake-vlm", "--concurrency", "1")
    assert r.exit_code == 2, r.output
    assert (
        f"nothing scored: {openai_server.base_url} rejected the API key (401: Incorrect API key provided: ***): "
        "check OPENAI_API_KEY" in r.output
    )
    assert "rejected-but-secret" not in r.output and not (tmp_path / "ev" / "report.json").exists()
    assert len(openai_server.requests) == 1  # the client stopped at the first 401


@pytest.mark.parametrize(
    "concurrency, why",
    [
        (
            "4",
            "{url} is down (4 requests in a row failed, last: could not connect (Connection refused)); rerun when it "
            "is back",
        ),  # client stop
        (
            "8",
            "fake-vlm at {url} failed 1 times (last: could not connect (Connection refused))",
        ),  # 6 requests: no stop,
        # yet none answered
    ],
)
def test_eval_against_an_unreachable_endpoint_stops_with_the_reason(
    dogs_bench, tmp_path, monkeypatch, concurrency, why
):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    r = _eval(
        tmp_path,
        "--bench",
        str(dogs_bench),
        "--model",
        "fake-vlm",
        "--base-url",
        url,
        "--max-retries",
        "0",
        "--concurrency",
        concurrency,
    )
    assert r.exit_code == 2, r.output
    assert "eval stopped while asking fake-vlm, nothing scored: " + why.format(url=url) in r.output
    assert not (tmp_path / "ev" / "report.json").exists()


def test_eval_with_some_failed_requests_is_partial_and_never_scores_them(dogs_bench, tmp_path, openai_server):
    srv = openai_server
    srv.responder = _says_yes
    srv.refuse = lambda body: "red" in chat_text(body)  # y3: a content-filter refusal
    srv.faults = ["500"]  # the first request (o1, at concurrency 1) gets a 500, and no retry is allowed
    args = [
        "--bench",
        str(dogs_bench),
        "--model",
        "fake-vlm",
        "--base-url",
        srv.base_url,
        "--concurrency",
        "1",
        "--max-retries",
        "0",
    ]
    r = _eval(tmp_path, *args)
    assert r.exit_code == 3, r.output
    # o2 wrong (3 is not 4 or 5), y1 right, y2 wrong (yes), y4 right: 2 of 4; o1 and y3 are not scored
    assert "fake-vlm: accuracy 50.0% over 4 item(s); pair accuracy 0.0% over 1 pair(s);" in without_intervals(r.output)
    assert (
        "(1 pair(s) and 1 image(s) with an unscored item left out of pair accuracy and image accuracy); "
        "2 failed, not scored (refused 1, unavailable 1)"
    ) in r.output
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
    details = answer_details(tmp_path / "ev", "fake-vlm")
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
    assert "fake-vlm: accuracy 66.7% over 6 item(s)" in without_intervals(r.output)


def test_a_judge_that_fails_leaves_its_item_unscored(dogs_bench, tmp_path, openai_server):
    from vhmine.eval.job import EvalOptions, evaluate

    srv = openai_server
    srv.responder = lambda body: "correct" if "correct, incorrect or unclear" in chat_text(body) else _says_yes(body)
    srv.refuse = lambda body: "correct, incorrect or unclear" in chat_text(body) and "dogs" in chat_text(body)
    res = evaluate(
        EvalOptions(
            bench=dogs_bench,
            out=tmp_path / "ev",
            models=["fake-vlm"],
            judge="fake-judge",
            base_url=srv.base_url,
            llm={"cache": tmp_path / "c.db", "progress": False},
        )
    )
    m = res.report["models"]["fake-vlm"]
    assert res.partial and (m["answered"], m["failed"], m["oeq_unjudged"]) == (5, 1, 0)
    assert m["failed_items"][0]["id"] == "o2"
    assert m["failed_items"][0]["why"].startswith("refused: the judge fake-judge gave no verdict: ")
    assert answer_details(tmp_path / "ev", "fake-vlm")["o2"]["answer"] == "There are 3."  # the model's answer is kept


def test_eval_on_two_endpoints_never_mixes_their_answers(dogs_bench, tmp_path, two_servers):
    a, b = two_servers
    assert (
        _eval(
            tmp_path, "--bench", str(dogs_bench), "--model", "same-name", "--base-url", a.base_url, out="ev-a"
        ).exit_code
        == 0
    )
    assert (
        _eval(
            tmp_path, "--bench", str(dogs_bench), "--model", "same-name", "--base-url", b.base_url, out="ev-b"
        ).exit_code
        == 0
    )
    assert len(a.chats()) == 6 and len(b.chats()) == 6  # one cache file, yet b was asked everything
    ans_a = {i: d["answer"] for i, d in answer_details(tmp_path / "ev-a", "same-name").items()}
    ans_b = {i: d["answer"] for i, d in answer_details(tmp_path / "ev-b", "same-name").items()}
    assert set(ans_a.values()) == {"Yes", "There are 3."} and set(ans_b.values()) == {"No", "There are 9."}
    # the same endpoint spelled with a trailing slash is the same endpoint: answered from the cache
    assert (
        _eval(
            tmp_path, "--bench", str(dogs_bench), "--model", "same-name", "--base-url", b.base_url + "/", out="ev-b2"
        ).exit_code
        == 0
    )
    assert len(b.chats()) == 6
    assert {i: d["answer"] for i, d in answer_details(tmp_path / "ev-b2", "same-name").items()} == ans_b


def test_eval_ends_by_saying_where_the_report_is(bench_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = _preds(tmp_path / "p.jsonl", {"o1": "3", "o2": "5", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"})
    res = evaluate(EvalOptions(bench=bench_dir, out=Path("evals/run1"), predictions=[("m", p)]))
    last = res.summary().splitlines()[-1]
    assert last.startswith(
        "report: evals/run1/report.md   (every number in evals/run1/report.json, the chart "
        "evals/run1/accuracy_by_mode.png"
    )
    for name in ("report.md", "report.json", "accuracy_by_mode.png", "answers-m.jsonl"):
        assert (tmp_path / "evals" / "run1" / name).is_file()


@pytest.mark.slow
def test_ctrl_c_while_asking_keeps_the_answers_and_the_rerun_asks_only_the_rest(bench_dir, tmp_path, openai_server):
    import subprocess
    import sys

    srv = openai_server
    srv.delay_s = 0.4
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "eval",
        "--bench",
        str(bench_dir),
        "--model",
        "slow-vlm",
        "--out",
        "ev",
        "--cache",
        "cache.db",
        "--concurrency",
        "1",
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    interrupt_when(proc, lambda: len(srv.chats()) >= 3)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    line = next(ln for ln in err.splitlines() if ln.startswith("interrupted"))
    kept = int(line.split(": ", 1)[1].split(" of ")[0])
    assert line == (
        f"interrupted while asking slow-vlm: {kept} of 6 answers kept in the request cache (cache.db); "
        "run the same command to resume (kept answers are not asked again)"
    )
    assert 2 <= kept < 6 and "Traceback" not in err and not (tmp_path / "ev" / "report.json").exists()
    asked = len(srv.chats())
    srv.delay_s = 0.0
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(srv.chats()) - asked == 6 - kept  # the kept answers came from the cache
    assert json.loads((tmp_path / "ev" / "report.json").read_text())["models"]["slow-vlm"]["answered"] == 6


def _bench_of(tmp_path, n: int):
    """`n` yes/no questions on one image, written as vlmevalkit into tmp_path/bench-n."""
    from PIL import Image

    from vhmine.bench import BenchItem, Benchmark
    from vhmine.export.job import write_benchmark

    Image.new("RGB", (8, 8), (200, 30, 30)).save(tmp_path / "red.png")
    items = [
        BenchItem(
            f"y{i}", "color", "YNQ", f"Is the car red ({i})?", ("Yes",), True, str(tmp_path / "red.png"), "A", None
        )
        for i in range(n)
    ]
    write_benchmark(Benchmark("many", items), tmp_path / f"bench-{n}", "vlmevalkit")
    return tmp_path / f"bench-{n}"


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_eval_against_an_endpoint_that_does_not_answer_in_time_gives_up_as_it_says(
    tmp_path, openai_server, concurrency
):
    """16 questions, a server that takes connections and answers after 30 s, --timeout 1 and the default 4 retries:
    eval ends within the time-outs its message counts (a minute per question x 5 tries before), in words."""
    import time

    import openai  # noqa: F401  (before the clock: the bound is on waiting for the endpoint)

    k = max(3, int(concurrency))
    openai_server.delay_s = 30.0
    t = time.monotonic()
    r = _eval(
        tmp_path,
        "--bench",
        str(_bench_of(tmp_path, 16)),
        "--model",
        "fake-vlm",
        "--timeout",
        "1",
        "--concurrency",
        concurrency,
    )
    took = time.monotonic() - t
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1] == (
        f"error: eval stopped while asking fake-vlm, nothing scored: {openai_server.base_url} does not "
        f"answer in time: {k} requests in a row timed out after 1 s each (--timeout), so nothing "
        "more is sent; if the model is only slow, raise --timeout or lower --concurrency"
    )
    assert took < k * 1 + 3.0, took  # k time-outs of 1 s (at once at --concurrency 4), 0.01 s back-off, start-up
    assert k <= len(openai_server.chats()) < k + int(concurrency)


@pytest.mark.parametrize(
    "fault, got",
    [
        ("malformed", 'a body that is not JSON (\'{"id": "chatcmpl-x", "choices": [ {"message":\')'),
        ("no-choices", "an answer with no choices (an empty choices list)"),
    ],
)
def test_eval_against_an_endpoint_that_answers_nothing_readable_says_what_came_back(
    dogs_bench, tmp_path, openai_server, fault, got
):
    openai_server.faults = [fault] * 100
    r = _eval(tmp_path, "--bench", str(dogs_bench), "--model", "fake-vlm", "--concurrency", "4", "--max-retries", "1")
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1] == (
        f"error: eval stopped while asking fake-vlm, nothing scored: {openai_server.base_url} answers, "
        f"but nothing readable (4 requests in a row got {got}): check that --base-url is an "
        "OpenAI-compatible endpoint"
    )
    assert not (tmp_path / "ev" / "report.json").exists()


# --- what eval writes: a file per model, shareable, readable by the team, nothing left from an earlier run ----

ALL_RIGHT = {"o1": "3", "o2": "3", "y1": "yes", "y2": "yes", "y3": "yes", "y4": "no"}
ALL_WRONG = {"o1": "9", "o2": "9", "y1": "no", "y2": "no", "y3": "no", "y4": "yes"}


def test_models_whose_names_differ_only_by_slash_and_underscore_keep_their_own_answers_file(bench_dir, tmp_path):
    """`a/b` and `a_b` wrote one answers-a_b.jsonl: the second overwrote the first while both were reported."""
    right, wrong = _preds(tmp_path / "r.jsonl", ALL_RIGHT), _preds(tmp_path / "w.jsonl", ALL_WRONG)
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("a/b", right), ("a_b", wrong)]))
    files = {m: e["answers_file"] for m, e in res.report["models"].items()}
    assert (
        files["a_b"] == "answers-a_b.jsonl"
        and files["a/b"].startswith("answers-a_b-")
        and len(set(files.values())) == 2
    )
    for model, answers in (("a/b", ALL_RIGHT), ("a_b", ALL_WRONG)):
        rows = [json.loads(x) for x in (tmp_path / "ev" / files[model]).read_text().splitlines()]
        assert {d["id"]: d["answer"] for d in rows} == answers
    assert json.loads((tmp_path / "ev" / "report.json").read_text())["models"]["a/b"]["answers_file"] == files["a/b"]


def test_names_that_differ_only_in_case_are_refused_before_anything_is_written(bench_dir, tmp_path):
    p = _preds(tmp_path / "r.jsonl", ALL_RIGHT)
    with pytest.raises(EvalError, match=r"two models' answers would share the file answers-(m|M)\.jsonl"):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", p), ("M", p)]))
    assert not (tmp_path / "ev").exists()


def test_the_report_keeps_the_predictions_files_name_not_its_folder(bench_dir, tmp_path):
    home = tmp_path / "home" / "someone" / "runs"
    home.mkdir(parents=True)
    p = _preds(home / "preds-m.jsonl", ALL_RIGHT)
    evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", p)]))
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    assert report["models"]["m"]["source"] == "predictions:preds-m.jsonl"
    for name in ("report.json", "report.html", "report.md", "answers-m.jsonl"):
        assert "someone" not in (tmp_path / "ev" / name).read_text(), name
    assert "predictions:preds-m.jsonl" in (tmp_path / "ev" / "report.html").read_text()


def test_eval_writes_its_files_with_the_mode_the_umask_gives_as_export_does(bench_dir, tmp_path):
    import os
    import stat

    p = _preds(tmp_path / "r.jsonl", ALL_RIGHT)
    old = os.umask(0o022)
    try:
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", p)]))
        os.umask(0o027)
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev27", predictions=[("m", p)]))
    finally:
        os.umask(old)
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in (tmp_path / "ev").iterdir()}
    assert set(modes) >= {"report.json", "report.md", "report.html", "accuracy_by_mode.png", "answers-m.jsonl"}
    assert set(modes.values()) == {0o644}, modes
    assert {stat.S_IMODE(f.stat().st_mode) for f in (tmp_path / "ev27").iterdir()} == {0o640}


def test_a_rerun_into_an_eval_folder_removes_the_answers_of_models_it_no_longer_scores(bench_dir, tmp_path):
    p = _preds(tmp_path / "r.jsonl", ALL_RIGHT)
    evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", p), ("gone/x", p)]))
    assert len(list((tmp_path / "ev").glob("answers-*.jsonl"))) == 2
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", p)]))
    assert sorted(f.name for f in (tmp_path / "ev").glob("answers-*.jsonl")) == ["answers-m.jsonl"]
    assert list(res.report["models"]) == ["m"]
