"""The whole pipeline as a user runs it: every stage through the real `vhmine` CLI in subprocesses,
one workdir, one SQLite store, one loopback OpenAI-compatible server (tests/openai_server.py).

demo --offline -> seed -> workers add -> curation through vhmine.curate (as the app calls it) -> probe
-> describe --out -> generate (tiny local Stable Diffusion, edited descriptions) -> curation of the
generated images -> export (vhtest and pope) -> eval (asking the model, and scoring a predictions
file). Ids are followed from pairs.parquet to instances, responses, export rows and eval items, and
the fake API key is looked for in every file the run leaves behind.

The victim model is steered by `_respond`: it answers "Yes" to every yes/no question (right on the
"yes" half, a hallucination on the "no" half), "3" to every count and "red" to every color; the judge
calls an answer correct when a reference answer appears in it. Every expected number below is
derived from those rules and the annotations this test makes.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from helpers import Workdir, without_intervals
from openai_server import API_KEY, chat_images, chat_text

MODES = ("counting", "color")
# mode -> (OEQ template, slots, answer for image A, answer for image B) as alice writes them
ANNOTATIONS = {
    "counting": ("counting.how_many", {"object": "cats"}, "3", "2"),
    "color": ("color.what_color", {"object": "cup"}, "red", "blue"),
}
GENERATED = {
    "counting": ("counting.how_many", {"object": "cups"}, "3"),
    "color": ("color.what_color", {"object": "cup"}, "red"),
}
VICTIM_SAYS = {"counting": "3", "color": "red"}  # the fake model's answer to every OEQ of a mode


# --- the fake model ------------------------------------------------------------------------------


def _respond(body: dict) -> str:
    text = chat_text(body)
    if "correct, incorrect or unclear" in text:  # the OEQ judge
        refs = re.search(r"any one of which is correct: (.*)", text).group(1).split(" | ")
        said = re.search(r"Student's answer: (.*)", text).group(1).lower()
        return "correct" if any(re.search(rf"\b{re.escape(r.lower())}\b", said) for r in refs) else "incorrect"
    mode = re.search(r'"(\w+)"', text).group(1) if '"' in text else None
    if "hallucinated when answering" in text:  # describe: one example
        return f"CAUSE {mode}: the model trusts priors over the picture. Draw cluttered {mode} scenes."
    if "Invent one plausible example" in text:
        return f"HYPOTHETICAL {mode}: an imagined scene."
    if "Merge them into ONE description" in text:
        return f"MERGED {mode}: draw several similar objects, partly hidden, so that {mode} is hard to read."
    if "You write prompts for a text-to-image model" in text:
        variant = re.search(r"\(variant (\d+)\)", text).group(1)
        return f"a photo of three red cups on a table, {mode} test {variant}"
    if re.search(r"yes or no", text, re.I):
        return "Yes."
    if text.startswith("How many"):
        return f"There are {VICTIM_SAYS['counting']} of them."
    if text.startswith("What color"):
        return f"It is {VICTIM_SAYS['color']}."
    return "I do not know."


def _victim_right(kind: str, mode: str, answers, truth) -> bool:
    """What the responder gets right: every "yes" question, and the OEQs whose reference it says."""
    if kind == "YNQ":
        return bool(truth)
    return VICTIM_SAYS[mode] in answers


# --- running the CLI -----------------------------------------------------------------------------


def _rows(w: Workdir, table):
    from sqlalchemy import select

    with w.store() as store, store.session(write=False) as s:
        return list(s.scalars(select(table)))


# --- the stages ----------------------------------------------------------------------------------


def _demo(w: Workdir):
    import pandas as pd

    r = w.vhmine("demo", "--offline", "--workdir", str(w.root), db=False)
    run = w.root / "runs" / "demo-offline"
    assert str(run / "gallery.html") in r.stdout
    pairs = pd.read_parquet(run / "pairs.parquet")
    images = pd.read_parquet(w.root / "indexes" / "demo-skimage" / "images.parquet")
    assert len(pairs) >= 8 and list(pairs["rank"]) == list(range(1, len(pairs) + 1))
    assert set(pairs["image_id_a"]) | set(pairs["image_id_b"]) <= set(images["image_id"])
    for side in "ab":
        assert all(Path(p).is_file() for p in pairs[f"path_{side}"])
        assert all(i == s[:16] for i, s in zip(pairs[f"image_id_{side}"], pairs[f"sha256_{side}"]))
    # `vhmine mine` on the demo's index (found through VHMINE_INDEXES, the only one) with the demo's thresholds
    meta = json.loads((run / "run.json").read_text())
    w.vhmine(
        "mine",
        "--clip",
        repr(meta["clip_threshold"]),
        "--dino",
        repr(meta["dino_threshold"]),
        "--out",
        "runs/again",
        "--gallery-size",
        "0",
        db=False,
    )
    again = pd.read_parquet(w.root / "runs" / "again" / "pairs.parquet")
    key = ["rank", "image_id_a", "image_id_b", "clip_sim", "dino_sim"]
    assert again[key].equals(pairs[key])
    return pairs


def _seed(w: Workdir, pairs):
    from vhmine.rules.modes import mode_names
    from vhmine.seed import assign, pair_id
    from vhmine.store import Image, Pair, Task

    r = w.vhmine("seed", "--pairs", str(w.root / "runs" / "demo-offline" / "pairs.parquet"), "--per-mode", "2")
    assert "tasks queued: existence 2, shape 2, color 2" in r.stdout and "(16 new, 0 already queued)" in r.stdout
    again = w.vhmine("seed", "--pairs", "runs/demo-offline/pairs.parquet", "--per-mode", "2")  # idempotent
    assert "(0 new, 16 already queued)" in again.stdout
    ranked = pairs.sort_values("rank")
    ids = [pair_id(a, b) for a, b in zip(ranked["image_id_a"], ranked["image_id_b"])]
    plan = assign(len(ids), 2, mode_names())
    tasks = {t.id: t for t in _rows(w, Task)}
    assert set(tasks) == {f"{m}:{ids[i]}" for m in mode_names() for i in plan[m]}
    stored = {p.id: p for p in _rows(w, Pair)}
    assert set(stored) == {ids[i] for idx in plan.values() for i in idx}
    for _, row in ranked.iterrows():
        p = stored.get(pair_id(row["image_id_a"], row["image_id_b"]))
        if p is not None:
            assert (p.rank, p.run) == (row["rank"], "demo-offline") and p.clip_sim == pytest.approx(row["clip_sim"])
    assert {i.source for i in _rows(w, Image)} == {"mined"}
    return tasks


def _curate(w: Workdir, token: str, pairs):
    """Alice annotates both pairs of counting and color through vhmine.curate, as the app does."""
    from vhmine import curate as C
    from vhmine.rules import modes as M
    from vhmine.seed import pair_id

    with w.store() as store:
        me = C.sign_in(store, token).name
        assert me == "alice"
        for mode in MODES:
            tpl_id, slots, ans_a, ans_b = ANNOTATIONS[mode]
            tpl = M.get_mode(mode).template(tpl_id)
            for _ in range(2):
                item = C.next_item(store, me, mode)
                assert item is not None and item.pair_id and [v.role for v in item.images] == ["A", "B"]
                a, b = (v.id for v in item.images)
                saved = C.save_annotation(
                    store, me, item.task_id, C.Annotation(tpl.id, slots, answers={a: ans_a, b: ans_b})
                )
                assert len(saved.instance_ids) == 2 and len(saved.draft_ids) == 4
                drafts = C.pending_drafts(store, me, mode)
                assert {d.instance_id for d in drafts} == set(saved.draft_ids)
                assert [d.truth for d in drafts] == [True, False, True, False]  # image A yes/no, then B
                assert drafts[0].question == M.fill(
                    M.get_mode(mode).template(tpl.ynq), dict(slots, **{tpl.answer_slot: ans_a})
                )
                kept = C.confirm_drafts(store, me, [C.DraftDecision(d.instance_id, True) for d in drafts])
                assert sorted(kept) == sorted(saved.draft_ids)
            assert C.next_item(store, me, mode) is None  # the mode's two seeded pairs are done
        recs = C.ready_instances(store)
        prog = {p.mode: p for p in C.progress(store)}
    assert {(m, prog[m].done, prog[m].ready_instances) for m in MODES} == {("counting", 2, 12), ("color", 2, 12)}
    assert Counter((r.mode, r.kind, r.truth) for r in recs) == Counter(
        {(m, "OEQ", None): 4 for m in MODES} | {(m, "YNQ", t): 4 for m in MODES for t in (True, False)}
    )
    sides = {pair_id(a, b): {a, b} for a, b in zip(pairs["image_id_a"], pairs["image_id_b"])}
    assert all({r.image_id, r.other_image_id} == sides[r.pair_id] for r in recs)  # pairs.parquet -> instances
    return recs


def _probe(w: Workdir, srv, recs):
    from vhmine.store import Response

    r = w.vhmine(
        "probe",
        "--model",
        "fake-vlm",
        "--judge",
        "fake-judge",
        "--base-url",
        w.base_url,
        "--concurrency",
        "2",
        "--retry-wait",
        "0.01",
    )
    # per mode: 4 of 8 YNQ wrong (the "no" ones), 2 of 4 OEQ wrong (image B's)
    for mode in MODES:
        assert re.search(rf"^{mode}\s+12\s+12\s+6\s+6\s+0\s+0\s+0$", r.stdout, re.M), r.stdout
    assert re.search(r"^all\s+24\s+24\s+12\s+12\s+0\s+0\s+0$", r.stdout, re.M)
    victim = [b for b in srv.chats() if b["model"] == "fake-vlm"]
    assert all(len(chat_images(b)) == 1 for b in victim)
    by_id = {x.id: x for x in recs}
    # every instance asked with its own image and the probe prompt; identical requests (an image in two pairs
    # of a mode, asked the same question) share one cached answer, unless both were in flight at once
    want = {(x.question + (" Please answer yes or no." if x.kind == "YNQ" else ""), x.image_sha256) for x in recs}
    assert {(chat_text(b), chat_images(b)[0]) for b in victim} == want and len(want) <= len(victim) <= 24
    judged = {chat_text(b) for b in srv.chats() if b["model"] == "fake-judge"}
    oeq = [x for x in recs if x.kind == "OEQ"]  # identical judge requests (same question, references, answer) share one
    assert len(judged) == len({(x.question, x.answers) for x in oeq}) == 4
    resp = _rows(w, Response)
    assert sorted(x.instance_id for x in resp) == sorted(by_id)
    for x in resp:
        inst = by_id[x.instance_id]
        want = "correct" if _victim_right(inst.kind, inst.mode, inst.answers, inst.truth) else "hallucinated"
        assert (x.model, x.verdict) == ("fake-vlm", want), (inst, x.answer)
        assert x.judge == "rule:vhtest" if inst.kind == "YNQ" else x.judge.startswith("llm:fake-judge judge_oeq@v1#")
    # a rerun asks nothing: every answer is in the store and the cache
    n = len(srv.requests)
    again = w.vhmine(
        "probe",
        "--model",
        "fake-vlm",
        "--judge",
        "fake-judge",
        "--base-url",
        w.base_url,
        "--kind",
        "oeq",
        "--kind",
        "ynq",
    )  # lower case, as `vhmine export --kind` takes them
    assert len(srv.requests) == n and "0 requests sent" in again.stdout
    return resp


def _describe(w: Workdir, srv, resp):
    from vhmine.store import Description

    n0 = len(srv.chats())
    # readers held open on the store and the request cache keep their write-ahead logs on disk to be searched
    held = [sqlite3.connect(p) for p in (w.db, w.root / "data" / "llm-cache.db")]
    for c in held:
        c.execute("SELECT count(*) FROM sqlite_master").fetchall()
    r = w.vhmine(
        "describe",
        "--model",
        "fake-vlm",
        *[x for m in MODES for x in ("--mode", m)],
        "--examples",
        "2",
        "--min-real",
        "1",
        "--out",
        str(w.root / "descriptions"),
        "--base-url",
        w.base_url,
        "--retry-wait",
        "0.01",
    )
    wal = sorted(w.root.rglob("*-wal"))
    assert {p.name for p in wal} == {"vhmine.db-wal", "llm-cache.db-wal"} and all(p.stat().st_size for p in wal)
    assert _with_key(wal) == []
    for c in held:
        c.close()
    assert "NO description" not in r.stdout and "partial" not in r.stdout
    asked = srv.chats()[n0:]  # two examples and one merge per mode
    assert len(asked) <= len(MODES) * 3 and sum("Merge them into ONE" in chat_text(b) for b in asked) == len(MODES)
    folder = w.root / "descriptions"
    manifest = json.loads((folder / "descriptions.json").read_text())
    assert set(manifest) == set(MODES)
    descs = {d.id: d for d in _rows(w, Description)}
    halluc = {x.id: x.instance_id for x in resp if x.verdict == "hallucinated"}
    for mode in MODES:
        merged = descs[manifest[mode]["description_id"]]
        assert (merged.mode, merged.kind, merged.hypothetical) == (mode, "merged", False)
        assert (
            (folder / f"{mode}.txt").read_text().strip() == merged.text == f"MERGED {mode}: draw several similar "
            f"objects, partly hidden, so that {mode} is hard to read."
        )
        examples = [descs[i] for i in merged.sources if not i.startswith("prompt:")]
        assert len(examples) == 2 and {e.kind for e in examples} == {"example"}
        for e in examples:  # each example names a hallucinated response of this mode and its instance
            inst_id, resp_id = e.sources[0], e.sources[1]
            assert halluc[resp_id] == inst_id
    # described again from three examples: newer descriptions in the store; generate below still reads the first folder
    w.vhmine(
        "describe",
        "--model",
        "fake-vlm",
        *[x for m in MODES for x in ("--mode", m)],
        "--examples",
        "3",
        "--out",
        str(w.root / "descriptions-3"),
        "--base-url",
        w.base_url,
    )
    newer = json.loads((w.root / "descriptions-3" / "descriptions.json").read_text())
    assert all(newer[m]["description_id"] != manifest[m]["description_id"] for m in MODES)
    return manifest


def _generate(w: Workdir, srv, tiny_sd: Path, manifest):
    from vhmine.store import Generation, Image, Task

    edited = w.root / "descriptions" / "counting.txt"
    edited.write_text(edited.read_text().strip() + " EDITED: use cups.\n")  # a user edits one before generating
    n0 = len(srv.chats())
    w.vhmine(
        "generate",
        "--backend",
        f"diffusers:{tiny_sd}",
        "--per-mode",
        "1",
        "--mode",
        "counting",
        "--mode",
        "color",
        "--descriptions",
        str(w.root / "descriptions"),
        "--prompt-model",
        "fake-vlm",
        "--base-url",
        w.base_url,
        "--out",
        str(w.root / "generated"),
        "--device",
        "cpu",
        "--steps",
        "2",
        "--width",
        "64",
        "--height",
        "64",
        timeout=180,
    )
    rewrites = srv.chats()[n0:]
    assert len(rewrites) == 2 and {b["model"] for b in rewrites} == {"fake-vlm"}
    assert any("EDITED: use cups." in chat_text(b) for b in rewrites)
    gens = {g.mode: g for g in _rows(w, Generation)}
    assert set(gens) == set(MODES)
    tasks = {t.id: t for t in _rows(w, Task)}
    images = {i.id: i for i in _rows(w, Image)}
    for mode, g in gens.items():
        assert (g.backend, g.model, g.seed) == ("diffusers", str(tiny_sd.resolve()), 0)
        assert g.prompt == f"a photo of three red cups on a table, {mode} test 1"
        assert g.description_id == manifest[mode]["description_id"]
        assert g.params["description_edited"] is (mode == "counting")  # color's file is its description, unedited
        img = images[g.image_id]
        assert img.source == "generated" and Path(img.path) == w.root / "generated" / f"{img.sha256}.png"
        assert tasks[f"{mode}:{g.image_id}"].status == "open"  # in its mode's curation queue
    return gens


def _curate_generated(w: Workdir, token: str, gens):
    from vhmine import curate as C

    with w.store() as store:
        me = C.sign_in(store, token).name
        for mode in MODES:
            tpl_id, slots, answer = GENERATED[mode]
            item = C.next_item(store, me, mode)
            assert item.task_id == f"{mode}:{gens[mode].image_id}" and item.prompt == gens[mode].prompt
            assert [(v.id, v.role, v.source) for v in item.images] == [(gens[mode].image_id, "image", "generated")]
            saved = C.save_annotation(
                store, me, item.task_id, C.Annotation(tpl_id, slots, answers={gens[mode].image_id: answer})
            )
            drafts = C.pending_drafts(store, me, mode)
            assert [d.truth for d in drafts] == [True, False]
            C.confirm_drafts(store, me, [C.DraftDecision(d.instance_id, True) for d in drafts])
            assert len(saved.instance_ids) == 1
        return C.ready_instances(store)


def _export(w: Workdir, recs):
    import pandas as pd

    ids = {r.id for r in recs}
    r = w.vhmine("export", "--format", "vhtest", "--out", str(w.root / "bench-vhtest"))
    assert "exported 30 instance(s) in 2 mode(s) as vhtest" in r.stdout
    bench = w.root / "bench-vhtest"
    man = json.loads((bench / "manifest.json").read_text())
    assert man["counts"] == {m: {"OEQ": 5, "YNQ": 10, "yes": 5, "no": 5} for m in MODES}
    assert set(man["instances"]) == ids and man["balance"] == {m: {"yes": 5, "no": 5} for m in MODES}
    for rel, f in man["files"].items():
        assert (bench / rel).stat().st_size == f["bytes"]
    rows = {}
    for kind in ("OEQ", "YNQ"):
        for mode in MODES:
            df = pd.read_excel(bench / f"{kind}_Benchmark" / f"{mode}.xlsx")
            for _, row in df.iterrows():
                rows[row["vhmine_id"]] = (kind, mode, row)
    assert set(rows) == ids
    by_id = {x.id: x for x in recs}
    for iid, (kind, mode, row) in rows.items():
        rec = by_id[iid]
        assert (rec.kind, rec.mode) == (kind, mode)
        assert (bench / "Images" / mode / row["Image"]).read_bytes() == Path(rec.image_path).read_bytes()
        if kind == "YNQ":
            assert (row["yes_or_no_question"], row["yes_or_no_ground_truth"]) == (
                rec.question,
                "y" if rec.truth else "n",
            )
        else:
            assert (row["Question"], str(row["Reference_Answer"])) == (rec.question, rec.answers[0])
    # the same store as POPE JSON lines (yes/no only)
    r = w.vhmine("export", "--format", "pope", "--kind", "ynq", "--out", str(w.root / "bench-pope"))
    lines = [json.loads(x) for x in (w.root / "bench-pope" / "questions.jsonl").read_text().splitlines()]
    assert {x["question_id"] for x in lines} == {x.id for x in recs if x.kind == "YNQ"}
    assert all(x["label"] == ("yes" if by_id[x["question_id"]].truth else "no") for x in lines)
    assert all((w.root / "bench-pope" / "images" / x["image"]).is_file() for x in lines)
    return bench


def _expected(recs, ids=None) -> dict:
    """mode -> (right, n) for the fake model, from the records."""
    out: dict[str, list[int]] = {}
    for r in recs:
        if ids is None or r.id in ids:
            c = out.setdefault(r.mode, [0, 0])
            c[0] += _victim_right(r.kind, r.mode, r.answers, r.truth)
            c[1] += 1
    return {m: tuple(v) for m, v in out.items()}


def _eval(w: Workdir, srv, recs):
    by_id = {r.id: r for r in recs}
    n0 = len(srv.chats())
    r = w.vhmine(
        "eval",
        "--bench",
        str(w.root / "bench-vhtest"),
        "--model",
        "fake-vlm",
        "--base-url",
        w.base_url,
        "--out",
        str(w.root / "eval-model"),
        db=False,
    )
    out = w.root / "eval-model"
    report = json.loads((out / "report.json").read_text())
    # VHTest's YNQ suffix, not probe's; the OEQs probe asked the same way (prompt, image, model) come from the cache
    asked = {(chat_text(b), chat_images(b)[0]) for b in srv.chats()[n0:]}
    assert asked == {(x.question + " ONLY answer yes or no.", x.image_sha256) for x in recs if x.kind == "YNQ"} | {
        (x.question, x.image_sha256) for x in recs if x.kind == "OEQ" and x.image_source == "generated"
    }
    m = report["models"]["fake-vlm"]["metrics"]
    for mode, (right, n) in _expected(recs).items():
        assert (m["modes"][mode]["n"], m["modes"][mode]["correct"]) == (n, right)
        assert m["modes"][mode]["yes_ratio"] == 1.0 and m["modes"][mode]["unreadable"] == 0
    # 30 items: 10 of 20 YNQ right (all "yes"), OEQ: the 3 "3" / "red" images of each mode right
    assert (m["overall"]["n"], m["overall"]["correct"]) == (30, 16)
    assert (m["overall"]["precision"], m["overall"]["recall"]) == (0.5, 1.0)
    assert "| fake-vlm | 53.3 | 53.3 | 53.3 |" in without_intervals((out / "report.md").read_text())
    assert "fake-vlm: accuracy 53.3% over 30 item(s)" in without_intervals(r.stdout)
    answers = [json.loads(x) for x in (out / "answers-fake-vlm.jsonl").read_text().splitlines()]
    assert {a["id"] for a in answers} == set(by_id)
    for a in answers:
        rec = by_id[a["id"]]
        assert a["correct"] == _victim_right(rec.kind, rec.mode, rec.answers, rec.truth)
    # scoring a predictions file: right everywhere but one "no" question answered "yes"
    ynq = sorted(x.id for x in recs if x.kind == "YNQ")
    wrong = next(i for i in ynq if not by_id[i].truth)
    preds = w.root / "oracle.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": i, "answer": "yes" if by_id[i].truth or i == wrong else "no"}) + "\n" for i in ynq)
    )
    r = w.vhmine(
        "eval",
        "--bench",
        str(w.root / "bench-pope"),
        "--predictions",
        f"oracle={preds}",
        "--out",
        str(w.root / "eval-preds"),
        db=False,
    )
    rep = json.loads((w.root / "eval-preds" / "report.json").read_text())["models"]["oracle"]["metrics"]
    assert (rep["overall"]["n"], rep["overall"]["correct"], rep["overall"]["fp"]) == (20, 19, 1)
    assert rep["modes"][by_id[wrong].mode]["correct"] == 9
    assert "oracle: accuracy 95.0% over 20 item(s)" in without_intervals(r.stdout)
    # pair accuracy: the same question of both images of a mined pair; image accuracy: every question of an image
    groups = {(x.pair_id, x.question) for x in recs if x.kind == "YNQ" and x.pair_id}
    images = {x.image_id for x in recs if x.kind == "YNQ"}
    assert rep["overall"]["pairs"] == len(groups) and rep["overall"]["images"] == len(images)
    assert rep["overall"]["pair_accuracy"] == pytest.approx(1 - (by_id[wrong].pair_id is not None) / len(groups))
    assert rep["overall"]["image_accuracy"] == pytest.approx(1 - 1 / len(images))
    # README's form: `--judge M` scores the open answers with the judge (here: as the fake judge's rule says)
    n0 = len(srv.chats())
    w.vhmine(
        "eval",
        "--bench",
        str(w.root / "bench-vhtest"),
        "--model",
        "fake-vlm",
        "--judge",
        "fake-judge",
        "--base-url",
        w.base_url,
        "--out",
        str(w.root / "eval-judge"),
        db=False,
    )
    rep = json.loads((w.root / "eval-judge" / "report.json").read_text())
    assert rep["oeq"]["scorer"] == "judge" and rep["oeq"]["judge"].startswith("llm:fake-judge judge_oeq@v1#")
    assert (rep["models"]["fake-vlm"]["metrics"]["overall"]["correct"]) == 16
    assert {b["model"] for b in srv.chats()[n0:]} == {"fake-judge"}  # the model's answers came from the cache


def _with_key(paths) -> list[str]:
    key = API_KEY.encode()
    return [str(p) for p in paths if p.is_file() and key in p.read_bytes()]


def _no_key_anywhere(root: Path) -> None:
    leaked = _with_key(root.rglob("*"))
    assert leaked == [], f"the API key was written to {leaked}"
    names = {p.name for p in root.rglob("*")}
    assert {"vhmine.db", "llm-cache.db"} <= names  # the files most likely to hold it were looked at


@pytest.mark.slow
def test_whole_pipeline_through_the_cli(tmp_path, openai_server, tiny_sd):
    srv = openai_server
    srv.responder = _respond
    w = Workdir(tmp_path / "work", srv.base_url)

    pairs = _demo(w)
    _seed(w, pairs)
    r = w.vhmine("workers", "add", "alice")
    token = r.stdout.strip()
    assert token.startswith("vhm_") and token not in r.stderr and "alice" in w.vhmine("workers", "list").stdout
    recs = _curate(w, token, pairs)
    assert token.encode() not in b"".join(p.read_bytes() for p in w.root.glob("vhmine.db*"))  # only its hash is kept
    resp = _probe(w, srv, recs)
    manifest = _describe(w, srv, resp)
    gens = _generate(w, srv, tiny_sd, manifest)
    recs = _curate_generated(w, token, gens)
    assert len(recs) == 30 and {r.image_id for r in recs if r.image_source == "generated"} == {
        g.image_id for g in gens.values()
    }
    _export(w, recs)
    _eval(w, srv, recs)

    assert all(r["headers"]["authorization"] == f"Bearer {API_KEY}" for r in srv.requests)  # it was used...
    _no_key_anywhere(tmp_path)  # ...and never written: store, WAL, cache, exports, reports, logs
