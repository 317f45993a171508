"""Memory of `vhmine mine --engine ray` at two collection sizes: the driver's and each worker's peak RSS
must not grow with N (target: N = 2,000,000 within 1.5x of N = 200,000), and the measured tile rate.

For each N it writes an on-disk index of CLIP-shaped rows (scripts/bench_mine.py's make_clip_like: 768-d
CLIP with a few dominant dimensions, 1024-d DINOv2), chunk by chunk (index.rows.FlatWriter), so this script
never holds the collection (2,000,000 x 768 float32 rows are 6 GB; the index is 14 GB on disk). Then it
starts a fresh local 2-CPU Ray cluster, runs the real `vhmine mine --engine ray` (vhmine.api.mine) in a
driver subprocess on a fixed sample of tiles, spread evenly over the upper triangle (the streaming
quantisation pass still reads every row), and reads each process's own peak RSS (VmHWM of /proc/self/status:
the driver's at its end, each worker's at the end of each tile, from the tiles' ledger). Not wait4's
ru_maxrss: Linux carries the parent's peak over a fork and exec into the child's.

    python scripts/bench_mine_ray.py                         # N = 200,000 and 2,000,000, 6 tiles each
    python scripts/bench_mine_ray.py --sizes 20000 200000 --tiles 2
    python scripts/bench_mine_ray.py --grow                  # each index grown by 1%: the band job

--grow: each index's first 99% were mined by an earlier run that the script writes as `vhmine mine` does
(write_earlier_run: its rows' real digests, one CLIP-alike pair a row drawn at random, since their full mine
would take hours at 2,000,000 rows on 2 cores), so the run is a growth (checked: run.json's incremental),
with the driver's joins by image id (mine.growjoin; their cost printed from run.json's incremental.join),
the earlier pairs renumbered, the scan, a sample of the band's tiles and the pairs table written. The last
line is then `memory (growth): driver A MiB at N=200000, B MiB at N=2000000; worker C / D MiB`, after a line
saying whether B <= 1.15 A + 64.

The last line is exactly `memory: driver A MiB at N=200000, B MiB at N=2000000; worker C / D MiB`. Its ratios
are of memory, not time; the tile rate is pairs per second of a worker's tile time as its ledger records it (a
rate, no ratio: compare it across runs only at a like load).
Writes only under --workdir (a temporary folder, removed at the end unless --keep).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHUNK = 100_000  # rows generated and written at a time
GROUP = 1 << 20  # images.parquet row groups of 1Mi rows, as pandas.to_parquet (and so `vhmine embed`) writes them

DRIVER = """
import json, sys
from vhmine import api
r = api.mine("synthetic", indexes=sys.argv[1], out=sys.argv[2], engine="ray", ray_address=sys.argv[3],
             tiles=json.loads(sys.argv[4]), tile_memory=int(sys.argv[5]), gallery_size=20, progress=False,
             kernel=None if sys.argv[6] == "auto" else sys.argv[6])
from vhmine.mine.ray.tiletask import peak_rss
print("JOB " + json.dumps({**r.job, "written": r.written, "seconds_total": r.seconds, "driver_peak_rss": peak_rss()}))
"""


def clip_like_chunks(n: int, dim: int, dino_dim: int, seed: int):
    """make_clip_like's rows, CHUNK at a time: make_vectors' clusters within each chunk, and the same 4
    dominant dimensions (same signs and sizes) in every chunk, as one CLIP model gives every image."""
    from bench_mine import make_vectors

    rng = np.random.default_rng(seed + 1)
    spikes = rng.choice(dim, 4, replace=False)
    signs = [np.float32(f * rng.choice([-1, 1])) for f in (10, 10, 12, 25)]
    for k, start in enumerate(range(0, n, CHUNK)):
        clip, dino = make_vectors(min(CHUNK, n - start), dim, dino_dim, seed * 100_003 + k)
        x = clip * np.float32(np.sqrt(dim))
        for s, f in zip(spikes, signs):
            x[:, s] = f * (1 + 0.3 * x[:, s])
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        yield x, dino


def write_synthetic_index(folder: Path, n: int, dino_dim: int, seed: int, on_chunk=None) -> float:
    """An index `vhmine mine` opens as any other: flat faiss files, images.parquet, skipped.csv, manifest.
    on_chunk(clip, dino): called with each chunk of rows as it is written."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.index import IMAGES, SKIPPED, write_manifest
    from vhmine.index.rows import FlatWriter

    t0 = time.time()
    folder.mkdir(parents=True)
    clip_w, dino_w = FlatWriter(folder / "clip.faiss", 768), FlatWriter(folder / "dino.faiss", dino_dim)
    for clip, dino in clip_like_chunks(n, 768, dino_dim, seed):
        clip_w.add(clip)
        dino_w.add(dino)
        if on_chunk is not None:
            on_chunk(clip, dino)
    clip_w.close()
    dino_w.close()
    writer = None
    for start in range(0, n, GROUP):
        k = np.arange(start, min(n, start + GROUP))
        hexes = [f"{v:016x}" for v in k]
        df = pd.DataFrame(
            {
                "image_id": hexes,
                "path": [f"{v:09d}.jpg" for v in k],
                "sha256": [h * 4 for h in hexes],
                "width": 640,
                "height": 480,
                "coco_id": pd.array([None] * len(k), dtype="Int64"),
                "categories": [[] for _ in k],
            }
        )
        table = pa.Table.from_pandas(df, preserve_index=False)
        writer = writer or pq.ParquetWriter(folder / IMAGES, table.schema)
        writer.write_table(table, row_group_size=GROUP)
    writer.close()
    skipped = pd.DataFrame({"path": [], "reason": []})
    skipped.to_csv(folder / SKIPPED, index=False)
    write_manifest(
        folder,
        {
            "name": "synthetic",
            "root": str(folder.parent / "images"),
            "encoders": {"clip": {"spec": "synthetic", "dim": 768}, "dino": {"spec": "synthetic", "dim": dino_dim}},
        },
        skipped=skipped,
        images=n,
    )
    return time.time() - t0


def sample_tiles(n: int, tile_memory: int, dino_dim: int, count: int) -> tuple[list[int], int, int]:
    """A fixed sample at any N: the first diagonal tile, then full (off-diagonal) tiles at fixed relative
    places of the triangle (a diagonal tile's product covers its whole square but holds half the pairs, so
    the rate is taken from the full ones). Returns (tile numbers, tiles in all, tile side)."""
    from vhmine.mine.ray import Triangle, tile_rows

    side = min(tile_rows(tile_memory, 768, dino_dim), -(-n // 64) * 64)
    tri = Triangle(n, side)
    t = tri.blocks
    last = max(0, t - 2)  # the last block may be short: full tiles only, so each rate is a full tile's
    places = [(0, 0), (0, last), (t // 2, last), (t // 3, 2 * t // 3), (t // 4, t // 2), (1, 2)][: max(1, count)]
    tiles = sorted({int(tri.starts[a] + (b - a)) for a, b in places if a <= b < t})
    return tiles, len(tri), side


def sample_band_tiles(n: int, old: int, tile_memory: int, dino_dim: int, count: int):
    """A fixed sample of a growth's band tiles (its chunks of new rows x column blocks), spread evenly: (tile
    numbers, tiles in all, tile side)."""
    from vhmine.mine.ray import Band, tile_rows

    side = min(tile_rows(tile_memory, 768, dino_dim), -(-n // 64) * 64)
    band = Band(n, side, np.arange(old, n))
    return sorted({int(k) for k in np.linspace(0, len(band) - 1, max(1, count))}), len(band), side


def write_earlier_run(folder: Path, index: Path, old: int, digests: np.ndarray, seed: int) -> None:
    """The run of the index's first `old` rows that a growth reuses, as `vhmine mine` writes it (run.json with
    its files' checksums, rows.parquet with the rows' real digests, alike.parquet), without its full mine (hours
    at N = 2,000,000 on 2 cores): its CLIP-alike pairs are drawn at random, one a row (the CLIP-shaped rows' full
    mine finds about one a row: 53,574 at N = 50,000), and the growth's pairs are not compared with a full
    mine's here (tests/mine/ray/test_grow_ray.py does that)."""
    import uuid

    from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX
    from vhmine.images import sha256_file
    from vhmine.index import MANIFEST
    from vhmine.mine import state

    folder.mkdir(parents=True)
    hexes = lambda k: np.array([f"{v:016x}" for v in k], dtype=object)  # noqa: E731  (the index's ids)
    state.write_rows_streamed(
        folder, (hexes(range(s, min(old, s + CHUNK))) for s in range(0, old, CHUNK)), [digests], group=state.ROW_GROUP
    )
    rng = np.random.default_rng(seed + 7)
    with state.AlikeWriter(folder) as w:
        for s in range(0, old, CHUNK):
            a = np.arange(s, min(old, s + CHUNK))
            b = rng.integers(0, old, len(a))
            a, b = a[a != b], b[a != b]
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            w.add(hexes(lo), hexes(hi), rng.uniform(DEFAULT_CLIP_MIN, 1, len(a)), rng.uniform(0, 1, len(a)))
    manifest = json.loads((index / MANIFEST).read_text())
    run = {
        "producer": "vhmine mine",
        "run_id": uuid.uuid4().hex,
        "index": manifest["name"],
        "index_created": manifest.get("created"),
        "clip_threshold": DEFAULT_CLIP_MIN,
        "dino_threshold": DEFAULT_DINO_MAX,
        "encoders": manifest.get("encoders", {}),
        "options": {"max_pairs": None, "max_per_image": None, "engine": "ray"},
        "files": {
            name: {"bytes": (folder / name).stat().st_size, "sha256": sha256_file(folder / name)}
            for name in (state.ROWS, state.ALIKE)
        },
    }
    (folder / "run.json").write_text(json.dumps(run, indent=2))


JOINED = " the join by image id with the earlier run, its pairs renumbered,"


def measure(n: int, args, work: Path) -> dict:
    import ray

    idx = work / f"n{n}"
    digests, keep = [], None
    if args.grow:  # the rows' digests taken as they are written: the earlier run's rows.parquet holds them
        from vhmine.index import row_digests

        keep = lambda clip, dino: digests.append(row_digests(clip, dino, workers=2))  # noqa: E731
    secs = write_synthetic_index(idx / "synthetic", n, args.dino_dim, args.seed, on_chunk=keep)
    size = sum(p.stat().st_size for p in (idx / "synthetic").iterdir())
    if args.grow:
        old = n - n // 100  # the earlier run mined the first 99%: the last 1% are new
        write_earlier_run(work / f"run{n}", idx / "synthetic", old, np.concatenate(digests)[:old], args.seed)
        tiles, total, side = sample_band_tiles(n, old, args.tile_memory << 20, args.dino_dim, args.tiles)
    else:
        tiles, total, side = sample_tiles(n, args.tile_memory << 20, args.dino_dim, args.tiles)
    print(
        f"N={n:,}: index written in {secs:.0f} s ({size / 1e9:.1f} GB); {'band ' if args.grow else ''}tiles "
        f"{tiles} of {total:,} (side {side:,} rows)",
        flush=True,
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # fresh workers for each N
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                DRIVER,
                str(idx),
                str(work / f"run{n}"),
                ray.get_runtime_context().gcs_address,
                json.dumps(tiles),
                str(args.tile_memory << 20),
                args.kernel,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out = proc.stdout.read()
        status = proc.wait()
    finally:
        ray.shutdown()
    if status != 0 or "JOB " not in out:
        sys.exit(f"the driver failed (status {status}):\n{out}")
    job = json.loads(out.split("JOB ", 1)[1].splitlines()[0])
    run = json.loads((work / f"run{n}" / "run.json").read_text())
    if args.grow and (run.get("incremental") or {}).get("new_rows") != n // 100:
        sys.exit(f"N={n:,}: the run did not grow the earlier one: {run.get('incremental')} ({out[-2000:]})")
    if args.grow:
        j = run["incremental"]["join"]
        print(
            f"N={n:,}: the join by image id on the driver: {j['buckets']} bucket(s), {j['cpu_seconds']:.2f} CPU-s "
            f"({j['cpu_seconds'] / n * 1e6:.2f} us a row), scratch folder at most "
            f"{j['scratch_peak_bytes'] / 2**20:.0f} MiB ({j['scratch_peak_bytes'] / n:.0f} bytes a row)",
            flush=True,
        )
    workers = job["workers_peak_rss"]
    res = {
        "n": n,
        "driver": job["driver_peak_rss"] / 2**20,
        "workers": {w: v / 2**20 for w, v in workers.items()},
        "rate": job["pairs_per_second_per_worker"],
        "job": job,
    }
    print(
        f"N={n:,}: {len(tiles)} tiles in {job['seconds']:.1f} s of driver time (probe, streaming pass over every "
        f"row,{JOINED if args.grow else ''} tiles); driver peak RSS {res['driver']:.0f} MiB; worker peak RSS "
        f"{', '.join(f'{v:.0f}' for v in res['workers'].values())} MiB; tile rate {res['rate']:,.3g} pairs/s "
        f"per worker (full tiles after each worker's first: {job['rate_tiles']}); {job['written']} pairs written",
        flush=True,
    )
    for name, k in job.get("kernels", {}).items():  # each node's choice, by measurement there (mine.join.kernels)
        rates = ", ".join(f"{a} {v:.1f}" for a, v in k["gmac_per_s"].items() if v is not None)
        print(
            f"N={n:,}: products kernel {name} on {k['tiles']} tiles (GMAC/s in one thread there: {rates or 'forced'})",
            flush=True,
        )
    for e in job["tiles_timing"]:
        print(
            f"  tile {e['tile']} (rows {e['r']:,} x {e['c']:,}): {e['examined']:,} pairs in {e['seconds']:.2f} s, "
            f"{e['candidates']:,} candidates, on worker {e['pid']}",
            flush=True,
        )
    shutil.rmtree(idx, ignore_errors=True)  # the disk is needed for the next size
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs=2, default=[200_000, 2_000_000], metavar=("SMALL", "LARGE"))
    ap.add_argument("--tiles", type=int, default=6, help="tiles mined at each size (a fixed sample, at most 6)")
    ap.add_argument("--tile-memory", type=int, default=1024, help="MiB per tile task, as `vhmine mine --tile-memory`")
    ap.add_argument("--dino-dim", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--kernel",
        default="auto",
        help="products kernel of every tile [default: each worker's fastest, measured on its node]",
    )
    ap.add_argument(
        "--grow",
        action="store_true",
        help="grow each index by 1%% against an earlier run of its first 99%% (the band job) instead of a full mine",
    )
    ap.add_argument("--workdir", type=Path, default=None, help="[default: a temporary folder under $TMPDIR]")
    ap.add_argument("--keep", action="store_true", help="keep the workdir (runs) at the end")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-mine-ray-", dir=args.workdir))
    need = max(args.sizes) * (768 + args.dino_dim) * 4 / 1e9
    free = shutil.disk_usage(work).free / 1e9
    print(f"workdir {work}: {free:.0f} GB free, the larger index needs {need:.1f} GB", flush=True)
    if free < need * 1.1:
        sys.exit(f"not enough disk under {work} for N={max(args.sizes):,}: use --workdir elsewhere")
    try:
        small, large = (measure(n, args, work) for n in args.sizes)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    c, d = max(small["workers"].values()), max(large["workers"].values())
    print(
        f"tile rate (measured, CLIP-shaped, {args.tile_memory} MiB tiles, 1 CPU thread per worker): "
        f"{small['rate']:,.3g} pairs/s per worker at N={small['n']}, {large['rate']:,.3g} at N={large['n']}"
    )
    print(
        f"ratios: driver {small['driver'] and large['driver'] / small['driver']:.2f}x, worker {d / c:.2f}x "
        "(target <= 1.5x each)"
    )
    if args.grow:
        flat = large["driver"] <= 1.15 * small["driver"] + 64
        print(f"growth's driver at N={large['n']} within 1.15 x its N={small['n']} figure + 64 MiB: {flat}")
    print(
        f"memory{' (growth)' if args.grow else ''}: driver {small['driver']:.0f} MiB at N={small['n']}, "
        f"{large['driver']:.0f} MiB at N={large['n']}; worker {c:.0f} / {d:.0f} MiB"
    )


if __name__ == "__main__":
    main()
