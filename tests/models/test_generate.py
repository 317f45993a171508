"""vhmine.models.generate: DALL-E-3 from the description itself, other backends from an LLM-written prompt,
a tiny Stable Diffusion pipeline (conftest's `tiny_sd`), saved and loaded through `diffusers:<folder>`; each image
stored once by sha256 with its provenance and queued in its mode; a content-policy rejection recorded
with the run going on."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys

import pytest
from helpers import make_ready_store
from openai_server import API_KEY, chat_text

from vhmine import prompts as P
from vhmine.errors import InputError
from vhmine.llm import LLMOptions
from vhmine.models.describe import _add_description
from vhmine.models.generate import GenerateOptions, generate, parse_backend


def _store_with_descriptions(tmp_path, texts: dict):
    store = make_ready_store(tmp_path)
    for mode, text in texts.items():
        _add_description(store, f"d-{mode}", mode, "merged", text, "describer", False, [])
    return store


def _generations(store):
    from sqlalchemy import select

    from vhmine.store import Generation, Task

    with store.session(write=False) as s:
        gens = list(s.scalars(select(Generation).order_by(Generation.mode, Generation.image_id)))
        tasks = {t.id: t for t in s.scalars(select(Task).where(Task.image_id.is_not(None)))}
    return gens, tasks


def _llm(srv, tmp_path, model):
    return LLMOptions(
        model=model, base_url=srv.base_url, cache=tmp_path / "cache.db", retry_wait_s=0.01, progress=False
    )


def test_dalle3_draws_the_description_and_a_rejection_is_recorded(openai_server, tmp_path):
    srv = openai_server
    store = _store_with_descriptions(
        tmp_path, {"counting": "Many cups, some hidden behind others.", "color": "A FORBIDDEN scene."}
    )
    opts = GenerateOptions(
        backend="openai:dall-e-3",
        llm=_llm(srv, tmp_path, "dall-e-3"),
        per_mode=2,
        modes=["counting", "color"],
        out=tmp_path / "gen",
    )
    res = generate(store, opts)
    assert res.partial and [(m.mode, m.status) for m in res.items] == [
        ("color", "refused"),
        ("color", "refused"),
        ("counting", "generated"),
        ("counting", "generated"),
    ]
    assert "content policy: dall-e-3 at http://127.0.0.1:" in res.items[0].reason
    bodies = [r["body"] for r in srv.requests if r["path"].endswith("/images/generations")]
    assert srv.chats() == []  # DALL-E-3 gets the description itself, no rewrite
    assert {b["prompt"] for b in bodies} == {"Many cups, some hidden behind others.", "A FORBIDDEN scene."}
    assert {b["response_format"] for b in bodies} == {"b64_json"}
    gens, tasks = _generations(store)
    assert len(gens) == 2 and len({g.image_id for g in gens}) == 2
    for g in gens:
        [png] = [p for p in (tmp_path / "gen").iterdir() if p.name.startswith(g.image_id)]
        assert hashlib.sha256(png.read_bytes()).hexdigest()[:16] == g.image_id
        assert (g.mode, g.backend, g.model, g.seed, g.prompt, g.description_id) == (
            "counting",
            "openai",
            "dall-e-3",
            None,
            "Many cups, some hidden behind others.",
            "d-counting",
        )
        assert g.params["revised_prompt"].startswith("revised: Many cups") and g.params["description_edited"] is False
        assert tasks[f"counting:{g.image_id}"].status == "open"
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == sorted(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}.png" for p in (tmp_path / "gen").iterdir()
    )
    # a rerun asks only the rejected ones again and adds nothing
    n = srv.images_made
    again = generate(store, opts)
    assert srv.images_made == n and [m.status for m in again.items if m.mode == "counting"] == ["existing"] * 2
    assert len(_generations(store)[0]) == 2
    store.close()


def test_gpt_image_gets_an_llm_written_prompt_and_both_texts_are_kept(openai_server, tmp_path):
    srv = openai_server
    srv.responder = lambda body: f"A photo of {chat_text(body).count('variant 2') + 3} red cups on a table."
    store = _store_with_descriptions(tmp_path, {"counting": "Many cups, some hidden behind others."})
    res = generate(
        store,
        GenerateOptions(
            backend="openai:gpt-image-1",
            llm=_llm(srv, tmp_path, "rewriter"),
            per_mode=2,
            modes=["counting"],
            out=tmp_path / "gen",
            size="512x512",
        ),
    )
    assert not res.partial
    [c1, c2] = sorted(srv.chats(), key=chat_text)
    assert "Many cups, some hidden behind others." in chat_text(c1) and "(variant 1)" in chat_text(c1)
    assert c1["model"] == "rewriter"
    bodies = [r["body"] for r in srv.requests if r["path"].endswith("/images/generations")]
    assert sorted(b["prompt"] for b in bodies) == [
        "A photo of 3 red cups on a table.",
        "A photo of 4 red cups on a table.",
    ]
    assert all("response_format" not in b and b["size"] == "512x512" and b["model"] == "gpt-image-1" for b in bodies)
    gens, _ = _generations(store)
    assert sorted(g.prompt for g in gens) == ["A photo of 3 red cups on a table.", "A photo of 4 red cups on a table."]
    assert {(g.params["rewrite_model"], g.params["rewrite_prompt"], g.description_id) for g in gens} == {
        ("rewriter", P.load("image_prompt").id, "d-counting")
    }
    store.close()


@pytest.mark.slow
def test_diffusers_folder_renders_seeded_images_from_edited_descriptions(openai_server, tiny_sd, tmp_path):
    from PIL import Image

    srv = openai_server
    srv.responder = lambda body: (
        "a red cup behind a blue cup" if "(variant 1)" in chat_text(body) else "three green cups"
    )
    store = _store_with_descriptions(tmp_path, {"counting": "Many cups.", "color": "Tinted light."})
    edits = tmp_path / "edits"
    edits.mkdir()
    (edits / "counting.txt").write_text("Many cups, EDITED by a user.\n")
    (edits / "descriptions.json").write_text(json.dumps({"counting": {"description_id": "d-counting"}}))
    opts = GenerateOptions(
        backend=f"diffusers:{tiny_sd}",
        llm=_llm(srv, tmp_path, "rewriter"),
        per_mode=2,
        descriptions=edits,
        out=tmp_path / "gen",
        steps=2,
        width=64,
        height=64,
        seed=5,
        device="cpu",
    )
    res = generate(store, opts)
    assert [(m.mode, m.index, m.status) for m in res.items] == [
        ("counting", 0, "generated"),
        ("counting", 1, "generated"),
    ]
    assert all("EDITED by a user" in chat_text(b) for b in srv.chats())  # the edited text, not the stored one
    gens, tasks = _generations(store)
    assert sorted((g.seed, g.prompt) for g in gens) == [(5, "a red cup behind a blue cup"), (6, "three green cups")]
    for g in gens:
        assert (g.backend, g.model, g.description_id) == ("diffusers", str(tiny_sd), "d-counting")
        assert g.params["description_edited"] is True and g.params["description_text"] == "Many cups, EDITED by a user."
        assert {k: g.params[k] for k in ("steps", "width", "height", "dtype", "device", "pipeline")} == {
            "steps": 2,
            "width": 64,
            "height": 64,
            "dtype": "float32",
            "device": "cpu",
            "pipeline": "StableDiffusionPipeline",
        }
        [png] = [p for p in (tmp_path / "gen").iterdir() if p.name.startswith(g.image_id)]
        assert Image.open(png).size == (64, 64) and hashlib.sha256(png.read_bytes()).hexdigest()[:16] == g.image_id
        assert f"counting:{g.image_id}" in tasks
    again = generate(store, opts)  # recorded (mode, prompt, seed): nothing rendered, nothing asked
    assert [m.status for m in again.items] == ["existing", "existing"] and len(_generations(store)[0]) == 2
    n = len(srv.chats())
    more = generate(store, dataclasses.replace(opts, steps=3))  # other settings draw other pictures: rendered
    assert [m.status for m in more.items] == ["generated", "generated"] and len(srv.chats()) == n
    assert sorted(g.params["steps"] for g in _generations(store)[0]) == [2, 2, 3, 3]
    store.close()


def test_a_description_folder_is_matched_by_id_not_by_being_the_newest(openai_server, tmp_path):
    srv = openai_server
    store = _store_with_descriptions(tmp_path, {"counting": "Many cups.", "color": "Tinted light."})
    _add_description(store, "d-newer", "counting", "merged", "Many cups, described again.", "describer", False, [])
    folder = tmp_path / "desc"
    folder.mkdir()
    (folder / "counting.txt").write_text("Many cups.\n")  # d-counting's own text, though d-newer is newer
    (folder / "color.txt").write_text("Tinted light.\n")
    (folder / "descriptions.json").write_text(
        json.dumps({"counting": {"description_id": "d-counting"}, "color": {"description_id": "d-other-store"}})
    )
    generate(
        store,
        GenerateOptions(
            backend="openai:dall-e-3",
            llm=_llm(srv, tmp_path, "dall-e-3"),
            per_mode=1,
            descriptions=folder,
            out=tmp_path / "gen",
        ),
    )
    gens = {g.mode: g for g in _generations(store)[0]}
    assert (gens["counting"].description_id, gens["counting"].params["description_edited"]) == ("d-counting", False)
    # an id this store does not hold is dropped (a dangling reference would break the foreign key), the text kept
    assert (gens["color"].description_id, gens["color"].params["description_edited"]) == (None, True)
    assert gens["color"].params["description_text"] == "Tinted light."
    store.close()


@pytest.mark.slow
def test_backends_and_cli_errors_say_what_to_do(openai_server, tmp_path):
    with pytest.raises(
        InputError,
        match=r"^unknown backend 'sd:x': use openai:<image model> \(e\.g\. openai:dall-e-3, "
        r"openai:gpt-image-1\) or diffusers:<hub id or local folder>",
    ):
        parse_backend("sd:x")
    assert parse_backend("diffusers:stabilityai/sdxl-turbo").model == "stabilityai/sdxl-turbo"
    assert parse_backend(f"diffusers:{tmp_path}").model == str(tmp_path.resolve())
    assert not parse_backend("openai:dall-e-3").needs_rewrite and parse_backend("openai:dall-e-2").needs_rewrite
    make_ready_store(tmp_path).close()
    env = {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": openai_server.base_url, "PATH": "/usr/bin:/bin"}
    base = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "generate",
        "--db",
        str(tmp_path / "store.db"),
        "--cache",
        str(tmp_path / "c.db"),
    ]
    r = subprocess.run(base + ["--backend", "openai:gpt-image-1"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "backend openai:gpt-image-1 needs --prompt-model" in r.stderr
    r = subprocess.run(
        base + ["--backend", "openai:dall-e-3", "--mode", "shape"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "error: no description for shape: run `vhmine describe` first" in r.stderr


def test_the_same_picture_twice_is_one_new_image_and_said_so(openai_server, tmp_path):
    """A model that draws the same bytes for both variants adds one image: the summary says 1 new, 1 already there
    (it said 2 new, issue 43), and the store holds one generation."""
    from openai_server import png_bytes

    srv = openai_server
    srv.image_png = png_bytes(7)
    store = _store_with_descriptions(tmp_path, {"counting": "Many cups, some hidden behind others."})
    opts = GenerateOptions(
        backend="openai:dall-e-3",
        llm=_llm(srv, tmp_path, "dall-e-3"),
        per_mode=2,
        modes=["counting"],
        out=tmp_path / "g",
    )
    res = generate(store, opts)
    assert sorted(m.status for m in res.items) == ["existing", "generated"], res.items
    assert "counting     1 new, 1 already there, 0 failed" in res.summary(), res.summary()
    gens, _tasks = _generations(store)
    assert len(gens) == 1 and len(list((tmp_path / "g").iterdir())) == 1


def test_an_unwritable_out_is_refused_before_any_model_is_asked(openai_server, tmp_path):
    """Every writing command checks its --out first (issue 43): generate names the folder in one line and asks
    nothing of the model."""
    from helpers import unwritable_folders

    from vhmine.errors import InputError

    srv = openai_server
    store = _store_with_descriptions(tmp_path, {"counting": "Many cups, some hidden behind others."})
    for folder in unwritable_folders(tmp_path):
        opts = GenerateOptions(
            backend="openai:dall-e-3", llm=_llm(srv, tmp_path, "dall-e-3"), per_mode=1, modes=["counting"], out=folder
        )
        with pytest.raises(InputError, match=r"^--out: cannot write in ") as err:
            generate(store, opts)
        assert "\n" not in str(err.value)
    assert srv.requests == []


def test_a_picture_the_backend_returns_as_cmyk_jpeg_is_stored_as_png(tmp_path):
    """An image API that answers with a CMYK JPEG: stored as an RGB PNG, as the export formats re-encode it
    (PIL cannot write CMYK as PNG: the old re-encoding raised)."""
    import io

    from PIL import Image

    from vhmine.models.generate import _save_png

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 40)).convert("CMYK").save(buf, format="JPEG")
    path, new = _save_png(buf.getvalue(), tmp_path)
    assert new and path.suffix == ".png"
    with Image.open(path) as im:
        assert im.format == "PNG" and im.mode == "RGB" and im.size == (8, 6)
    assert _save_png(buf.getvalue(), tmp_path) == (path, False)  # the same bytes: the same file, not a new one
