"""vhmine.seed and `vhmine seed` / `vhmine workers`: mined pairs into the store's queues.

`write_pairs` (helpers.py) writes a pairs.parquet and run.json as `vhmine mine` does, over real photos
from scikit-image saved as PNG.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
from helpers import run_vhmine, write_pairs, write_photos


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return write_photos(tmp_path_factory.mktemp("photos"))


def test_assign_vhtest_numbers_each_pair_in_four_modes():
    from vhmine.rules.modes import mode_names
    from vhmine.seed import assign

    plan = assign(200, 100, mode_names())
    assert all(len(v) == 100 and len(set(v)) == 100 for v in plan.values())
    uses = Counter(i for v in plan.values() for i in v)
    assert set(uses) == set(range(200)) and set(uses.values()) == {4}


def test_assign_many_pairs_gives_disjoint_sets_and_few_pairs_in_common():
    from vhmine.rules.modes import mode_names
    from vhmine.seed import assign

    plan = assign(5000, 100, mode_names())
    allidx = [i for v in plan.values() for i in v]
    assert len(allidx) == len(set(allidx)) == 800 and max(allidx) == 799
    small = assign(10, 100, mode_names())
    assert all(v == list(range(10)) for v in small.values())


def test_assign_rejects_zero_per_mode():
    from vhmine.errors import InputError
    from vhmine.seed import assign

    with pytest.raises(InputError, match=r"--per-mode must be at least 1, got 0"):
        assign(10, 0, ["counting"])


def test_seed_queues_tasks_by_rank_and_is_idempotent(tmp_path, photos):
    from vhmine.curate import progress
    from vhmine.seed import seed_pairs
    from vhmine.store import Image, Pair, Run, Task, open_store

    pairs = write_pairs(tmp_path / "runs" / "r1", photos, n_pairs=12)
    shuffled = write_pairs(tmp_path / "runs" / "r2", photos, n_pairs=12, shuffle=True)
    with open_store(tmp_path / "a.db") as a, open_store(tmp_path / "b.db") as b:
        res = seed_pairs(a, pairs, per_mode=3)
        assert res.pairs_read == 12 and res.tasks_added == {m: 3 for m in res.tasks_added} and len(res.tasks_added) == 8
        assert res.pairs_added == 12  # 24 slots over 12 pairs: every pair in two modes
        again = seed_pairs(a, pairs, per_mode=3)
        assert again.images_added == again.pairs_added == sum(again.tasks_added.values()) == 0
        assert again.tasks_existing == 24
        seed_pairs(b, shuffled, per_mode=3)
        with a.session() as sa, b.session() as sb:
            ta = {t.id: t.priority for t in sa.query(Task)}
            tb = {t.id: t.priority for t in sb.query(Task)}
            assert ta == tb  # the file's row order does not matter, the rank does
            rank1 = sa.query(Pair).filter(Pair.rank == 1).one()
            assert f"existence:{rank1.id}" in ta
            assert sa.get(Run, "r1").meta["index"] == "photos"
            assert {i.source for i in sa.query(Image)} == {"mined"}
            cats = {Path(i.path).stem: i.categories for i in sa.query(Image)}
            assert len(cats) == res.images_added == 7 and all(
                c == ([] if n == "page" else [n]) for n, c in cats.items()
            )
        assert [(p.mode, p.remaining, p.done) for p in progress(a)][:2] == [("existence", 3, 0), ("shape", 3, 0)]


def test_seed_errors_name_the_file_and_next_step(tmp_path, photos):
    import pandas as pd

    from vhmine.errors import InputError
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    pairs = write_pairs(tmp_path / "runs" / "r", photos, n_pairs=3)
    with open_store(tmp_path / "s.db") as store:
        with pytest.raises(InputError, match=r"pairs file .*nope.parquet not found: run `vhmine mine` first"):
            seed_pairs(store, tmp_path / "nope.parquet")
        df = pd.read_parquet(pairs)
        df.drop(columns=["gap", "sha256_b"]).to_parquet(tmp_path / "bad.parquet")
        with pytest.raises(
            InputError, match=r"bad.parquet lacks column\(s\) sha256_b, gap: it is not a `vhmine mine` pairs table"
        ):
            seed_pairs(store, tmp_path / "bad.parquet")
        df2 = df.copy()
        df2.loc[1, "image_id_a"] = "0123456789abcdef"
        df2.to_parquet(tmp_path / "badid.parquet")
        with pytest.raises(
            InputError, match=r"\(rank 2, side a\): image id '0123456789abcdef' is not the first 16 hex digits"
        ):
            seed_pairs(store, tmp_path / "badid.parquet")
        df3 = df.copy()
        df3.loc[0, "path_b"] = str(tmp_path / "gone.png")
        df3.to_parquet(tmp_path / "gone.parquet")
        with pytest.raises(
            InputError, match=r"\(rank 1, side b\): image file .*gone.png is missing: seed on the machine"
        ):
            seed_pairs(store, tmp_path / "gone.parquet")
        (pairs.parent / "run.json").write_text('{"index": ')  # cut short
        with pytest.raises(InputError, match=r"run.json is not valid JSON \(.*\): re-run `vhmine mine`, or remove it"):
            seed_pairs(store, pairs)


def test_cli_seed_and_workers(tmp_path, photos):
    from typer.testing import CliRunner

    from vhmine.cli import app
    from vhmine.curate import sign_in
    from vhmine.store import open_store

    pairs = write_pairs(tmp_path / "runs" / "demo", photos, n_pairs=4)
    db = str(tmp_path / "cli.db")
    r = CliRunner().invoke(
        app, ["seed", "--pairs", str(pairs), "--per-mode", "2", "--mode", "counting", "--mode", "color", "--db", db]
    )
    assert r.exit_code == 0, r.output
    assert (
        "seeded run demo: 4 pairs read" in r.output
        and "tasks queued: counting 2, color 2 (4 new, 0 already queued)" in r.output
    )
    r = CliRunner().invoke(app, ["workers", "add", "alice", "--admin", "--db", db])
    assert r.exit_code == 0, r.output
    token = r.stdout.strip().splitlines()[-1]
    assert token.startswith("vhm_") and len(token) > 40
    with open_store(db) as store:
        assert sign_in(store, token).name == "alice"
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("cli.db*"))
    assert token.encode() not in raw and hashlib.sha256(token.encode()).hexdigest().encode() in raw
    r = CliRunner().invoke(app, ["workers", "add", "alice", "--db", db])
    assert r.exit_code == 2 and "worker 'alice' already exists" in r.output
    r = CliRunner().invoke(app, ["workers", "list", "--db", db])
    assert r.stdout.strip() == "alice\tadmin\tactive" and token not in r.output
    r = CliRunner().invoke(app, ["seed", "--pairs", str(tmp_path / "x.parquet"), "--db", db])
    assert r.exit_code == 2 and "error: pairs file" in r.output


@pytest.mark.slow
def test_seed_given_the_csv_names_the_parquet_file_beside_it(tmp_path):
    import pandas as pd
    from helpers import write_pairs, write_photos

    pairs = write_pairs(tmp_path / "runs" / "t", write_photos(tmp_path / "photos", ("coffee", "rocket", "horse")))
    pd.read_parquet(pairs).to_csv(pairs.with_name("pairs.csv"), index=False)  # as `vhmine mine` writes both
    r = run_vhmine("seed", "--db", "sqlite:///store.db", "--pairs", "runs/t/pairs.csv", cwd=tmp_path)
    assert r.returncode == 2
    said = " ".join((r.stdout + r.stderr).split())
    run = (tmp_path / "runs" / "t").resolve()
    assert (
        f"cannot read {run / 'pairs.csv'} as parquet: pass --pairs {run / 'pairs.parquet'}, the parquet file "
        "`vhmine mine` wrote beside it"
    ) in said
    assert "re-run" not in said
    r = run_vhmine("seed", "--db", "sqlite:///store.db", "--pairs", "runs/t/pairs.parquet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_seed_and_workers_add_name_the_next_commands_with_the_store(tmp_path, photos, monkeypatch):
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    pairs = write_pairs(tmp_path / "runs" / "demo", photos, n_pairs=4)

    def vhmine(*words):
        return subprocess.run([sys.executable, "-m", "vhmine.cli", *words], capture_output=True, text=True, timeout=300)

    r = vhmine("seed", "--pairs", str(pairs), "--per-mode", "1", "--db", "data/other.db")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-2].startswith("next: vhmine workers add NAME --db data/other.db   (prints NAME's sign-in token")
    assert lines[-1].startswith("then: vhmine curate --db data/other.db   (the app on http://127.0.0.1:8501")
    r = vhmine("workers", "add", "alice", "--db", "data/other.db")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("vhm_") and len(r.stdout.strip().splitlines()) == 1  # stdout: the token alone
    assert "next: vhmine curate --db data/other.db" in r.stderr
    # the default store needs no --db; with a worker, the next step is the app
    r = vhmine("seed", "--pairs", str(pairs), "--per-mode", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-2].startswith("next: vhmine workers add NAME   (")
    vhmine("workers", "add", "bob")
    r = vhmine("seed", "--pairs", str(pairs), "--per-mode", "2")
    assert r.stdout.strip().splitlines()[-1].startswith("next: vhmine curate   (the app on")
    assert "workers add" not in r.stdout


def test_seeding_hundreds_of_pairs_shows_a_bar(tmp_path, capfd):
    import numpy as np
    from PIL import Image

    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    rng = np.random.default_rng(0)
    photos = []
    for k in range(21):  # 210 pairs
        p = tmp_path / "photos" / f"p{k:02d}.png"
        p.parent.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(p)
        photos.append(p)
    pairs = write_pairs(tmp_path / "runs" / "many", photos)
    with open_store(tmp_path / "s.db") as store:
        res = seed_pairs(store, pairs, per_mode=100)
    assert res.pairs_added == 210
    assert "seed: checking images:   0%|          | 0/210 " in capfd.readouterr().err


def test_seeding_a_run_of_0_pairs_says_so_in_one_line_and_makes_no_store(tmp_path, photos, monkeypatch):
    import pandas as pd
    from typer.testing import CliRunner

    from vhmine.cli import app

    monkeypatch.chdir(tmp_path)
    pairs = write_pairs(tmp_path / "runs" / "empty", photos, n_pairs=2)
    pd.read_parquet(pairs).iloc[:0].to_parquet(pairs)  # as `vhmine mine` writes a run that found none
    for db in ([], ["--db", "sqlite:///other.db"]):
        r = CliRunner().invoke(app, ["seed", "--pairs", str(pairs), *db])
        assert r.exit_code == 2, r.output
        assert r.output.strip().splitlines() == [
            "error: runs/empty/pairs.parquet holds 0 pairs: nothing to seed (no store was written or changed); mine "
            "run empty again with looser thresholds (`vhmine status` suggests some)"
        ]
        assert "next:" not in r.output
    assert not list(tmp_path.rglob("*.db*"))  # neither the default store nor --db's
