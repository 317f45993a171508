"""vhmine manipulate, the rest of issue 12: correlated removal through an OpenAI-compatible image edit (the
loopback server's /v1/images/edits), `--prior llm` end to end, the Owl-ViT detector through the whole stage
on a collection without COCO annotations, and reruns that accumulate (no second edit of a stored case; the
report covers every stored case of the run's options)."""

import hashlib
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers import tiny_owlvit, write_photos  # noqa: E402
from manipulate_scenes import OBJECTS, _opts, _victim  # noqa: E402
from openai_server import chat_text  # noqa: E402

from vhmine.llm import LLM, Cache, LLMOptions  # noqa: E402

MAGENTA = (255, 0, 255)  # the loopback server's canned edit


def _cli(indexes, *args):
    from typer.testing import CliRunner

    from vhmine.cli import app

    return CliRunner().invoke(
        app,
        [
            "manipulate",
            "--model",
            "victim-vlm",
            "--indexes",
            str(indexes),
            "--per-strategy",
            "1",
            "--retry-wait",
            "0.01",
            *args,
        ],
    )


def _generations(db):
    from sqlalchemy import select

    from vhmine.store import Generation, Image, Task, open_store

    with open_store(db) as store, store.session(write=False) as s:
        gens = [
            (g.params, i.path)
            for g, i in s.execute(select(Generation, Image).join(Image, Image.id == Generation.image_id))
        ]
        tasks = s.scalars(select(Task)).all()
        return gens, [(t.mode, t.status) for t in tasks]


def _edits(server):
    return [r["body"] for r in server.requests if r["path"].endswith("/images/edits")]


def _rgb(data_or_path):
    from PIL import Image

    src = io.BytesIO(data_or_path) if isinstance(data_or_path, bytes) else data_or_path
    with Image.open(src) as im:
        return np.asarray(im.convert("RGBA" if im.mode == "RGBA" else "RGB"))


def _mask(path):
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("L")) > 0


def _photo(folder, sha):
    return next(p for p in folder.glob("*.png") if hashlib.sha256(p.read_bytes()).hexdigest() == sha)


def _removal_victim():
    return _victim(
        [
            ("Describe this image", "A plain scene."),
            ("Describe its appearance", "a plain object"),
            ("given their center positions", "No."),
            ("Is there", "No."),
        ]
    )


def test_removal_through_an_openai_image_edit_keeps_the_scene_outside_the_mask_and_a_rerun_edits_nothing(
    collection, openai_server, tmp_path
):

    openai_server.responder = _removal_victim()
    db, out = tmp_path / "s.db", tmp_path / "edited"
    args = [
        "--index",
        "scenes",
        "--strategy",
        "removal",
        "--inpaint",
        "openai:gpt-image-1",
        "--out",
        str(out),
        "--db",
        str(db),
    ]
    res = _cli(collection / "idx", *args, "--cache", str(tmp_path / "c1.db"))
    assert res.exit_code == 0, res.output
    (sent,) = _edits(openai_server)
    (gen,) = _generations(db)[0]
    p, path = gen
    assert sent["model"] == "gpt-image-1" and f"with no {p['removed_object']}" in sent["prompt"]
    assert p["edit_backend"] == "openai:gpt-image-1" and p["inpaint"] == {"model": "gpt-image-1", "api": "images.edit"}
    # what went out: the source picture as it is, and a mask transparent exactly where the object is removed
    source = _rgb(_photo(collection / "photos", p["source_sha256"]))
    mask = _mask(out / p["mask"])
    assert (_rgb(sent["image"]) == source).all()
    alpha = _rgb(sent["mask"])[..., 3]
    assert alpha.shape == mask.shape and (alpha[mask] == 0).all() and (alpha[~mask] == 255).all()
    # what came back (40x24, another size) repaints the mask only; every pixel outside it is the source's
    edited = _rgb(path)
    assert edited.shape == source.shape and 0 < mask.sum() < mask.size
    assert (edited[~mask] == source[~mask]).all() and (edited[mask] == MAGENTA).all()
    report = json.loads((out / "manipulate-report.json").read_text())
    (case,) = report["cases"].values()
    assert case["target"] == p["removed_object"] and report["discarded_edits"] == []
    # a rerun with no cache would get another picture (green): the stored case is reused, nothing is edited again
    openai_server.edit_png = _png((0, 255, 0))
    res = _cli(collection / "idx", *args, "--cache", str(tmp_path / "c2.db"))
    assert res.exit_code == 0, res.output
    assert len(_edits(openai_server)) == 1 and len(_generations(db)[0]) == 1
    again = json.loads((out / "manipulate-report.json").read_text())
    assert list(again["cases"]) == list(report["cases"]) and "0 new in this run" in res.output


def test_a_failed_image_edit_is_discarded_with_its_reason_and_a_rerun_makes_it(collection, openai_server, tmp_path):
    openai_server.responder = _removal_victim()
    openai_server.faults = ["bad-image", "bad-image"]  # both tries of the one edit (counts prior: edits go first)
    db, out, cache = tmp_path / "s.db", tmp_path / "edited", tmp_path / "c.db"
    args = [
        "--index",
        "scenes",
        "--strategy",
        "removal",
        "--inpaint",
        "openai:gpt-image-1",
        "--out",
        str(out),
        "--db",
        str(db),
        "--cache",
        str(cache),
        "--max-retries",
        "1",
        "--concurrency",
        "1",
    ]
    res = _cli(collection / "idx", *args)
    assert res.exit_code == 3, res.output  # partial: the rerun asks again
    report = json.loads((out / "manipulate-report.json").read_text())
    (gone,) = report["discarded_edits"]
    assert report["cases"] == {} and "unreadable answer" in gone["reason"] and gone["backend"] == "openai:gpt-image-1"
    assert _generations(db)[0] == [] and "discarded: removal" in res.output
    c = Cache(cache)
    assert [(f["kind"], f["status"]) for f in c.failures()] == [("image_edit", "malformed")]
    c.close()
    res = _cli(collection / "idx", *args)
    assert res.exit_code == 0, res.output
    report = json.loads((out / "manipulate-report.json").read_text())
    assert len(report["cases"]) == 1 and report["discarded_edits"] == [] and len(_generations(db)[0]) == 1


def _prior_answer(body):
    """The text-only model: names the last candidate listed (abnormal), the first two in reverse order
    (paired), the first (removal); 'I cannot tell.' for a scene of a flag and a person."""
    text = chat_text(body)
    if "A picture shows: flag, person" in text:
        return "I cannot tell."
    if m := re.search(r"in such a picture: (.*)\?", text):
        return f"Probably a {m.group(1).split(', ')[-1]}."
    if m := re.search(r"separated by a comma: (.*)\.", text):
        return ", ".join(m.group(1).split(", ")[1::-1])
    if m := re.search(r"A picture shows: (.*)\. Which ONE", text):
        return f"The {m.group(1).split(', ')[0]}"
    return None


def test_llm_prior_names_the_objects_and_records_what_it_cannot_use(openai_server, tmp_path):
    from vhmine.manipulate.prior import llm_choices

    openai_server.responder = lambda body: _prior_answer(body) or "Yes."
    openai_server.faults = ["malformed"]  # the first answer is unreadable once: retried
    asks = [
        ("abnormal", ["cup", "saucer"], ["cup", "horse", "rocket"]),
        ("paired", ["cat"], ["saddle", "horse", "rocket"]),
        ("removal", ["sofa", "cat"], ["sofa", "cat"]),
        ("removal", ["flag", "person"], ["flag", "person"]),
    ]
    misses: dict = {}
    with LLM(
        LLMOptions(model="victim-vlm", cache=tmp_path / "c.db", progress=False, retry_wait_s=0.01, concurrency=1)
    ) as llm:
        got = llm_choices(llm, "text-llm", asks, misses)
    # the lists go out sorted; the answer's order decides which of a pair is inserted
    assert [c and c.objects for c in got] == [("rocket",), ("rocket", "horse"), ("cat",), None]
    assert got[0].prior.startswith("llm:text-llm manipulate_prior@v1") and got[0].answer == "Probably a rocket."
    assert list(misses) == [3] and misses[3][0] is False and "I cannot tell." in misses[3][1]
    bodies = openai_server.chats()
    assert len(bodies) == 5 and {b["model"] for b in bodies} == {"text-llm"}  # 4 asks, one of them twice
    assert all(b["temperature"] == 0.0 for b in bodies)


def test_llm_prior_through_the_stage_records_the_prior_with_each_case_and_a_failed_request(
    collection, openai_server, tmp_path
):
    victim = _victim(
        [("Describe this image", "A photo."), ("Describe its appearance", "a thing"), ("Is there", "Yes.")]
    )
    openai_server.responder = lambda body: _prior_answer(body) or victim(body)
    openai_server.faults = ["malformed", "malformed"]  # the first prior request fails on both tries
    db, out, cache = tmp_path / "s.db", tmp_path / "edited", tmp_path / "c.db"
    res = _cli(
        collection / "idx",
        "--index",
        "scenes",
        "--strategy",
        "abnormal",
        "--prior",
        "llm",
        "--prior-model",
        "text-llm",
        "--out",
        str(out),
        "--db",
        str(db),
        "--cache",
        str(cache),
        "--max-retries",
        "1",
        "--concurrency",
        "1",
    )
    assert res.exit_code == 3, res.output
    report = json.loads((out / "manipulate-report.json").read_text())
    assert report["prior"] == "llm" and report["failed_requests"] == 1
    assert any("the prior model's request failed" in s and "unreadable" in s for s in report["skipped"])
    c = Cache(cache)
    assert [(f["kind"], f["model"], f["status"]) for f in c.failures()] == [("chat", "text-llm", "malformed")]
    c.close()
    (case,) = report["cases"].values()
    named = re.match(r"Probably a (.*)\.", case["prior_answer"]).group(1)
    assert case["target"] == named and case["prior"].startswith("llm:text-llm manipulate_prior@v1")
    ((p, _),), tasks = _generations(db)
    assert p["prior"] == case["prior"] and p["prior_answer"] == case["prior_answer"] and p["inserted_object"] == named
    assert ("existence", "open") in tasks


@pytest.fixture(scope="module")
def plain(tmp_path_factory, tiny_models):
    """The same photos embedded with no COCO annotations, and a tiny Owl-ViT saved to a folder."""
    from vhmine.embed.job import EmbedOptions, embed_collection

    root = tmp_path_factory.mktemp("plain")
    write_photos(root / "photos", tuple(n[:-4] for n in OBJECTS))
    clip, dino = tiny_models
    embed_collection(
        EmbedOptions(
            images=root / "photos",
            name="plain",
            indexes=root / "idx",
            clip_model=clip,
            dino_model=dino,
            workers=0,
            batch_size=8,
            progress=False,
        )
    )
    return root, tiny_owlvit(root / "owl")


@pytest.mark.slow
def test_owlvit_finds_the_objects_of_a_collection_without_annotations_through_the_whole_stage(
    plain, openai_server, tmp_path
):
    root, owl = plain
    openai_server.responder = _removal_victim()
    db, out = tmp_path / "s.db", tmp_path / "edited"
    args = [
        "--index",
        "plain",
        "--strategy",
        "removal",
        "--inpaint",
        "openai:gpt-image-1",
        "--out",
        str(out),
        "--db",
        str(db),
        "--cache",
        str(tmp_path / "c.db"),
    ]
    res = _cli(root / "idx", *args)
    assert res.exit_code != 0 and "no scene has objects" in res.output  # no annotations and no detector
    res = _cli(root / "idx", *args, "--detector", str(owl), "--vocabulary", "cup,spoon,cat")
    assert res.exit_code == 0, res.output
    ((p, path),), tasks = _generations(db)
    assert p["detector"] == str(owl) and p["coco"] is False and p["removed_object"] in {"cup", "spoon", "cat"}
    assert p["edit_backend"] == "openai:gpt-image-1" and ("existence", "open") in tasks
    # a detector gives boxes, so the removal mask is a rectangle (the box enlarged by 20%)
    mask = _mask(out / p["mask"])
    ys, xs = np.nonzero(mask)
    assert mask[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1].all() and mask.sum() < mask.size
    (sent,) = _edits(openai_server)
    source = _rgb(_photo(root / "photos", p["source_sha256"]))
    assert (_rgb(sent["image"]) == source).all() and (_rgb(path)[~mask] == source[~mask]).all()
    report = json.loads((out / "manipulate-report.json").read_text())
    (case,) = report["cases"].values()
    assert case["target"] == p["removed_object"] and report["families"]


def test_a_rerun_with_fewer_cases_reports_every_stored_case_and_adds_none(collection, openai_server, tmp_path):
    from dataclasses import replace

    from vhmine.store import open_store

    openai_server.responder = _victim([("Describe", "A photo."), ("Is there", "No.")])
    root = tmp_path
    opts = replace(_opts(collection, "abnormal"), out=root / "edited", per_strategy=2)
    with open_store(root / "s.db") as store:
        first = manipulate_run(store, opts)
        again = manipulate_run(store, replace(opts, per_strategy=1))
    assert len(first.cases) == 2
    assert [c.id for c in again.cases] == [c.id for c in first.cases]
    assert first.new == 2 and again.new == 0
    assert len(_generations(root / "s.db")[0]) == 2
    report = json.loads((root / "edited" / "manipulate-report.json").read_text())
    assert sorted(report["cases"]) == sorted(c.id for c in first.cases)
    assert report["metrics"]["existence"]["cases"] == 2
    # the stored case comes back as it was made: the same questions, about the same objects
    assert [q.text for q in again.cases[0].questions] == [q.text for q in first.cases[0].questions]


def test_a_truncated_edited_image_is_made_again_not_reused(collection, openai_server, tmp_path):
    """A run killed while writing left half an image under its final name: the rerun checks the file's sha256
    against the store's, edits the case again and writes the image whole (atomically: no temporary file stays)."""
    from dataclasses import replace

    from vhmine.store import open_store

    openai_server.responder = _victim([("Describe", "A photo."), ("Is there", "No.")])
    opts = replace(_opts(collection, "abnormal"), out=tmp_path / "edited")
    with open_store(tmp_path / "s.db") as store:
        first = manipulate_run(store, opts)
        ((_, path),) = _generations(tmp_path / "s.db")[0]
        whole = Path(path).read_bytes()
        assert Path(path).name == hashlib.sha256(whole).hexdigest() + ".png"
        Path(path).write_bytes(whole[: len(whole) // 2])
        again = manipulate_run(store, opts)
    assert again.new == 1 and [c.id for c in again.cases] == [c.id for c in first.cases]
    assert Path(path).read_bytes() == whole  # written again, whole
    assert len(_generations(tmp_path / "s.db")[0]) == 1  # the same image: no second generation
    assert sorted(p.name for p in (tmp_path / "edited").iterdir() if p.name.startswith(".")) == []
    report = json.loads((tmp_path / "edited" / "manipulate-report.json").read_text())
    assert list(report["cases"]) == [c.id for c in first.cases] and not again.skipped


def manipulate_run(store, opts):
    from vhmine.manipulate import manipulate

    return manipulate(store, opts)


def _png(color):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 24), color).save(buf, format="PNG")
    return buf.getvalue()
