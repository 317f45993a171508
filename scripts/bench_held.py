"""Held tasks under load (issue 42): the next item with ~10,000 tasks queued and their image folder moved away,
while a worker in another process saves. `bench_store.py --held N` runs it and prints its line.

Seeds a fresh store (a SQLite file or a PostgreSQL database) with N tasks in one mode ("counting") over the fewest
images that give that many pairs (142 for 10,000), and 20 tasks of another mode ("color") over images of their
own; one worker takes a "counting" item and skips it (the process warmed up, its images checked once); the
counting folder is moved away. Then, while a spawned process takes, saves and undoes "color" items (a write every
PACE_S at most), it times that worker's leases in "counting" until every task is held, then, the folder back,
until every one is back. Reads and writes only the throw-away store and folders it makes. Its figures are wall
time by nature: how long a worker waits for the next item (the bound, BOUND_S), with a writer beside it.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import shutil
import time
from pathlib import Path

BOUND_S = 1.0  # the next item, however many tasks the moved folder holds (issue 42)
MODE, OTHER = "counting", "color"
PACE_S = 0.02  # the saver's pause between writes: 50 a second at most (at full speed it starves any other writer of
# SQLite's lock, whose waiters poll every 100 ms at last: a lease then waits seconds for its turn, whatever it does)


def saver_main(url: str, token: str, ready, stop, results) -> None:
    """Runs in a spawned process: save and undo `OTHER` items until `stop`; puts (ok, refused, errors, longest
    write in s, writes while the first lease ran) on `results`."""
    from bench_store import make_annotation

    from vhmine import curate as C
    from vhmine.errors import InputError, LeaseError
    from vhmine.store import open_store

    ok, refused, errors, longest = 0, 0, [], 0.0
    try:
        store = open_store(url)
        name = C.sign_in(store, token).name
        rng = random.Random(0)
        first = True  # the first write (imports, statements compiled) before the race, not in it
        while first or not stop.is_set():
            t0 = time.monotonic()
            try:
                item = C.next_item(store, name, OTHER)
                if item is None:
                    C.undo_last(store, name)  # the queue is empty: take one back
                else:
                    C.save_annotation(store, name, item.task_id, make_annotation(item, rng))
                ok += 1
            except (LeaseError, InputError):
                pass  # the library's conflicts: not the store refusing
            except Exception as err:  # "database is locked": what issue 42 saw
                refused += 1
                if len(errors) < 3:
                    errors.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
            if first:
                ok, first = 0, False
                ready.set()
            else:
                longest = max(longest, time.monotonic() - t0)
            time.sleep(PACE_S)
        store.close()
    except Exception as err:
        errors.append(f"saver died: {type(err).__name__}: {err}")
        ready.set()
    results.put((ok, refused, errors, longest))


def run_held(url: str, folder: Path, n_tasks: int) -> dict:
    """Seed, move the folder, time the leases while the saver saves; the figures as a dict."""
    from bench_store import write_pairs

    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    held_pairs = write_pairs(folder / "held", n_tasks, seed=1, run="held")
    kept_pairs = write_pairs(folder / "kept", 20, seed=2, run="kept")
    store = open_store(url)
    seed_pairs(store, held_pairs, per_mode=n_tasks, modes=[MODE])
    seed_pairs(store, kept_pairs, per_mode=20, modes=[OTHER])
    C.add_worker(store, "w000")
    saver = C.add_worker(store, "w001")
    images = folder / "held" / "images"
    first = C.next_item(store, "w000", MODE)  # warm: imports, statements, the image checks' cache
    C.skip(store, "w000", first.task_id)
    ctx = mp.get_context("spawn")
    ready, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=saver_main, args=(url, saver, ready, stop, results), daemon=True)
    proc.start()
    out: dict = {"tasks": n_tasks}
    try:
        ready.wait(300)
        time.sleep(0.3)  # the saver is saving
        images.rename(folder / "held" / "moved")
        out["moved"] = _leases(store, lambda held: held < n_tasks)
        (folder / "held" / "moved").rename(images)
        out["back"] = _leases(store, lambda held: held > 0)
        time.sleep(0.2)
    finally:
        stop.set()
        try:
            out["ok"], out["refused"], out["errors"], out["longest"] = results.get(timeout=120)
        finally:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
            store.close()
            shutil.rmtree(folder / "held", ignore_errors=True)
            shutil.rmtree(folder / "kept", ignore_errors=True)
    return out


def _leases(store, until, most: int = 100) -> list[tuple[float, int, bool]]:
    """Leases in MODE, one after the other, while `until(held tasks)`: (seconds, tasks held after it, whether it
    handed out an item) each, the first one always."""
    from vhmine import curate as C

    out = []
    while not out or (until(out[-1][1]) and len(out) < most):
        time.sleep(PACE_S * 5)  # a worker reads the item before asking for the next: the other writer's turn
        t0 = time.monotonic()
        item = C.next_item(store, "w000", MODE)
        took = time.monotonic() - t0
        out.append((took, next(p.held for p in C.progress(store) if p.mode == MODE), item is not None))
    return out


def held_line(backend: str, r: dict) -> tuple[str, bool]:
    """The benchmark's line, and whether it passed: every lease within BOUND_S with nothing refused, every task held
    with the folder moved (after a few leases) and back with it."""
    moved, back, n = r["moved"], r["back"], r["tasks"]
    slowest = max(t for t, _, _ in moved + back)
    passed = slowest <= BOUND_S and r["refused"] == 0 and moved[-1][1] == n and back[-1][1] == 0 and back[0][2]
    line = (
        f"held tasks ({backend}): next item in {moved[0][0]:.2f} s with {n} tasks and the folder moved (bound "
        f"{BOUND_S:g} s; it held {moved[0][1]}, {len(moved) - 1} more leases the rest), with the folder back "
        f"{back[0][0]:.2f} s ({n - back[0][1]} back, all after {len(back) - 1} more); slowest lease {slowest:.2f} s; "
        f"other process's saves: {r['ok']} ok, {r['refused']} refused (longest {r['longest']:.2f} s)  "
        f"{'PASS' if passed else 'FAIL'}"
    )
    return line + "".join(f"\n    {e}" for e in r["errors"]), passed
