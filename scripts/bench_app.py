"""How long a worker waits in `vhmine curate`: a scripted worker's session in a real browser, per action kind.

For each store size (--tasks, default 100 and 10,000) it builds a store once (realistically sized JPEG photos,
640 x 480, a pairs table as `vhmine mine` writes it, `vhmine.seed`; some of it already annotated, confirmed and
reviewed by two other workers, so that the admin overview has tables to read), kept under --cache and copied
for each run. Then it starts the real server (`vhmine curate` on a free loopback port, its own process group)
and drives it with Debian's chromium through the playwright package (1280 x 800; `playwright install` is never
run): per pass, a page load, a sign-in, and items annotated as a worker does (the template's slots and each
image's answer typed and committed with Tab, Save, Confirm of the drafted yes/no questions), Skips, mode
switches in the sidebar and the admin overview.

An action's time runs from its input event (the click's pointerdown, the Tab's keydown; navigation start for a
page load) to the moment the next item is shown and usable: the script idle, no element stale, every image
loaded, and what the action leads to on the page (the next item's id, the drafts' Confirm button, the header of
the new mode, the Tab's rerun), settled (no rerun follows within --settle-ms). Also counted per action: the
script runs the server started (its `new_session` messages on the websocket) and the server's CPU time.

Baselines, in the same run: the library calls each action needs (vhmine.curate, in this process, on a copy of
the same store: what the store itself costs), and with --baseline PATH another checkout's app (main's worktree),
each of its passes right before this tree's, on the same store, so both see the same load. Prints p50 / p95 / max
per action kind, the reruns, the server CPU, the ratio of the app's p95 to the library's (and to the baseline
tree's), the load (os.getloadavg) before and after, a scripted worker's seconds of waiting per ready instance,
and last: `app p95 at 10000 tasks: save A ms, skip B ms, switch C ms`. Every figure here, its ratios included
(the app's p95 over the library's, over the baseline tree's), is wall time by nature: a page's response time as
the worker in the browser waits for it (the server's CPU time is printed for information).

    python scripts/bench_app.py --tasks 100 10000 --passes 3 --baseline ../main
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import app_session  # noqa: E402  (the scripted worker in the browser)

CHROMIUM = os.environ.get("VHMINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
BUILD = 3  # bump when the stores' shape changes: cached stores of another build are rebuilt
KINDS = ("page load", "sign in", "field edit", "save", "confirm", "skip", "mode switch", "admin overview")


# --- the stores --------------------------------------------------------------------------------------------


def write_photos(folder: Path, n: int) -> list[Path]:
    """`n` distinct 640 x 480 JPEG photos (scikit-image samples, each tinted and shifted its own way)."""
    import numpy as np
    import skimage.data
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    names = ("astronaut", "coffee", "chelsea", "rocket", "camera", "coins", "moon", "page", "clock", "horse")
    bases = [Image.fromarray(np.asarray(getattr(skimage.data, m)())).convert("RGB").resize((640, 480)) for m in names]
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        arr = np.asarray(bases[i % len(bases)], dtype=np.int16)
        arr = np.roll(arr, int(rng.integers(0, 640)), axis=1) + rng.integers(-40, 40, size=3)
        p = folder / f"photo{i:04d}.jpg"
        Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(p, quality=85)
        out.append(p)
    return out


def write_pairs(run_dir: Path, photos: list[Path], n_pairs: int) -> Path:
    """runs/<run>/pairs.parquet and run.json over the first `n_pairs` pairs of `photos` (a made-up ranking)."""
    import hashlib
    import itertools
    import json

    import pandas as pd

    sha = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in photos}
    rows = []
    for n, (a, b) in enumerate(itertools.islice(itertools.combinations(photos, 2), n_pairs)):
        rows.append(
            {
                "rank": n + 1,
                "image_id_a": sha[a][:16],
                "image_id_b": sha[b][:16],
                "sha256_a": sha[a],
                "sha256_b": sha[b],
                "path_a": str(a),
                "path_b": str(b),
                "clip_sim": 0.95,
                "dino_sim": 0.3,
                "gap": 0.65,
                "categories_a": [],
                "categories_b": [],
            }
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(run_dir / "pairs.parquet")
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "index": "photos",
                "clip_threshold": 0.9,
                "dino_threshold": 0.55,
                "encoders": {"clip": "tiny", "dino": "tiny"},
            }
        )
    )
    return run_dir / "pairs.parquet"


def prefill(store, done_share: float) -> None:
    """`done_share` of each mode's tasks annotated by w1 (its drafts confirmed), a third of those reviewed by w2,
    who disagrees on one in five: an action log, ready items, agreement and disagreement tables to read."""
    from vhmine import curate as C

    for mode in app_session.MODES:
        n = round(done_share * sum(p.total for p in C.progress(store) if p.mode == mode))
        for k in range(n):
            item = C.next_item(store, "w1", mode)
            if item is None:
                break
            C.save_annotation(store, "w1", item.task_id, app_session.library_annotation(item, k))
            C.confirm_drafts(
                store,
                "w1",
                [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "w1")],
            )
        for k, inst in enumerate(C.ready_instances(store, mode, locate=False)[::3][:n]):
            right = inst.answers[0] if inst.kind == "OEQ" else ("yes" if inst.truth else "no")
            C.work.save_review(
                store, "w2", inst.id, right if k % 5 else {"yes": "no", "no": "yes"}.get(right, "purple")
            )


def build_store(cache: Path, tasks: int, done_share: float) -> Path:
    """The cached store of `tasks` tasks (built once per BUILD): its SQLite file."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    folder = cache / f"store-{tasks}-b{BUILD}"
    db = folder / "curate.db"
    if (folder / "READY").is_file():
        return db
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    n_images = 2
    while n_images * (n_images - 1) // 2 < tasks:
        n_images += 1
    pairs = write_pairs(folder / "runs" / "bench", write_photos(folder / "photos", n_images), tasks)
    with open_store(f"sqlite:///{db}") as store:
        seed_pairs(store, pairs, per_mode=tasks // len(app_session.MODES))
        for name in ("w1", "w2"):
            C.add_worker(store, name)
        prefill(store, done_share)
    (folder / "READY").write_text("")
    print(f"built the {tasks}-task store in {time.perf_counter() - t0:.0f} s", flush=True)
    return db


# --- the server --------------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(db: Path, log_path: Path, env: dict, tree: Path | None = None):
    """(url, pid of the Streamlit process) of `vhmine curate` of the checkout `tree` (run from it: `python -m` puts
    the working folder first on the path) on the store `db` until the block ends."""
    import psutil

    port = free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vhmine.cli",
            "curate",
            "--db",
            f"sqlite:///{db}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=dict(os.environ, **env),
        cwd=tree,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the app did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)
        kids = psutil.Process(proc.pid).children(recursive=True)
        yield url, (kids[0].pid if kids else proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # our own process group: vhmine and its streamlit child
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@contextlib.contextmanager
def profiled(pid: int, folder: Path | None, tasks: int, n: int, label: str):
    """py-spy's samples of the server (collapsed stacks, --profile FOLDER) while the block runs."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"server-{tasks}-pass{n + 1}-{label.replace(' ', '-')}.txt"
    spy = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples when interrupted
        spy.wait(timeout=60)


# --- the report --------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank): with few samples, p95 is the largest but one or the largest."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


def report(tasks: int, label: str, samples: list[app_session.Sample], floor: dict[str, list[float]]) -> dict:
    print(f"\n{tasks} tasks, {label}: ms from the action to the next item shown and usable")
    print(
        f"{'action':<15}{'n':>4}{'p50':>8}{'p95':>8}{'max':>8}{'reruns':>8}{'cpu p50':>9}{'served p50':>12}"
        f"{'library p95':>13}{'app/library':>13}"
    )
    p95s = {}
    for kind in KINDS:
        got = [s for s in samples if s.kind == kind]
        if not got:
            continue
        ms = [s.ms for s in got]
        p95s[kind] = pct(ms, 95)
        lib = floor.get(kind)
        lib95 = pct(lib, 95) if lib else None
        ratio = f"{lib95:>13.1f}{p95s[kind] / max(lib95, 0.1):>12.0f}x" if lib95 is not None else f"{'-':>13}{'-':>13}"
        print(
            f"{kind:<15}{len(ms):>4}{pct(ms, 50):>8.0f}{p95s[kind]:>8.0f}{max(ms):>8.0f}"
            f"{statistics.median(s.reruns for s in got):>8.0f}{statistics.median(s.cpu_ms for s in got):>9.0f}"
            f"{statistics.median(s.served_ms for s in got):>12.0f}" + ratio
        )
    return p95s


def compare(tasks: int, base: dict, this: dict) -> None:
    print(f"\n{tasks} tasks: p95 of this tree against the baseline tree (same run, passes interleaved)")
    for kind in KINDS:
        if kind in base and kind in this:
            faster = base[kind] / max(this[kind], 1)
            print(f"{kind:<15}{base[kind]:>8.0f} ->{this[kind]:>6.0f} ms  ({faster:.1f}x faster)")


def tree_commit(path: Path) -> str:
    got = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return (got.stdout.strip() or "?") + ("+changes" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[100, 10_000])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--items", type=int, default=8, help="items annotated per pass")
    ap.add_argument("--done-share", type=float, default=0.1, help="share of each mode annotated before the session")
    ap.add_argument("--settle-ms", type=int, default=400)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vhmine-bench-app")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of vhmine (e.g. main's worktree): its app is "
        "driven too, each pass right before this tree's, and compared",
    )
    ap.add_argument("--samples", type=Path, help="write every timed action here (JSON lines), for a closer look")
    ap.add_argument("--profile", type=Path, help="record the server with py-spy into this folder (collapsed stacks)")
    ap.add_argument(
        "--env",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment of the server, e.g. STREAMLIT_RUNNER_POST_SCRIPT_GC=false",
    )
    args = ap.parse_args()
    if not os.path.exists(CHROMIUM):
        print(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)", file=sys.stderr)
        return 2
    os.environ["HF_HUB_OFFLINE"] = "1"
    env = dict(kv.split("=", 1) for kv in args.env)
    here = Path(__file__).resolve().parents[1]
    trees = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [("this tree", here)]
    print(
        f"bench_app: load before {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores); "
        + "; ".join(f"{label} {path} at {tree_commit(path)}" for label, path in trees)
        + f"; server env {env or '(default)'}",
        flush=True,
    )
    p95_by_size: dict[int, dict] = {}
    for tasks in args.tasks:
        db = build_store(args.cache, tasks, args.done_share)
        with tempfile.TemporaryDirectory(prefix="bench-app-") as tmp:
            tmp = Path(tmp)
            floor = app_session.library_floor(db, tmp / "floor.db", args.items)
            samples: dict[str, list] = {label: [] for label, _ in trees}
            per_instance: dict[str, list] = {label: [] for label, _ in trees}
            for n in range(args.passes):
                for label, path in trees:
                    run_db = tmp / f"run{n}.db"
                    shutil.copy(db, run_db)
                    token = app_session.add_bench_worker(run_db)
                    server_env = dict(env, PYTHONPATH=str(path))
                    with (
                        serve(run_db, tmp / f"server{n}.log", server_env, path) as (url, pid),
                        profiled(pid, args.profile, tasks, n, label),
                    ):
                        got, secs = app_session.session(url, token, pid, CHROMIUM, args.items, args.settle_ms, run_db)
                    samples[label] += got
                    if args.samples:
                        with open(args.samples, "a") as out:
                            for k, smp in enumerate(got):
                                out.write(
                                    json.dumps(
                                        {
                                            "tasks": tasks,
                                            "tree": label,
                                            "pass": n + 1,
                                            "step": k,
                                            **dataclasses.asdict(smp),
                                        }
                                    )
                                    + "\n"
                                )
                    per_instance[label].append(secs)
                    print(
                        f"  pass {n + 1}, {label}: {len(got)} actions, {secs:.2f} s per ready instance; load "
                        f"{os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
        for label, _ in trees:
            p95_by_size.setdefault(tasks, {})[label] = report(tasks, label, samples[label], floor)
            print(
                f"scripted worker ({label}): {statistics.median(per_instance[label]):.2f} s of waiting per ready "
                f"instance (median of {len(per_instance[label])} passes; the script types at once)"
            )
        if args.baseline:
            compare(tasks, p95_by_size[tasks]["baseline"], p95_by_size[tasks]["this tree"])
    print(f"\nload after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    big = max(p95_by_size)
    p = p95_by_size[big]["this tree"]
    nan = float("nan")
    print(
        f"app p95 at {big} tasks: save {p.get('save', nan):.0f} ms, skip {p.get('skip', nan):.0f} ms, "
        f"switch {p.get('mode switch', nan):.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
