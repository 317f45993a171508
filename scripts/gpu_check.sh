#!/usr/bin/env bash
# The GPU figures of issues 9, 18 and 35, checked on one CUDA machine in one run (under 10 minutes on one H200).
#
#   bash scripts/gpu_check.sh               # needs a CUDA device; run from the repository root
#   bash scripts/gpu_check.sh --cpu-dry-run # no GPU: runs the same parts on the CPU at toy sizes
#                                           # (checks the script's plumbing; no target is applied)
#
# Parts, each ending in one PASS / FAIL / SKIP line with its figure and target:
#   1. mine:  simsearch.find_pairs(device="cuda") on 118,287 x 768 CLIP (+ 1024-d DINOv2) vectors, both of
#             scripts/bench_mine.py's data sets. The pair set must equal the float64 brute force, computed
#             here as blocked float64 matmuls on the GPU (every pair within 1e-9 of the threshold, then
#             simsearch.pair_sims: the brute force's own definition), and that reference is itself checked
#             against simsearch.brute_force_pairs on the CPU over a subsample. Target: < 1 s per data set.
#             Also prints the miner's time over its floor on CUDA (bench_mine.kernel_floor: the same blocks'
#             products alone with the kernel find_pairs chose, median of 3), `vs floor (KERNEL): R x`, and over
#             the unique pairs' products at the kernel's best rate there (calibrate.best_rate, GPU wall time;
#             in the CPU dry run both in CPU time, the unique pairs' at the instruction peak, bench_peak).
#   2. embed: vhmine embed (embed_collection, as the CLI calls it) end to end on synthetic 640x480 JPEGs with
#             ViT-L/14 + DINOv2-L/14 shapes at 224 px, random weights built locally (vhmine/embed/tiny.py,
#             scripts/bench_embed.py's "large" preset), in the precision `--precision auto` chooses there.
#             Target: >= 1,000 images/s. Then each precision (fp32, bf16, fp16) on GPU_CHECK_PREC_N photo
#             variants (scripts/photo_variants.py): the forward passes' images/s, `vhmine embed --precision P`'s,
#             and the agreement with fp32 (scripts/bench_embed.py's lines), and what auto chose (no target).
#   3. tests: pytest -m gpu tests/test_gpu.py (CUDA equals CPU for mining, embedding and `vhmine mine`).
#   4. faiss-gpu: where the installed faiss has GPUs (faiss.get_num_gpus() > 0: faiss-gpu-cu12 in place of
#             faiss-cpu, docs/scaling.md), vhmine.embed.search's GPU search (export --against) finds the same
#             neighbours as faiss's CPU range_search on 200,000 x 768 CLIP-shaped rows; SKIP where it has none.
#   5. ray:   `vhmine mine --engine ray --device cuda` (vhmine.api.mine) on one GPU at N = 1,000,000 CLIP-shaped
#             rows written to disk chunk by chunk (scripts/bench_mine_ray.py: 7 GB, GPU_CHECK_TMP says where),
#             the tiles reading their rows from the index by row range; 6 of its tiles, whose pairs must equal a
#             float64 brute force of the same tiles on the GPU. Prints the tile rate on the GPU. SKIP without Ray.
#
# Exit status: 0 every part PASS; 1 a part FAILed (or a needed module is missing); 2 no CUDA device (every
# part prints SKIP; part 3 still runs and its tests skip with "no CUDA device"; a --cpu-dry-run also exits 2:
# its parts print DRY lines and no target is checked).
#
# Offline machines: every module below must import. Without internet, carry wheels along and either install
# them first or set VHMINE_WHEELS to their folder (the script then installs what is missing from there only):
#   on a machine with internet:  pip download -d wheels --only-binary=:all: open_clip_torch ftfy wcwidth regex faiss-cpu
#   on the GPU machine:          pip install --no-index --find-links wheels/ open_clip_torch ftfy wcwidth regex faiss-cpu
# Sizes can be changed: GPU_CHECK_N (mining rows, 118287), GPU_CHECK_EMBED_N (images, 10000),
# GPU_CHECK_PREC_N (images per precision, 1024), GPU_CHECK_BATCH (256), GPU_CHECK_WORKERS (decode workers,
# default vhmine's choice), GPU_CHECK_PRESET (part 2's encoder shapes: large, small or tiny; large, or small in a
# dry run), GPU_CHECK_RAY_N (part 5's rows, 1,000,000; 30,000 in a dry run).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python}
DRY=0
[ "${1:-}" = "--cpu-dry-run" ] && DRY=1
status=0
log=$(mktemp); trap 'rm -f "$log"' EXIT

# part NUMBER NAME SECONDS: runs the Python on stdin with a time limit; a crash or a timeout is a FAIL line too;
# exit status 3 is a SKIP the part printed itself (nothing was checked, so the run cannot exit 0)
part() {
  timeout "$3" $PY - 2>&1 | tee "$log"; local rc=${PIPESTATUS[0]}
  if [ "$rc" = 3 ]; then
    [ $status = 0 ] && status=2
  elif [ "$rc" != 0 ]; then
    status=1
    grep -q "^FAIL $1 " "$log" || echo "FAIL $1 $2: $([ "$rc" = 124 ] && echo "did not finish within $3 s" || echo "exit status $rc (see above)")"
  fi
}

# --- what the three parts import -------------------------------------------------------------------
modules="torch numpy pandas pyarrow PIL typer tqdm matplotlib safetensors transformers open_clip faiss pytest"
missing() { $PY - $modules <<'EOF' || echo "(the module check itself failed: is $PY a working Python?)"
import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
EOF
}
miss=$(missing)
if [ -n "$miss" ] && [ -n "${VHMINE_WHEELS:-}" ]; then
  pkgs=$(echo "$miss" | sed -e 's/\bopen_clip\b/open_clip_torch ftfy wcwidth regex/' -e 's/\bfaiss\b/faiss-cpu/' -e 's/\bPIL\b/pillow/')
  echo "installing from $VHMINE_WHEELS: $pkgs"
  $PY -m pip install -q --no-index --find-links "$VHMINE_WHEELS" $pkgs
  miss=$(missing)
fi
if [ -n "$miss" ]; then
  echo "FAIL setup: missing Python modules: $miss"
  echo "  open_clip -> pip install --no-index --find-links wheels/ open_clip_torch ftfy wcwidth regex"
  echo "  faiss     -> pip install --no-index --find-links wheels/ faiss-cpu   (vhmine writes its indexes with it)"
  echo "  (make wheels/ on a machine with internet: pip download -d wheels --only-binary=:all: <the packages>;"
  echo "   or set VHMINE_WHEELS=<folder> and this script installs from it)"
  exit 1
fi

cuda=$($PY -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")')
if [ -z "$cuda" ] && [ $DRY = 0 ]; then
  echo "no CUDA device: torch.cuda.is_available() is False (torch $($PY -c 'import torch; print(torch.__version__)'))"
  echo "SKIP 1 mine: no CUDA device (target < 1 s at N=118,287, pairs identical to the float64 brute force)"
  echo "SKIP 2 embed: no CUDA device (target >= 1,000 images/s, ViT-L/14 + DINOv2-L/14 at 224 px; images/s per precision not measured)"
  echo "SKIP 4 faiss-gpu: no CUDA device (faiss.get_num_gpus() == $($PY -c 'import faiss; print(faiss.get_num_gpus())' 2>/dev/null || echo '?'); target: the same neighbours as the CPU search)"
  echo "SKIP 5 ray: no CUDA device (target: a Ray mine with --device cuda at N=1,000,000 whose tiles equal the float64 brute force)"
  status=2
else
  echo "device: ${cuda:-cpu (dry run: toy sizes, no targets)}"
  $PY -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.get_num_threads()} CPU threads")'
  DEV=cuda
  if [ $DRY = 1 ]; then DEV=cpu; fi

  # --- 1. mining -----------------------------------------------------------------------------------
  GPU_CHECK_DEVICE=$DEV GPU_CHECK_DRY=$DRY part 1 mine 150 <<'EOF'
import os, sys, time
import numpy as np
import torch
sys.path.insert(0, "scripts")
from bench_mine import kernel_floor, make_clip_like, make_vectors
from bench_peak import floor_peak
from bench_timing import clock
from vhmine.mine.join import calibrate
from vhmine.mine.join.simsearch import PairSet, assert_same_pairs, brute_force_pairs, find_pairs, pair_sims

dev, dry = os.environ["GPU_CHECK_DEVICE"], os.environ["GPU_CHECK_DRY"] == "1"
n = int(os.environ.get("GPU_CHECK_N", 3000 if dry else 118_287))
CLIP, DINO, TARGET = 0.9, 0.55, 1.0
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

def float64_reference(clip, dino, block=8192):
    """Every pair i < j as a float64 matmul on the device, kept within 1e-9 of CLIP (a float64 sum of 768
    unit-row products errs by < 1e-13), then decided by pair_sims, the brute force's own definition."""
    x = torch.from_numpy(clip).to(dev, torch.float64)
    found_i, found_j = [], []
    for r in range(0, n, block):
        for c in range(r, n, block):
            s = x[r:r + block] @ x[c:c + block].T
            if r == c:
                s = torch.triu(s, diagonal=1) - torch.tril(torch.full_like(s, 2.0))  # i < j only
            i, j = torch.nonzero(s >= CLIP - 1e-9, as_tuple=True)
            found_i.append((i + r).cpu().numpy()); found_j.append((j + c).cpu().numpy())
    i, j = np.concatenate(found_i).astype(np.int64), np.concatenate(found_j).astype(np.int64)
    cs = pair_sims(clip, i, j); keep = cs >= CLIP
    i, j, cs = i[keep], j[keep], cs[keep]
    ds = pair_sims(dino, i, j); keep = ds <= DINO
    order = np.lexsort((j[keep], i[keep]))
    return PairSet(i[keep][order], j[keep][order], cs[keep][order], ds[keep][order]), len(cs)

ok = True
for name, make in (("random", make_vectors), ("clip-shaped", make_clip_like)):
    clip, dino = make(n, 768, 1024, 0)
    find_pairs(clip[:4096], dino[:4096], CLIP, DINO, device=dev)  # warm-up: CUDA context, cuBLAS, int8 probe
    st = {}
    sync()
    with clock() as c:
        got = find_pairs(clip, dino, CLIP, DINO, device=dev, stats=st)
        sync()
    secs = c.wall_s
    kern, floor = kernel_floor(clip, CLIP, st["rotated"], dev, None, None)  # the same blocks' products alone
    kname = kern.name
    floor()  # warm
    # the ratios in the device's wall time on a GPU; in the CPU dry run in CPU time (the load stretches wall time)
    pick = (lambda cw: cw[1]) if dev == "cuda" else (lambda cw: cw[0])
    t_floor, used = sorted(pick(floor()) for _ in range(3))[1], pick((c.cpu_s, c.wall_s))
    # the unique pairs' products (n (n - 1) / 2 x d MACs): on a GPU at the kernel's best rate there, on a CPU
    # at the instruction peak of a core measured by a hand loop (CPU seconds, on however many cores)
    rate = calibrate.best_rate(kern, torch.device(dev), clip.shape[1]) if dev == "cuda" else floor_peak()[0]
    t_unique = n * (n - 1) / 2 * clip.shape[1] / rate / 1e9
    sync(); t = time.perf_counter()
    ref, alike = float64_reference(clip, dino)
    sync(); t_ref = time.perf_counter() - t
    try:
        assert_same_pairs(got, ref, atol=0.0); same = True
    except AssertionError as err:
        print(f"  pair sets differ: {err}"); same = False
    # the reference checked against brute_force_pairs on the CPU: rows of found pairs plus random rows
    rng = np.random.default_rng(1)
    rows = np.unique(np.concatenate([ref.i[:600], ref.j[:600], rng.choice(n, min(n, 1200), replace=False)]))
    sub = brute_force_pairs(clip[rows], dino[rows], CLIP, DINO)
    inside = np.isin(ref.i, rows) & np.isin(ref.j, rows)
    ref_sub = PairSet(np.searchsorted(rows, ref.i[inside]), np.searchsorted(rows, ref.j[inside]),
                      ref.clip_sim[inside], ref.dino_sim[inside])
    try:
        assert_same_pairs(ref_sub, sub, atol=0.0); sub_ok = True
    except AssertionError as err:
        print(f"  float64 reference differs from brute_force_pairs on the subsample: {err}"); sub_ok = False
    print(f"  {name}: n={n:,}, find_pairs {secs:.3f} s ({st['blocks']} blocks, {st['candidates']:,} candidates, "
          f"margin {st['margin']:.4f}, rotated {st['rotated']}), {len(got):,} pairs; float64 reference "
          f"{t_ref:.2f} s, {alike:,} pairs with CLIP >= {CLIP}, {len(ref):,} in the box; subsample of "
          f"{len(rows):,} rows vs brute_force_pairs: {len(sub):,} pairs, {'same' if sub_ok else 'DIFFERENT'}")
    verdict = "DRY" if dry else ("PASS" if same and sub_ok and secs < TARGET else "FAIL")
    ok &= verdict != "FAIL" and same and sub_ok
    print(f"{verdict} 1 mine ({name}): {secs:.3f} s at N={n:,} on {dev} (target < {TARGET:g} s), "
          f"pairs identical to the float64 brute force: {same and sub_ok}; floor {t_floor:.3f} "
          f"{'s' if dev == 'cuda' else 'CPU-s'}, "
          f"vs floor ({kname}): {used / t_floor:.2f} x; vs unique-pair floor ({kname}, "
          f"{'GPU wall' if dev == 'cuda' else 'CPU'} time): {used / t_unique:.2f} x ({rate:.0f} GMAC/s); "
          f"{st['kernel_line']}", flush=True)
sys.exit(0 if ok else 1)
EOF

  # --- 2. embedding --------------------------------------------------------------------------------
  GPU_CHECK_DEVICE=$DEV GPU_CHECK_DRY=$DRY part 2 embed 420 <<'EOF'
import os, sys, tempfile, time
from multiprocessing import Pool
from pathlib import Path
sys.path.insert(0, "scripts")
from bench_embed import auto_line, build_encoders, describe_preset, make_jpegs, precision_rows, report
from photo_variants import make_variants
from vhmine.embed.job import EmbedOptions, embed_collection

dev, dry = os.environ["GPU_CHECK_DEVICE"], os.environ["GPU_CHECK_DRY"] == "1"
n = int(os.environ.get("GPU_CHECK_EMBED_N", 48 if dry else 10_000))
batch = int(os.environ.get("GPU_CHECK_BATCH", 16 if dry else 256))
workers = int(os.environ["GPU_CHECK_WORKERS"]) if os.environ.get("GPU_CHECK_WORKERS") else None
preset = os.environ.get("GPU_CHECK_PRESET") or ("small" if dry else "large")
TARGET = 1000

def part(args):  # one folder per process: bench_embed.make_jpegs names files from 000000 on
    folder, count, seed = args
    folder.mkdir(parents=True)
    make_jpegs(folder, count, seed=seed)

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    procs = min(16, os.cpu_count() or 1)
    t = time.perf_counter()
    with Pool(procs) as pool:
        pool.map(part, [(tmp / "imgs" / f"p{k:02d}", n // procs + (k < n % procs), k) for k in range(procs)])
    print(f"  made {n:,} 640x480 JPEGs in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    clip, dino = build_encoders(tmp, preset)
    print(f"  built random-weight encoders, {describe_preset(preset)}, in {time.perf_counter() - t:.1f} s")
    runs = []
    for k in range(2):  # the first run pays cuDNN / allocator warm-up; the better one counts
        res = embed_collection(EmbedOptions(images=tmp / "imgs", name=f"check{k}", indexes=tmp / "idx",
                                            clip_model=clip, dino_model=dino, device=dev, batch_size=batch,
                                            workers=workers, progress=False))
        secs = res.timings["encode"] + res.timings["finalize"]
        runs.append(secs)
        print(f"  run {k + 1}: {n:,} images in {secs:.2f} s ({n / secs:,.0f} images/s) + model load "
              f"{res.timings['load']:.1f} s; {res.precision.get('name')} ({res.precision.get('chosen')})")
    rate = n / min(runs)
    # each precision on photo variants: images/s of the forward passes and of vhmine embed, agreement with fp32
    m = int(os.environ.get("GPU_CHECK_PREC_N", 32 if dry else 1024))
    t = time.perf_counter()
    variants = make_variants(tmp / "variants", m, photos=tmp / "photos")
    print(f"  made {m:,} photo variants in {time.perf_counter() - t:.1f} s")
    rows = precision_rows((clip, dino), variants, ["fp32", "bf16"] if dry else ["fp32", "bf16", "fp16"],
                          device=dev, batch_size=batch, repeat=1 if dry else 2, workers=workers, tmp=tmp / "prec",
                          box_share=0.002)
    for line in report(rows) + [auto_line((clip, dino), dev)]:
        print(f"  {line}")
    verdict = "DRY" if dry else ("PASS" if rate >= TARGET else "FAIL")
    print(f"{verdict} 2 embed: {rate:,.0f} images/s end to end on {dev} ({describe_preset(preset)}, "
          f"batch {batch}, {n:,} images; target >= {TARGET:,} images/s)", flush=True)
    sys.exit(1 if verdict == "FAIL" else 0)
EOF

  # --- 4. faiss on GPUs (export --against) --------------------------------------------------------------
  GPU_CHECK_DRY=$DRY part 4 faiss-gpu 150 <<'EOF'
import os, sys, time
import numpy as np
sys.path.insert(0, "scripts")
import faiss
from bench_mine import make_clip_like
from vhmine.embed.search import _flat, gpus, knn_range, range_search

dry = os.environ["GPU_CHECK_DRY"] == "1"
g = gpus()
if g == 0 and not dry:
    print(f"SKIP 4 faiss-gpu: the installed faiss {faiss.__version__} has no GPU support (faiss.get_num_gpus() == 0: "
          "faiss-cpu is installed); to check it, install faiss-gpu-cu12 in its place (docs/scaling.md)")
    sys.exit(3)
n, nq, radius = (20_000, 200, 0.9) if dry else (200_000, 2_000, 0.9)
base, _ = make_clip_like(n, 768, 8, 0)
queries = np.concatenate([base[::n // nq][: nq // 2], base[-nq // 2:]])
t = time.perf_counter(); want = _flat(base, False).range_search(queries, radius); t_cpu = time.perf_counter() - t
t = time.perf_counter()
got = (knn_range(_flat(base, False), queries, radius, cpu=lambda: _flat(base, False), max_k=2048) if dry
       else range_search(base, queries, radius, on_gpus=True))
t_gpu = time.perf_counter() - t
def sets(lims, sims, ids):
    return [set(ids[lims[q]:lims[q + 1]].tolist()) for q in range(len(lims) - 1)]
# float32 sums round differently on the GPU: rows within 1e-5 of the radius may fall either side of it
near = [set(np.flatnonzero(np.abs(base.astype(np.float64) @ q.astype(np.float64) - radius) < 1e-5).tolist()) for q in queries]
same = all((a ^ b) <= e for a, b, e in zip(sets(*got), sets(*want), near))
verdict = "DRY" if dry else ("PASS" if same else "FAIL")
print(f"{verdict} 4 faiss-gpu: {nq:,} queries against {n:,} x 768 rows on {g} GPU(s) in {t_gpu:.2f} s (CPU range_search "
      f"{t_cpu:.2f} s), {int(want[0][-1]):,} neighbours above {radius}; the same neighbours as the CPU: {same}", flush=True)
sys.exit(0 if same else 1)
EOF

  # --- 5. a Ray mine on one GPU, tiles reading the index by row range ----------------------------------
  GPU_CHECK_DEVICE=$DEV GPU_CHECK_DRY=$DRY part 5 ray 420 <<'EOF'
import importlib.util, os, sys, tempfile, time
from pathlib import Path
import numpy as np
import torch
sys.path.insert(0, "scripts")
if importlib.util.find_spec("ray") is None:
    print("SKIP 5 ray: Ray is not installed (pip install 'vhmine[ray]')"); sys.exit(3)
import ray
import pandas as pd
from bench_mine_ray import sample_tiles, write_synthetic_index
from vhmine import api
from vhmine.index import index_rows
from vhmine.mine.join.simsearch import pair_sims
from vhmine.mine.ray.tilejob import Triangle

dev, dry = os.environ["GPU_CHECK_DEVICE"], os.environ["GPU_CHECK_DRY"] == "1"
n = int(os.environ.get("GPU_CHECK_RAY_N", 30_000 if dry else 1_000_000))
mem = (256 if dry else 16384) << 20  # MiB per tile task: GPU memory for the product
CLIP, DINO = 0.9, 0.55
with tempfile.TemporaryDirectory(dir=os.environ.get("GPU_CHECK_TMP")) as tmp:
    tmp = Path(tmp)
    t = time.perf_counter(); write_synthetic_index(tmp / "idx" / "synthetic", n, 1024, 0)
    print(f"  wrote a {n:,}-row index chunk by chunk in {time.perf_counter() - t:.0f} s")
    tiles, total, side = sample_tiles(n, mem, 1024, 3 if dry else 6)
    ray.init(num_cpus=os.cpu_count(), num_gpus=0 if dev == "cpu" else 1, include_dashboard=False, log_to_driver=False)
    t = time.perf_counter()
    r = api.mine("synthetic", indexes=tmp / "idx", out=tmp / "run", engine="ray", device=dev, tile_memory=mem,
                 tiles=tiles, clip=CLIP, dino=DINO, progress=False, gallery_size=10)
    secs = time.perf_counter() - t
    ray.shutdown()
    got = pd.read_parquet(tmp / "run" / "pairs.parquet")
    got = {tuple(sorted((int(a, 16), int(b, 16)))) for a, b in zip(got["image_id_a"], got["image_id_b"])}
    rows = index_rows(tmp / "idx" / "synthetic", ids=False)
    tri, want = Triangle(n, side), set()
    for k in tiles:  # float64 products of the tile's two blocks on the device, then pair_sims decides
        r0, c0 = tri.tile_at(k)
        xa, xb = rows.clip.read(r0, r0 + side), rows.clip.read(c0, c0 + side)
        s = torch.from_numpy(xa).to(dev, torch.float64) @ torch.from_numpy(xb).to(dev, torch.float64).T
        i, j = (v.cpu().numpy().astype(np.int64) for v in torch.nonzero(s >= CLIP - 1e-9, as_tuple=True))
        del s
        i, j = i + r0, j + c0
        i, j = i[i < j], j[i < j]
        u = np.unique(np.concatenate([i, j]))
        keep = pair_sims(rows.clip.take(u), np.searchsorted(u, i), np.searchsorted(u, j)) >= CLIP
        i, j = i[keep], j[keep]
        u = np.unique(np.concatenate([i, j]))
        keep = pair_sims(rows.dino.take(u), np.searchsorted(u, i), np.searchsorted(u, j)) <= DINO
        want |= set(zip(i[keep].tolist(), j[keep].tolist()))
    same = got == want
    verdict = "DRY" if dry else ("PASS" if same else "FAIL")
    print(f"{verdict} 5 ray: N={n:,} on {dev}, {len(tiles)} of {total:,} tiles of {side:,} rows in {secs:.1f} s (with the "
          f"streaming pass over every row), tile rate {r.job['pairs_per_second_per_worker']:,.3g} pairs/s per worker; "
          f"{len(got):,} pairs, identical to the float64 brute force of those tiles: {same}", flush=True)
    sys.exit(0 if same else 1)
EOF
fi

# --- 3. the CUDA tests -------------------------------------------------------------------------------
# -o addopts=: one process (the project's addopts start xdist workers: a few CUDA tests gain nothing from them)
out=$(timeout 100 $PY -m pytest -o addopts= -m gpu tests/test_gpu.py -q -rs -p no:cacheprovider 2>&1); rc=$?
echo "$out" | tail -n 15
summary=$(echo "$out" | tail -n 1)
if [ $rc = 0 ] && ! echo "$summary" | grep -q skipped; then
  echo "PASS 3 tests: $summary (target: every gpu test passes)"
elif [ $rc = 0 ] && [ -z "$cuda" ]; then
  echo "SKIP 3 tests: $summary (no CUDA device; target: every gpu test passes)"
else
  echo "FAIL 3 tests: $summary (target: every gpu test passes, none skipped)"
  status=1
fi
if [ -z "$cuda" ] && [ $status = 0 ]; then status=2; fi  # nothing was measured against a target
exit $status
