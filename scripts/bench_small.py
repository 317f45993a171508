"""Benchmark: small runs start fast. `vhmine mine` on 300 rows and `vhmine export` of 12 items, each a fresh
process through the real command line, against `python -c "import torch"` timed in the same run.

The data are realistic: 300 JPEG variants of scikit-image's photos (scripts/photo_variants.py) embedded (not
timed) with random-weight encoders of real architectures' shapes (--preset small: ViT-B/32 + DINOv2-S, 512 and
384 dims; tiny: vhmine.embed.tiny's defaults, 32 dims); the mine's thresholds are set from the vectors so that
about --in-box pairs are in the box (a full gallery of 100 pairs and a scatter of every CLIP-alike pair, as a
real run has: random weights put every pair at other similarities than trained ones); a store is seeded from
the run, every task annotated, and the export writes 12 instances of it (vhtest), near-duplicate check on (it
reuses the index's vectors: their encoders are the index's). The mine is timed on each of its paths, each on
its own folder: a fresh mine into a new folder each time, and a re-run of the same command into the folder
already mined from the unchanged index (the reuse path, mine.grow: nothing new to mine); their ratio is printed
too (re-run over fresh). The four commands alternate, --repeat times; the best of each counts, and each ratio
is that command's time over the torch import's: wall time, and CPU time (user + system, the process's and its
children's: less moved by a busy machine).

Also printed: the heavy libraries each command imported (from a run with the same arguments that lists them
at exit), and the machine's load (uptime) before and after.

    python scripts/bench_small.py
    python scripts/bench_small.py --preset tiny --repeat 5
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from photo_variants import make_variants  # noqa: E402

HEAVY = ("torch", "open_clip", "transformers", "faiss", "matplotlib.pyplot", "matplotlib", "pandas", "sqlalchemy")
# `vhmine ARGS` as its console script runs it; with LIST_HEAVY set it also prints the heavy modules it imported
CLI = (
    "import os, sys\n"
    "from vhmine.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "finally:\n"
    "    if os.environ.get('LIST_HEAVY'):\n"
    f"        print('HEAVY', ' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)


def timed(cmd: list[str], **kw) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds: user + system, of the process and its children) of a command run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), res


def vhmine(args: list[str], cwd: Path, env: dict | None = None) -> tuple[tuple[float, float], str]:
    """((wall, CPU) seconds of `vhmine ARGS` in a fresh process), what it printed; exits on a failure."""
    wall, cpu, res = timed([sys.executable, "-c", CLI, *args], cwd=cwd, env={**os.environ, **(env or {})})
    if res.returncode != 0:
        sys.exit(f"vhmine {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return (wall, cpu), res.stdout + res.stderr


def import_torch() -> tuple[float, float]:
    wall, cpu, res = timed([sys.executable, "-c", "import torch"])
    if res.returncode != 0:
        sys.exit(f"python -c 'import torch' failed:\n{res.stderr}")
    return wall, cpu


def thresholds(folder: Path, in_box: int) -> tuple[float, float, int]:
    """(--clip, --dino, CLIP-alike pairs): CLIP at the similarity of the (20 x in_box)-th most alike pair, DINOv2
    so that about `in_box` of those pairs are at or under it."""
    import numpy as np

    from vhmine.index import open_index

    idx = open_index(folder.parent, folder.name)
    c, d = idx.clip.astype(np.float64), idx.dino.astype(np.float64)
    i, j = np.triu_indices(len(c), k=1)
    cs, ds = np.einsum("ij,ij->i", c[i], c[j]), np.einsum("ij,ij->i", d[i], d[j])
    clip_min = float(np.sort(cs)[::-1][min(len(cs) - 1, 20 * in_box)])
    alike = cs >= clip_min
    dino_max = float(np.sort(ds[alike])[min(int(alike.sum()) - 1, in_box)])
    return round(clip_min, 4), round(dino_max, 4), int(alike.sum())


def seed_and_annotate(db: Path, pairs: Path, per_mode: int) -> None:
    """A store seeded from the run (counting), every task annotated and its drafts confirmed: ready instances."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    with open_store(str(db), create=True) as store:
        seed_pairs(store, pairs, per_mode=per_mode, modes=["counting"])
        C.add_worker(store, "bench")
        while (item := C.next_item(store, "bench", "counting")) is not None:
            ids = [v.id for v in item.images]
            ann = C.Annotation("counting.how_many", {"object": "cats"}, answers=dict(zip(ids, ["3", "2"], strict=True)))
            C.save_annotation(store, "bench", item.task_id, ann)
            drafts = C.pending_drafts(store, "bench", "counting")
            C.confirm_drafts(store, "bench", [C.DraftDecision(d.instance_id, True) for d in drafts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=("small", "tiny"), default="small")
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--items", type=int, default=12, help="instances the export writes")
    ap.add_argument("--in-box", type=int, default=300, help="pairs in the mine's box, about")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from bench_embed import PRESETS

    from vhmine.embed import tiny
    from vhmine.embed.job import EmbedOptions, embed_collection

    print(f"load before: {os.getloadavg()[0]:.2f} (1-minute average; {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        make_variants(tmp / "imgs", args.rows, photos=tmp / "photos")
        if args.preset == "tiny":
            clip, dino = tiny.build_clip(tmp / "clip"), tiny.build_dino(tmp / "dino")
        else:
            arch, hidden, layers, heads = PRESETS[args.preset]
            clip = tiny.build_clip(tmp / "clip", like=arch)
            dino = tiny.build_dino(tmp / "dino", hidden_size=hidden, layers=layers, heads=heads, image_size=224)
        embed_collection(
            EmbedOptions(
                images=tmp / "imgs",
                name="small",
                indexes=tmp / "indexes",
                clip_model=clip,
                dino_model=dino,
                progress=False,
            )
        )
        clip_min, dino_max, alike = thresholds(tmp / "indexes" / "small", args.in_box)
        print(
            f"set up in {time.perf_counter() - t:.0f} s: {args.rows} variants of the sample photos embedded "
            f"({args.preset} preset); --clip {clip_min} --dino {dino_max} ({alike} CLIP-alike pairs)"
        )
        mine = ["mine", "--index", "small", "--clip", str(clip_min), "--dino", str(dino_max), "--out", "run"]
        vhmine(mine, tmp)  # the run the store is seeded from (and the page cache warm for every timed run)
        seed_and_annotate(tmp / "data" / "vhmine.db", tmp / "run" / "pairs.parquet", per_mode=args.items // 2)
        export = ["export", "--out", "bench", "--replace", "--per-mode", str(args.items // 2)]
        said = vhmine(export, tmp)[1]  # the export the timed ones repeat
        times: dict[str, list[tuple[float, float]]] = {"import torch": [], "mine": [], "mine re-run": [], "export": []}
        for r in range(args.repeat):  # alternated: a change in the machine's load meets all four alike
            times["import torch"].append(import_torch())
            times["mine"].append(vhmine([*mine[:-1], f"fresh{r}"], tmp)[0])  # a new folder: a fresh mine
            (wall, cpu), out = vhmine(mine, tmp)  # the folder mined above, the index unchanged: the reuse path
            if "reused the run" not in out:
                sys.exit(f"the re-run did not reuse the run in {tmp / 'run'}:\n{out}")
            times["mine re-run"].append((wall, cpu))
            times["export"].append(vhmine(export, tmp)[0])
        heavy = {}
        for name, cmd in (("mine", [*mine[:-1], "fresh"]), ("mine re-run", mine), ("export", export)):
            out = vhmine(cmd, tmp, {"LIST_HEAVY": "1"})[1]
            heavy[name] = [ln.split()[1:] for ln in out.splitlines() if ln.startswith("HEAVY")][0]
        summary = [ln for ln in said.splitlines() if re.match(r"exported |near duplicates: \d", ln)]
        print("  " + "\n  ".join(summary))
        best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in times.items()}
        base = best["import torch"]
        print(f"python -c 'import torch': {base[0]:.2f} s, {base[1]:.2f} CPU s (best of {args.repeat})")
        shown = (("mine", f"{args.rows} rows, a fresh mine"), ("mine re-run", "the same, run again"))
        for name, what in (*shown, ("export", f"{args.items} items")):
            (wall, cpu), imported = best[name], ", ".join(heavy[name]) or "none of " + ", ".join(HEAVY)
            print(
                f"vhmine {name} ({what}): {wall:.2f} s, {wall / base[0]:.2f} x the torch import; {cpu:.2f} CPU s, "
                f"{cpu / base[1]:.2f} x its CPU time; imported: {imported}"
            )
        (fw, fc), (rw, rc) = best["mine"], best["mine re-run"]
        print(
            f"mine re-run against a fresh mine: {rc / fc:.2f} x in CPU time ({rc:.2f} and {fc:.2f} CPU s), "
            f"{rw / fw:.2f} x in wall time"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
