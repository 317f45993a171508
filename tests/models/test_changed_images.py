"""An image changed (or gone) since it was curated is refused everywhere as the app refuses it, and each stage goes on
without it (issue 32): probe sent the changed file's new bytes and stored verdicts for the old instances; `vhmine
draft` stopped at the first changed image; export stopped at one instance at a time. Against a real loopback
OpenAI-compatible server."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import make_ready_store, write_pairs, write_photos  # noqa: E402
from openai_server import chat_images  # noqa: E402  (the openai_server fixture: tests/conftest.py)


def _change(path: str) -> None:
    """The file overwritten in place with other content (as an edited or replaced photo is)."""
    PILImage.fromarray(np.full((20, 20, 3), 7, np.uint8)).save(path, format="PNG")


def _image_of(store, mode: str | None = None, side: int = 0):
    """(id, sha256, path) of the `side`-th image (by id) of the ready instances (of `mode`)."""
    from vhmine import curate as C

    recs = sorted({(r.image_id, r.image_sha256, r.image_path) for r in C.ready_instances(store, mode)})
    return recs[side]


def test_probe_leaves_out_instances_whose_image_changed_and_answers_the_rest(openai_server, tmp_path):
    from vhmine import curate as C
    from vhmine.llm import LLMOptions
    from vhmine.models.probe import ProbeOptions, probe

    srv = openai_server
    store = make_ready_store(tmp_path)
    image_id, sha, path = _image_of(store, "counting")
    _change(path)
    res = probe(
        store,
        ProbeOptions(
            LLMOptions(
                model="victim-vlm",
                base_url=srv.base_url,
                cache=tmp_path / "c.db",
                retry_wait_s=0.01,
                timeout_s=5,
                progress=False,
            )
        ),
    )
    sent = {h for body in srv.chats() for h in chat_images(body)}
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() not in sent  # main sent the changed file's bytes
    mine = {r.id for r in C.ready_instances(store) if r.image_id == image_id}
    assert len(mine) >= 3  # its open question and two yes/no questions, in each mode it is in
    refused = [i for i in res.items if i.status == "image refused"]
    assert {i.instance_id for i in refused} == mine and not res.partial
    assert all("no longer matches its recorded sha256" in i.reason for i in refused)
    answered = [i for i in res.items if i.status == "answered"]
    assert len(answered) == 12 - len(mine) > 0
    recorded = {r.image_sha256 for r in C.ready_instances(store)}
    assert sent <= recorded and sha not in sent  # only recorded content was sent
    with store.session(write=False) as s:
        from vhmine.store import Response

        assert not {r.instance_id for r in s.query(Response)} & mine  # no verdict stored for it
    assert "left out: counting" in res.summary() and "partial run" not in res.summary()
    store.close()


CANNED = json.dumps({"template": "color.what_color", "slots": {"object": "cup"}, "answer_a": "red", "answer_b": "blue"})


def test_draft_goes_on_past_a_changed_image_and_lists_it(openai_server, tmp_path):
    from vhmine import curate as C
    from vhmine.llm import LLMOptions
    from vhmine.models.draft import DraftOptions, draft
    from vhmine.seed import seed_pairs
    from vhmine.store import Image, open_store

    openai_server.responder = lambda body: CANNED
    store = open_store(tmp_path / "store.db")
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket"))
    seed_pairs(store, write_pairs(tmp_path / "runs" / "t", photos), per_mode=3, modes=["color"])
    with store.session(write=False) as s:
        changed = s.query(Image).filter(Image.path.endswith("coffee.png")).one().id
    _change(str(photos[1]))
    res = draft(
        store,
        DraftOptions(
            llm=LLMOptions(
                model="fake-vlm",
                base_url=openai_server.base_url,
                cache=tmp_path / "c.db",
                max_retries=0,
                retry_wait_s=0.0,
            )
        ),
    )
    by_status = {}
    for i in res.items:
        by_status.setdefault(i.status, []).append(i)
    assert len(by_status["queued"]) == 1 and len(by_status["image refused"]) == 2  # coffee is in two of the 3 pairs
    assert all(changed in i.reason and "no longer matches" in i.reason for i in by_status["image refused"])
    assert len(openai_server.chats()) == 1 and not res.partial
    assert "image refused" in res.summary() and "partial run" not in res.summary()
    C.add_worker(store, "alice")
    assert C.work.next_verify_item(store, "alice", "color") is not None  # the one drafted waits to be verified
    store.close()


def test_export_leaves_out_instances_of_missing_or_changed_images_and_says_why(tmp_path):
    from vhmine import curate as C
    from vhmine.export.job import ExportOptions, export_benchmark

    store = make_ready_store(tmp_path)
    changed, missing = _image_of(store, side=0), _image_of(store, side=2)
    _change(changed[2])
    Path(missing[2]).unlink()
    n = {
        what: sum(1 for r in C.ready_instances(store) if r.image_id == img[0])
        for what, img in (("changed", changed), ("missing", missing))
    }
    gone = {r.id for r in C.ready_instances(store) if r.image_id in (changed[0], missing[0])}
    assert n["changed"] and n["missing"] and len(gone) == n["changed"] + n["missing"] < 12
    res = export_benchmark(store, ExportOptions(out=tmp_path / "bench", format="vhtest", allow_unbalanced=True))
    manifest = json.loads((tmp_path / "bench" / "manifest.json").read_text())
    assert set(manifest["instances"]).isdisjoint(gone) and len(manifest["instances"]) == 12 - len(gone)
    assert manifest["left_out_images"] == n
    said = res.summary()
    assert (
        f"left out {len(gone)} instance(s) whose image is missing ({n['missing']}) or changed since it was "
        f"curated ({n['changed']})"
    ) in said
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
