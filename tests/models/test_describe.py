"""vhmine.models.describe against a loopback OpenAI-compatible server: one example description per success
(with its image), hypothetical examples where successes are scarce (and the merged row marked so),
one merged description per mode with its sources and prompts, free reruns, editable files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from helpers import make_ready_store, mode_responses, probed_store
from openai_server import API_KEY, chat_images, chat_text

from vhmine import curate as C
from vhmine import llm as L
from vhmine import prompts as P
from vhmine.llm import LLMOptions
from vhmine.models.describe import DescribeOptions, describe, latest_descriptions
from vhmine.models.probe import ProbeOptions, probe


def _answer(body):
    text = chat_text(body)
    if "Merge them into ONE description" in text:
        return "MERGED: images with several similar objects partly hidden."
    if "Invent one plausible example" in text:
        return "HYPOTHETICAL: a cup whose color changes under tinted light."
    if "hallucinated when answering" in text:
        return "EXAMPLE: occluded objects confuse the count."
    if "correct, incorrect or unclear" in text:
        return "incorrect"
    return "Yes" if "yes or no" in text else "There are 7."


def _descriptions(store):
    from sqlalchemy import select

    from vhmine.store import Description

    with store.session(write=False) as s:
        return list(s.scalars(select(Description).order_by(Description.id)))


def test_describe_merges_real_and_hypothetical_examples_and_reruns_free(openai_server, tmp_path):
    srv = openai_server
    srv.responder = _answer
    store = make_ready_store(tmp_path)
    opts = dict(base_url=srv.base_url, cache=tmp_path / "cache.db", retry_wait_s=0.01, progress=False)
    probe(store, ProbeOptions(LLMOptions(model="victim-vlm", **opts), judge="judge", modes=["counting"]))
    n0 = len(srv.chats())
    res = describe(
        store,
        DescribeOptions(
            LLMOptions(model="describer", **opts),
            modes=["counting", "color", "ocr"],
            examples=3,
            min_real=2,
            out=tmp_path / "desc",
        ),
    )
    assert not res.partial
    by_mode = {m.mode: m for m in res.modes}
    # counting: 4 successes, 3 explained; color and ocr: none probed, so 3 hypothetical each
    assert (by_mode["counting"].real, by_mode["counting"].hypothetical) == (3, 0)
    assert (by_mode["color"].real, by_mode["color"].hypothetical) == (0, 3)
    asked = srv.chats()[n0:]
    assert len(asked) == 3 + 3 + 3 + 3  # 9 examples, 3 merges
    examples = [b for b in asked if "hallucinated when answering" in chat_text(b)]
    assert len(examples) == 3 and all(len(chat_images(b)) == 1 for b in examples)
    one = chat_text(examples[0])
    assert 'The failure is of the "counting" kind: How many objects of a kind there are.' in one
    assert "The model's answer: " in one and "The error: the model answered" in one
    rows = _descriptions(store)
    merged = {d.mode: d for d in rows if d.kind == "merged"}
    assert set(merged) == {"counting", "color", "ocr"}
    assert (merged["counting"].hypothetical, merged["color"].hypothetical) == (False, True)
    assert merged["counting"].text.startswith("MERGED") and merged["counting"].model == "describer"
    ex_ids = [s for s in merged["counting"].sources if not s.startswith("prompt:")]
    assert merged["counting"].sources[-1] == f"prompt:{P.load('describe_merge').id}"
    ex = [d for d in rows if d.id in ex_ids]
    assert len(ex) == 3 and all(d.kind == "example" and not d.hypothetical for d in ex)
    assert all(d.sources[-1] == f"prompt:{P.load('describe_example').id}" and len(d.sources) == 3 for d in ex)
    hyp = [d for d in rows if d.kind == "example" and d.mode == "color"]
    assert len(hyp) == 3 and all(d.hypothetical for d in hyp)
    # the merge prompt holds every example, in a fixed order
    merge_text = next(chat_text(b) for b in asked if "Merge them" in chat_text(b) and '"counting"' in chat_text(b))
    assert merge_text.count("EXAMPLE: occluded objects confuse the count.") == 3 and "Analysis 3:" in merge_text
    # editable copies
    assert sorted(p.name for p in (tmp_path / "desc").iterdir()) == [
        "color.txt",
        "counting.txt",
        "descriptions.json",
        "ocr.txt",
    ]
    assert (tmp_path / "desc" / "counting.txt").read_text() == merged["counting"].text + "\n"
    manifest = json.loads((tmp_path / "desc" / "descriptions.json").read_text())
    assert manifest["ocr"]["description_id"] == merged["ocr"].id
    assert latest_descriptions(store, ["counting"])["counting"] == (merged["counting"].id, merged["counting"].text)
    # a rerun: nothing asked, nothing added
    n = len(srv.chats())
    again = describe(
        store,
        DescribeOptions(
            LLMOptions(model="describer", **opts), modes=["counting", "color", "ocr"], examples=3, min_real=2
        ),
    )
    assert len(srv.chats()) == n and len(_descriptions(store)) == len(rows)
    assert [m.description_id for m in again.modes] == [merged[m].id for m in ("counting", "color", "ocr")]
    store.close()


@pytest.mark.slow
def test_describe_cli_failure_of_one_mode_is_partial(openai_server, tmp_path):
    srv = openai_server
    srv.responder = _answer
    srv.refuse = lambda body: '"ocr"' in chat_text(body)  # every ocr request is refused
    make_ready_store(tmp_path).close()
    env = {
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_BASE_URL": srv.base_url,
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
        **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
    }  # the vhmine under test
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "vhmine.cli",
            "describe",
            "--model",
            "describer",
            "--mode",
            "shape",
            "--mode",
            "ocr",
            "--examples",
            "2",
            "--db",
            str(tmp_path / "store.db"),
            "--cache",
            str(tmp_path / "c.db"),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 3, r.stderr
    assert "  shape        description " in r.stdout and "from 0 real + 2 hypothetical examples" in r.stdout
    assert "  ocr          NO description from 0 real + 2 hypothetical examples" in r.stdout
    assert r.stdout.count("failed: hypothetical example: refused: describer at http://127.0.0.1:") == 2
    assert "failed: no example description to merge" in r.stdout
    assert [p for p in tmp_path.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()] == []


def test_prompts_are_versioned_package_files():
    from vhmine.errors import InputError

    p = P.load("describe_merge")
    assert p.version == max(P.versions("describe_merge")) and p.id.startswith("describe_merge@v1#")
    assert p.slots == ("count", "mode", "definition", "analyses")
    assert (P.FOLDER / "describe_merge.v1.txt").read_text(encoding="utf-8") == p.text
    with pytest.raises(InputError, match=r"^prompt describe_merge@v1#[0-9a-f]{8} needs analyses$"):
        p.render(count=1, mode="ocr", definition="d")
    names = sorted({f.name.split(".v")[0] for f in P.FOLDER.glob("*.txt")})
    with pytest.raises(
        InputError, match=r"^no prompt 'nope' in .*: choose one of " + re.escape(", ".join(names)) + "$"
    ):
        P.load("nope")
    import importlib.resources

    shipped = {f.name for f in importlib.resources.files("vhmine.prompts").iterdir() if f.name.endswith(".txt")}
    assert (
        shipped == {p.name for p in P.FOLDER.glob("*.txt")}
        and {"judge_oeq.v1.txt", "draft.v1.txt", "blind.v1.txt"} <= shipped
    )


def test_description_files_a_user_edited_are_never_overwritten(tmp_path):
    import json

    from vhmine.models.describe import ModeDescription, write_description_files

    write_description_files(
        tmp_path, [ModeDescription("color", "d1", text="first"), ModeDescription("shape", "d2", text="round")]
    )
    (tmp_path / "color.txt").write_text("first, with the user's own guidance\n")
    write_description_files(
        tmp_path, [ModeDescription("color", "d3", text="second"), ModeDescription("shape", "d4", text="square")]
    )
    assert (tmp_path / "color.txt").read_text() == "first, with the user's own guidance\n"  # the edit is kept
    assert (tmp_path / "color.new.txt").read_text() == "second\n"
    assert (tmp_path / "shape.txt").read_text() == "square\n"  # untouched by the user: replaced
    manifest = json.loads((tmp_path / "descriptions.json").read_text())
    assert manifest["color"]["description_id"] == "d1" and manifest["shape"]["description_id"] == "d4"


def test_describe_explains_only_what_the_workers_call_hallucinated(tmp_path, openai_server):
    from vhmine.models.describe import DescribeOptions, describe

    srv = openai_server
    srv.responder = lambda body: "Yes"
    store = probed_store(tmp_path, srv)
    wrong = [rid for rid, v in mode_responses(store, "color") if v == "hallucinated"]
    for w in ("bob", "carol"):
        C.work.label_response(store, w, wrong[0], "correct")
    srv.responder = lambda body: "An explanation."
    res = describe(
        store,
        DescribeOptions(
            L.LLMOptions(model="describer", base_url=srv.base_url, cache=tmp_path / "cache.db", progress=False),
            modes=["color"],
            examples=5,
            min_real=1,
        ),
    )
    [md] = res.modes
    assert (md.real, md.hypothetical) == (1, 0)
    from sqlalchemy import select

    from vhmine.store import Description

    with store.session(write=False) as s:
        [example] = s.scalars(select(Description).where(Description.kind == "example")).all()
    assert example.sources[1] == wrong[1]  # the one the workers did not overturn
    store.close()


def test_describe_out_that_cannot_be_written_is_said_in_one_line_before_any_model_is_asked(openai_server, tmp_path):
    """`--out` in a folder this user cannot write: one line naming it (as mine, embed, export and seed say it),
    not an OSError traceback after the model was paid for (issue 33)."""
    from helpers import unwritable_folders
    from typer.testing import CliRunner

    from vhmine.cli import app

    srv = openai_server
    srv.responder = _answer
    make_ready_store(tmp_path).close()
    for folder in unwritable_folders(tmp_path):
        r = CliRunner().invoke(
            app,
            ["describe", "--model", "describer", "--mode", "shape", "--examples", "1", "--out", str(folder / "d")]
            + ["--db", str(tmp_path / "store.db"), "--cache", str(tmp_path / "c.db")],
        )
        assert r.exit_code == 2, (folder, r.output, r.exception)
        (line,) = r.output.strip().splitlines()
        assert line.startswith(f"error: --out: cannot write in {folder / 'd'} (") and line.endswith(
            "or fix its permissions"
        )
    assert srv.chats() == []  # nothing was asked, nothing paid for
