"""Old-store fixtures, made with the code of each earlier schema revision: tests/fixtures/stores/store-<rev>.db.gz.

For each store schema revision this repository's history shipped (found on the first-parent history of HEAD, as
`git log -- vhmine/store/migrations/versions/` lists its changes), the last commit whose newest migration is that
revision is `git archive`d into a temporary folder, and tests/store/old_story.py (today's file, plain enough for
every era) runs there with that era's own code: a store created, annotated, flagged and fixed as that code did.
The store's file paths are then made relative (photos/<name>.png, runs/t/pairs.parquet: no machine's folders in a
committed file) and the file is written, vacuumed and gzipped (about 8 KiB), beside the others with a line in
MANIFEST.txt (revision, commit).

Reads the git history and runs old code (it needs what tests/helpers.py needed then: numpy, pandas, pyarrow,
scikit-image, Pillow, SQLAlchemy, Alembic); writes tests/fixtures/stores/. Usage:
    python scripts/make_store_fixtures.py [--only 0009 ...]
"""

from __future__ import annotations

import argparse
import gzip
import os
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "stores"
VERSIONS = ("vhmine/store/migrations/versions/", "vhmine/migrations/versions/")  # before and after the layout move

RUN = """
import sys
from pathlib import Path
sys.path[:0] = [".", "tests"]
from old_story import story
story(Path(sys.argv[1])).close()
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def eras() -> dict[str, str]:
    """revision -> the last first-parent commit of HEAD whose newest migration it is (not the working tree's)."""
    out: dict[str, str] = {}
    for commit in _git("rev-list", "--first-parent", "--reverse", "HEAD").split():
        names = _git("ls-tree", "--name-only", commit, *VERSIONS).split()
        revs = sorted(Path(n).name[:4] for n in names if Path(n).name[:4].isdigit())
        if revs:
            out[revs[-1]] = commit
    return out


def _relative_paths(db: Path) -> None:
    with sqlite3.connect(db) as c:
        for i, path in c.execute("SELECT id, path FROM images").fetchall():
            c.execute("UPDATE images SET path = ? WHERE id = ?", ("photos/" + Path(path).name, i))
        c.execute("UPDATE runs SET pairs_path = 'runs/t/pairs.parquet'")


def make(rev: str, commit: str) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"vhmine-{rev}-") as tmp:
        tree, work = Path(tmp, "tree"), Path(tmp, "work")
        archive = Path(tmp, "tree.tar")
        _git("archive", "--format=tar", "-o", str(archive), commit)
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        (tree / "tests" / "old_story.py").write_text((ROOT / "tests/store/old_story.py").read_text())
        env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
        done = subprocess.run(
            [sys.executable, "-c", RUN, str(work)], cwd=tree, env=env, capture_output=True, text=True, timeout=600
        )
        if done.returncode:
            raise SystemExit(f"the story failed at {rev} ({commit[:10]}):\n{done.stderr[-3000:]}")
        _relative_paths(work / "store.db")
        OUT.mkdir(parents=True, exist_ok=True)
        flat = Path(tmp, "flat.db")
        with sqlite3.connect(work / "store.db") as c:
            c.execute("VACUUM INTO ?", (str(flat),))
        dest = OUT / f"store-{rev}.db.gz"
        with gzip.GzipFile(dest, "wb", compresslevel=9, mtime=0) as z:  # the same bytes give the same file
            z.write(flat.read_bytes())
        return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="revisions to make (default: every one from 0002)")
    args = ap.parse_args()
    newest = max(f.name[:4] for f in (ROOT / VERSIONS[0]).glob("[0-9]*.py"))
    found = {r: c for r, c in eras().items() if "0002" <= r < newest}  # the working tree's own head: made at test time
    lines = {}
    manifest = OUT / "MANIFEST.txt"
    if manifest.exists():
        lines = {ln.split()[0]: ln for ln in manifest.read_text().splitlines() if ln.strip()}
    for rev, commit in sorted(found.items()):
        if args.only and rev not in args.only:
            continue
        dest = make(rev, commit)
        lines[rev] = f"{rev} {commit}"
        print(f"{rev}: {dest.relative_to(ROOT)} ({dest.stat().st_size // 1024} KiB) from {commit[:10]}")
    manifest.write_text("".join(lines[r] + "\n" for r in sorted(lines)))


if __name__ == "__main__":
    main()
