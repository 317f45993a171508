"""Load figure for the curation store: N worker processes take, annotate, skip, undo and discard at full speed.

For each backend (a SQLite file, a PostgreSQL database) and each worker count it seeds a fresh store
with about --tasks tasks (tiny PNGs written to a temporary folder, a pairs table as `vhmine mine`
writes it, `vhmine.seed`), registers the workers, and starts them as spawned processes through the
public curation library only (`vhmine.curate`: sign_in, next_item, save_annotation, skip, undo_last,
discard). Each worker loops for --seconds or until the queue is empty: take an item, then annotate it
(~70%), skip it (~15%), undo its own last action (~10%) or discard it (~5%), and keeps its own log of
what succeeded. Then the store itself is checked:

- no double annotation: no task has two live annotations (or an annotation and a discard), and the
  live instances of a task come from one action;
- no action lost: each worker's action log in the store is exactly what it saw succeed (kind, item,
  undone or not, the instances saved), in order;
- one state: every task is open, done or discarded, and its actions, instances and lease agree;
- one holder: no worker is refused an item as "leased to" someone else while its own lease runs;
- no errors: no worker hit anything but the library's LeaseError (a conflict) or "nothing to undo".

It prints actions per second, lease conflicts and PASS/FAIL per check, and exits 1 on any FAIL. Actions per
second are by wall time by nature (N processes contending for one store's locks: the waits are what is measured),
and no ratio is printed.
Without --pg-url it runs a throw-away PostgreSQL server (scripts/throwaway_pg.py) and removes it at
the end, Ctrl-C included; with --pg-url it creates (and drops) one database per run on that server.
Leases are short by default (--lease-s 1) so that they run out while workers act and others take over.

    python scripts/bench_store.py --workers 8 32 --backends sqlite postgresql --seconds 10
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import queue as queue_mod
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throwaway_pg import ThrowawayPostgres, database_on  # noqa: E402

CHECKS = ("no double annotation", "no action lost", "one state", "one holder", "no errors")
WORDS = ("dog", "cat", "cup", "car", "tree", "lamp", "boat", "bird", "clock", "chair")


# --- what a worker submits -----------------------------------------------------------------------


def make_annotation(item, rng: random.Random):
    """A valid annotation for any mode: an OEQ (half the time, where the mode has one) or a YNQ."""
    from vhmine import curate as C
    from vhmine.rules import modes as M

    mode = M.get_mode(item.mode)
    ids = [v.id for v in item.images]
    a, b = rng.sample(WORDS, 2)
    slots_of = lambda tpl: {s: {"a": a, "b": b}.get(s, rng.choice(WORDS)) for s in tpl.slots}  # noqa: E731
    if rng.random() < 0.5 and mode.templates_of(M.OEQ):
        tpl = rng.choice(mode.templates_of(M.OEQ))
        slots = slots_of(tpl)
        if tpl.derive == "pick":
            answers = {i: rng.choice((a, b)) for i in ids}
        elif mode.numeric:
            answers = {i: str(rng.randint(0, 9)) for i in ids}
        else:
            answers = {i: rng.choice(mode.alternatives or WORDS) for i in ids}
        return C.Annotation(tpl.id, slots, answers=answers)
    tpl = rng.choice(mode.templates_of(M.YNQ))
    return C.Annotation(tpl.id, slots_of(tpl), truths={i: rng.random() < 0.5 for i in ids})


# --- one worker process --------------------------------------------------------------------------


def worker_main(
    url: str, token: str, seconds: float, lease_s: float, seed: int, modes: list[str], ready, go, results
) -> None:
    """Runs in a spawned process; puts one dict (counts and its log of successful actions) on `results`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends us
    out = {
        "worker": None,
        "counts": {},
        "conflicts": {},
        "errors": [],
        "log": [],
        "undo_mismatch": [],
        "conflict_samples": [],
        "two_holders": [],
    }
    try:
        from vhmine import curate as C
        from vhmine.errors import InputError, LeaseError
        from vhmine.store import open_store, utcnow

        store = open_store(url)
        name = out["worker"] = C.sign_in(store, token).name
        rng = random.Random(seed)
        counts, conflicts, log = out["counts"], out["conflicts"], out["log"]
        ready.put(name)
        out["ready"] = True
        go.wait()
        out["start"] = time.time()
        deadline = time.monotonic() + seconds
        pending: list[str] = []  # modes where we may hold a lease (an item taken back by undo)

        def failed(kind: str, err: Exception) -> None:  # an error the library let through: a finding, not a crash
            out["errors"].append(f"{kind}: {type(err).__name__}: {str(err).splitlines()[0][:200]}")

        while time.monotonic() < deadline:
            item, empty = None, set()
            for mode in pending + rng.sample(modes, len(modes)):  # our own leases first, then any mode
                try:
                    item = C.next_item(store, name, mode, lease_s=lease_s)
                except Exception as err:
                    failed("take", err)
                    continue
                if item is not None:
                    break
                empty.add(mode)
            pending.clear()
            if len(empty) == len(modes):
                break  # every queue is empty for us
            if item is None:
                continue
            counts["take"] = counts.get("take", 0) + 1
            r = rng.random()
            kind = "annotate" if r < 0.70 else "skip" if r < 0.85 else "undo" if r < 0.95 else "discard"
            if kind == "undo":
                pending.append(item.mode)  # after the undo, go on with the item we hold
            try:
                if kind == "annotate":
                    saved = C.save_annotation(store, name, item.task_id, make_annotation(item, rng))
                    log.append(["annotate", item.task_id, False, sorted(saved.instance_ids + saved.draft_ids)])
                elif kind == "skip":
                    C.skip(store, name, item.task_id)
                    log.append(["skip", item.task_id, False, []])
                elif kind == "discard":
                    C.discard(store, name, item.task_id, "no unambiguous question fits")
                    log.append(["discard", item.task_id, False, []])
                else:
                    what = C.undo_last(store, name, lease_s=lease_s)
                    live = [e for e in log if not e[2]]
                    if not live or not undid(what, live[-1][0], live[-1][1]):
                        out["undo_mismatch"].append(f"undid {what!r}, expected {live[-1][:2] if live else 'nothing'}")
                    if live:
                        live[-1][2] = True
                        pending.insert(0, live[-1][1].split(":", 1)[0])
                counts[kind] = counts.get(kind, 0) + 1
            except LeaseError as err:
                conflicts[kind] = conflicts.get(kind, 0) + 1
                if " is leased to " in str(err) and utcnow() < item.lease_until:  # our lease still runs: two holders
                    out["two_holders"].append([item.task_id, f"{kind} refused while our lease ran: {err}"])
                if len(out["conflict_samples"]) < 2:
                    out["conflict_samples"].append(f"{name} {kind}: {err}")
            except InputError as err:
                if kind == "undo" and str(err).startswith("nothing to undo") and not any(not e[2] for e in log):
                    counts["undo nothing"] = counts.get("undo nothing", 0) + 1
                else:
                    failed(kind, err)
            except Exception as err:
                failed(kind, err)
        out["end"] = time.time()
        store.close()
    except Exception:
        out["errors"].append("worker died: " + traceback.format_exc()[-600:])
        if not out.get("ready"):
            ready.put(out["worker"] or "?")  # never leave the parent waiting for us
    results.put(out)


def undid(what: str, kind: str, task_id: str) -> bool:
    """Whether undo_last's answer `what` names the undo of our `kind` action on `task_id`. An undone
    skip whose item someone else took meanwhile says where the item is: "... (the item is leased to
    w003, so it stays there)"; the skip is undone all the same."""
    name = {"annotate": "annotation", "discard": "discard", "skip": "skip"}[kind]
    return what.split(" (the item is ")[0] == f"{name} of item {task_id}"


# --- seeding -------------------------------------------------------------------------------------


def write_pairs(folder: Path, n_pairs: int, *, seed: int = 0, run: str = "bench") -> Path:
    """runs/<run>/pairs.parquet over `n_pairs` pairs of tiny distinct PNGs (a made-up ranking); another `seed`
    draws other images."""
    import hashlib

    import numpy as np
    import pandas as pd
    from PIL import Image

    k = math.ceil((1 + math.sqrt(1 + 8 * n_pairs)) / 2)  # k images give k(k-1)/2 pairs
    rng = np.random.default_rng(seed)
    imgs = []
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for i in range(k):
        p = folder / "images" / f"img{i:04d}.png"
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(p)
        imgs.append((p, hashlib.sha256(p.read_bytes()).hexdigest()))
    rows = []
    for n, (i, j) in enumerate((a, b) for a in range(k) for b in range(a + 1, k)):
        if n == n_pairs:
            break
        (pa, sa), (pb, sb) = imgs[i], imgs[j]
        rows.append(
            {
                "rank": n + 1,
                "image_id_a": sa[:16],
                "image_id_b": sb[:16],
                "sha256_a": sa,
                "sha256_b": sb,
                "path_a": str(pa),
                "path_b": str(pb),
                "clip_sim": 0.95,
                "dino_sim": 0.3,
                "gap": 0.65,
                "categories_a": [],
                "categories_b": [],
            }
        )
    out = folder / "runs" / run / "pairs.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(out)
    return out


def seed(url: str, pairs: Path, per_mode: int, n_workers: int):
    """A fresh store with `per_mode` tasks in each of the eight modes and workers w000...; (store, tokens)."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(url)
    seed_pairs(store, pairs, per_mode=per_mode)
    tokens = [C.add_worker(store, f"w{i:03d}") for i in range(n_workers)]
    return store, tokens


# --- checking the store --------------------------------------------------------------------------


def check(store, results: list[dict]) -> dict[str, list[str]]:
    """Each check's problems (an empty list is a PASS), read from the store itself."""
    from sqlalchemy import select

    from vhmine.store import TASK_STATUSES, Action, Instance, Task

    bad: dict[str, list[str]] = {c: [] for c in CHECKS}
    with store.session(write=False) as s:
        tasks = {t.id: t for t in s.scalars(select(Task))}
        actions = list(s.scalars(select(Action).order_by(Action.id)))
        instances = list(s.scalars(select(Instance)))
    closing: dict[str, list] = {}  # task -> its live annotate / discard actions
    for a in actions:
        if a.kind in ("annotate", "discard") and a.undone_at is None:
            closing.setdefault(a.task_id, []).append(a)
    live_inst: dict[str, set] = {}  # task -> action ids of its instances that are not discarded
    for i in instances:
        if i.status != "discarded":
            live_inst.setdefault(i.task_id, set()).add(i.action_id)

    for tid, acts in closing.items():
        if len(acts) > 1:
            bad["no double annotation"].append(
                f"{tid}: {len(acts)} live closing actions "
                + ", ".join(f"{a.kind} by {a.worker} (#{a.id})" for a in acts)
            )
    for tid, act_ids in live_inst.items():
        if len(act_ids) > 1:
            bad["no double annotation"].append(
                f"{tid}: live instances from {len(act_ids)} annotations {sorted(act_ids)}"
            )

    by_id = {i.id: i for i in instances}
    for r in results:
        mine = [a for a in actions if a.worker == r["worker"]]
        got = [[a.kind, a.task_id, a.undone_at is not None] for a in mine]
        want = [e[:3] for e in r["log"]]
        if got != want:
            first = next((k for k, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
            bad["no action lost"].append(
                f"{r['worker']}: store has {len(got)} actions, worker saw {len(want)} succeed; "
                f"first difference at #{first}: store {got[first : first + 1]}, worker {want[first : first + 1]}"
            )
        for a, e in zip(mine, r["log"]):
            if e[0] == "annotate":
                ids = e[3]
                if sorted((a.payload or {}).get("instances", [])) != ids or any(i not in by_id for i in ids):
                    bad["no action lost"].append(f"{r['worker']}: instances of {e[1]} missing from the store")
                elif any((by_id[i].status == "discarded") != e[2] for i in ids):
                    bad["no action lost"].append(
                        f"{r['worker']}: instances of {e[1]} in the wrong status (undone: {e[2]})"
                    )
        bad["no action lost"] += [f"{r['worker']}: {m}" for m in r["undo_mismatch"]]

    for tid, t in tasks.items():
        acts, inst = closing.get(tid, []), live_inst.get(tid, set())
        if t.status not in TASK_STATUSES:
            problem = f"status {t.status!r}"
        elif t.status == "open":
            problem = (
                f"open but has live {acts[0].kind} by {acts[0].worker}"
                if acts
                else "open but has live instances"
                if inst
                else "open with done_by set"
                if t.done_by
                else None
            )
        else:
            kind = "annotate" if t.status == "done" else "discard"
            if [a.kind for a in acts] != [kind]:
                problem = f"{t.status} but its live closing actions are {[a.kind for a in acts]}"
            elif acts[0].worker != t.done_by:
                problem = f"{t.status} by {t.done_by} but the {kind} was by {acts[0].worker}"
            elif t.lease_worker is not None:
                problem = f"{t.status} and still leased to {t.lease_worker}"
            elif t.status == "done" and inst != {acts[0].id}:
                problem = f"done but its live instances come from actions {sorted(inst)}, not #{acts[0].id}"
            elif t.status == "discarded" and inst:
                problem = "discarded but has live instances"
            else:
                problem = None
        if problem:
            bad["one state"].append(f"{tid}: {problem} (its actions: {_history(actions, tid)})")
    bad["one holder"] = [
        f"{r['worker']}: {m} (its actions: {_history(actions, tid)})"
        for r in results
        for tid, m in r.get("two_holders", [])
    ]
    seen: dict[str, list[str]] = {}  # error -> the workers that hit it
    for r in results:
        for e in r["errors"]:
            seen.setdefault(e, []).append(r["worker"])
    bad["no errors"] = [f"{len(ws)} x {e} ({', '.join(sorted(set(ws)))})" for e, ws in seen.items()]
    return bad


def _history(actions, task_id: str) -> str:
    return (
        "; ".join(
            f"#{a.id} {a.kind} by {a.worker}{' (undone)' if a.undone_at else ''}"
            for a in actions
            if a.task_id == task_id
        )
        or "none"
    )


# --- one run, and the table ----------------------------------------------------------------------


def run_once(url: str, pairs: Path, per_mode: int, n_workers: int, args) -> dict:
    store, tokens = seed(url, pairs, per_mode, n_workers)
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    from vhmine.rules import modes as M

    procs = [
        ctx.Process(
            target=worker_main,
            args=(url, tok, args.seconds, args.lease_s, args.seed * 1000 + i, list(M.mode_names()), ready, go, results),
            daemon=True,
        )
        for i, tok in enumerate(tokens)
    ]
    try:
        for p in procs:
            p.start()
        for _ in procs:  # every worker imported vhmine and signed in: start them together
            ready.get(timeout=600)
        go.set()
        out = []
        deadline = time.monotonic() + args.seconds + 300
        while len(out) < n_workers:
            try:
                out.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
            except queue_mod.Empty:
                raise SystemExit(
                    f"{n_workers - len(out)} worker(s) did not finish within {args.seconds + 300:.0f} s"
                ) from None
        for p in procs:
            p.join(timeout=30)
        problems = check(store, out)
        states = _states(store)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)
        store.close()
    elapsed = max(r.get("end", 0) for r in out) - min(r.get("start", float("inf")) for r in out)
    counts = {k: sum(r["counts"].get(k, 0) for r in out) for k in ("take", "annotate", "skip", "undo", "discard")}
    conflicts = {
        k: sum(r["conflicts"].get(k, 0) for r in out) for k in sorted({k for r in out for k in r["conflicts"]})
    }
    return {
        "workers": n_workers,
        "elapsed": elapsed,
        "counts": counts,
        "actions": sum(counts.values()),
        "conflicts": sum(conflicts.values()),
        "conflicts_by_kind": conflicts,
        "states": states,
        "problems": problems,
        "conflict_samples": [m for r in out for m in r["conflict_samples"]][:3],
    }


def _states(store) -> dict[str, int]:
    from sqlalchemy import func, select

    from vhmine.store import Task

    with store.session(write=False) as s:
        return dict(s.execute(select(Task.status, func.count()).group_by(Task.status)).all())


def print_row(backend: str, r: dict) -> None:
    c, st = r["counts"], r["states"]
    verdicts = "  ".join(f"{'PASS' if not r['problems'][k] else 'FAIL'}" for k in CHECKS)
    print(
        f"{backend:<10} {r['workers']:>7} {r['elapsed']:>6.1f} {c['take']:>6} {c['annotate']:>6} {c['skip']:>5} "
        f"{c['undo']:>5} {c['discard']:>5} {r['actions'] / r['elapsed']:>9.1f} {r['conflicts']:>9} "
        f"{st.get('done', 0):>5}/{st.get('discarded', 0)}/{st.get('open', 0):<5}  {verdicts}",
        flush=True,
    )
    if r["conflicts"]:
        print(
            "    conflicts: "
            + ", ".join(f"{k} {n}" for k, n in r["conflicts_by_kind"].items())
            + "".join(f"\n      e.g. {m}" for m in r["conflict_samples"])
        )
    for k in CHECKS:
        for line in r["problems"][k][:10]:
            print(f"    FAIL {k}: {line}")
        if len(r["problems"][k]) > 10:
            print(f"    FAIL {k}: ... and {len(r['problems'][k]) - 10} more")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--workers", type=int, nargs="+", default=[8, 32], help="worker process counts to run (default 8 32)"
    )
    ap.add_argument("--backends", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"])
    ap.add_argument("--seconds", type=float, default=10.0, help="how long each run lasts at most (default 10)")
    ap.add_argument("--tasks", type=int, default=2000, help="tasks to seed, spread over the eight modes (default 2000)")
    ap.add_argument(
        "--lease-s", type=float, default=1.0, help="lease length; short so leases run out mid-action (default 1)"
    )
    ap.add_argument(
        "--pg-url",
        help="a PostgreSQL server to use (a database per run is created and dropped); "
        "default: a throw-away server started here",
    )
    ap.add_argument("--seed", type=int, default=0, help="random seed of the workers' choices")
    ap.add_argument(
        "--held",
        type=int,
        metavar="N",
        help="instead: the next item with N tasks of one mode whose image folder was moved away, while another "
        "process saves (scripts/bench_held.py; issue 42 used 10000)",
    )
    args = ap.parse_args()
    per_mode = max(1, math.ceil(args.tasks / 8))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))  # run the clean-up below on kill too
    tmp = Path(tempfile.mkdtemp(prefix="vhmine-bench-store-"))
    pg = None
    failed = False
    try:
        if args.held:
            print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
        else:
            pairs = write_pairs(tmp, per_mode)
            print(
                f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {8 * per_mode} tasks, "
                f"lease {args.lease_s:g} s, at most {args.seconds:g} s per run"
            )
            print(
                f"{'backend':<10} {'workers':>7} {'secs':>6} {'takes':>6} {'annot':>6} {'skip':>5} {'undo':>5} "
                f"{'disc':>5} {'actions/s':>9} {'conflicts':>9} done/disc/open  " + "  ".join(CHECKS)
            )
        for backend in args.backends:
            for n in [None] if args.held else args.workers:
                drop = None
                if backend == "sqlite":
                    url = f"sqlite:///{tmp / ('store-held.db' if args.held else f'store-{n}.db')}"
                elif args.pg_url:
                    url, drop = database_on(args.pg_url)
                else:
                    if pg is None:
                        pg = ThrowawayPostgres(max_connections=max(100, 2 * max(args.workers) + 20)).start()
                    url = pg.new_database()
                try:
                    if args.held:  # issue 42's figure instead (scripts/bench_held.py)
                        from bench_held import held_line, run_held

                        line, ok = held_line(backend, run_held(url, tmp, args.held))
                        print(line, flush=True)
                        failed |= not ok
                        continue
                    r = run_once(url, pairs, per_mode, n, args)
                finally:
                    if drop:
                        drop()
                print_row(backend, r)
                failed |= any(r["problems"][k] for k in CHECKS)
    except KeyboardInterrupt:
        print("interrupted: cleaning up", file=sys.stderr)
        return 130
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.held:
        print("FAIL" if failed else "PASS: the next item within the bound, no other process's save refused")
    else:
        print(
            "FAIL"
            if failed
            else "PASS: no double annotation, no action lost, every task in one state, one holder per lease"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
