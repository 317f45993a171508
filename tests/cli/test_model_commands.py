"""cli.models: a missing or rejected key stops every model stage (probe, draft, blind, describe, generate) once,
with one line, as eval does (against a real loopback OpenAI-compatible server)."""

from __future__ import annotations

import pytest
from helpers import make_ready_store

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
    base = [
        "--db",
        str(tmp_path / "store.db"),
        "--cache",
        str(tmp_path / "cache.db"),
        "--concurrency",
        "1",
        "--retry-wait",
        "0.01",
    ]
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
    why = (
        "OPENAI_API_KEY is not set, so nothing can be sent to"
        if key == "missing"
        else f"{openai_server.base_url} rejected the API key (401"
    )
    assert why in lines[0]
    assert "partial run" not in r.output and "not answered" not in r.output and "rejected-but-secret" not in r.output
    assert len(openai_server.requests) == (0 if key == "missing" else 1)  # the first 401 stops the client
