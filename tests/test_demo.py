"""vhmine.demo: the offline demo runs end to end and says how many pairs its box holds."""

from __future__ import annotations

import pytest
from helpers import run_vhmine


@pytest.mark.slow
def test_offline_demo_says_how_many_pairs_its_box_holds(tmp_path):
    """The demo drew its box around 5 pairs and said "the box holds the 5 pairs", then wrote 31; each
    note was printed twice (logged, then in the summary)."""
    import json
    import re

    import pandas as pd

    r = run_vhmine("demo", "--offline", "--workdir", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "runs" / "demo-offline"
    written = len(pd.read_parquet(run / "pairs.parquet"))
    in_box = json.loads((run / "run.json").read_text())["counts"]["in_box"]
    note = re.search(
        r"the smallest box that holds the 5 pairs CLIP ranks highest relative to DINOv2 .*; "
        r"(\d+) pairs fall inside it, those 5 among them, and (\d+) are written\.",
        r.stdout,
    )
    assert note, r.stdout
    assert (int(note[1]), int(note[2])) == (in_box, written) and written >= 5
    assert re.search(rf"^{written} pairs written to ", r.stdout, re.M)
    said = r.stdout + r.stderr
    for line in ("Pairs from untrained encoders mean nothing", "offline: --offline given", "the smallest box"):
        assert said.count(line) == 1, line
    # it says which stages it ran, and those are the ones it ran: an index and a run, no store, no export
    assert "this run only shows that embed and mine work" in said and "every stage" not in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "indexes", "runs"]


def test_what_the_docs_say_the_demo_runs_is_what_it_runs():
    """README said the offline demo "runs every stage"; it embeds and mines (issue 33). Every paragraph of the
    README and the docs that speaks of `vhmine demo` running stages names the demo's, and claims no more."""
    import re
    from pathlib import Path

    from vhmine.demo import STAGES

    root = Path(__file__).resolve().parents[1]
    said = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for para in re.split(r"\n\s*\n", page.read_text(encoding="utf-8")):
            if "vhmine demo" in para and re.search(r"\bruns?\b", para):
                flat = " ".join(para.split())
                assert "every stage" not in flat and "all stages" not in flat, (page.name, flat)
                said.append((page.name, flat))
    assert {"README.md", "install.md"} <= {name for name, _ in said}
    for name, flat in said:
        if "without network" in flat.lower() or "offline" in flat.lower():
            assert all(re.search(rf"\b{s}\b", flat) for s in STAGES), (name, flat)
