"""Which mining runs their index outgrew, for `vhmine status`, and the `vhmine mine` command that reruns each.

Reads nothing itself: it compares what vhmine.status read, each finished index's manifest.json sha256 and
image count (status.IndexInfo) against the run.json index_manifest_sha256 and counts.images of its newest
seeded run and its newest run (status.RunInfo). A rerun of the same command mines only what changed (vhmine
mine reuses the run).
"""

from __future__ import annotations

from pathlib import Path


def same_folder(a: str, b: str) -> bool:
    try:
        return bool(a) and Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def outgrown(indexes, runs) -> list[dict]:
    """The finished indexes whose manifest.json differs from the one a run of theirs mined (runs by creation, an
    --against run aside: it mines two indexes), with the command that reruns that run: the newest seeded run (its
    rerun's new pairs are what the store's queues lack), and the newest run mine did not warn about
    (status.RunInfo.warned; the newest of all if it warned about each) when that is another one."""
    out = []
    for i in indexes:
        mined = [
            r
            for r in runs
            if not r.against
            and r.index_manifest_sha256
            and (same_folder(r.index_folder, i.folder) if r.index_folder else r.index == i.name)
        ]
        if not i.finished or not mined:
            continue
        seeded = [r for r in mined if getattr(r, "seeded", False)]
        newest = ([r for r in mined if not getattr(r, "warned", "")] or mined)[-1]
        for r in seeded[-1:] + ([newest] if newest not in seeded[-1:] else []):
            if r.index_manifest_sha256 == i.manifest_sha256:
                continue
            out.append(
                {
                    "index": i.name,
                    "run": r.name,
                    "run_folder": r.folder,
                    "images_then": r.images,
                    "images_now": i.images,
                    "command": _rerun(i, r),
                }
            )
    return out


def _rerun(index, run) -> str:
    """The `vhmine mine` command that mined `run`, to run again: thresholds, caps, engine, and --out when the run
    is not in the folder mine names by default (mine.plan.default_run_name)."""
    from vhmine.config import mine_command, runs_root
    from vhmine.files import shown_path

    cmd = mine_command(Path(index.folder)) + f" --clip {_exact(run.clip)} --dino {_exact(run.dino)}"
    opts = run.options
    for key, flag in (("max_pairs", "--max-pairs"), ("max_per_image", "--max-per-image")):
        if opts.get(key):
            cmd += f" {flag} {opts[key]}"
    if opts.get("engine") not in (None, "", "local"):
        cmd += f" --engine {opts['engine']}"
    if not same_folder(run.folder, str(runs_root() / f"{index.name}-clip{run.clip:g}-dino{run.dino:g}")):
        cmd += f" --out {shown_path(run.folder)}"
    return cmd


def _exact(x: float) -> str:
    """x as short as it reads back the same (the rerun must ask for the very thresholds, or it mines in full)."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def outgrown_line(g: dict) -> str:
    then, now, name = g["images_then"], g["images_now"], f"index '{g['index']}'"
    if now == then:
        said = f"{name} changed since run {g['run']} mined it ({now:,} images then and now)"
    else:
        said = (
            f"{name} has {abs(now - then):,} {'more' if now > then else 'fewer'} images than when run {g['run']}"
            " mined it"
        )
    return f"{said}: `{g['command']}` mines only what changed"
