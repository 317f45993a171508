#!/usr/bin/env bash
# The GPU figures of issue 9, checked on one CUDA machine in one run (about 3-5 minutes on one H200; under 8).
#
#   bash scripts/gpu_check.sh               # needs a CUDA device; run from the repository root
#   bash scripts/gpu_check.sh --cpu-dry-run # no GPU: runs the same three parts on the CPU at toy sizes
#                                           # (checks the script's plumbing; no target is applied)
#
# Parts, each ending in one PASS / FAIL / SKIP line with its figure and target:
#   1. mine:  simsearch.find_pairs(device="cuda") on 118,287 x 768 CLIP (+ 1024-d DINOv2) vectors, both of
#             scripts/bench_mine.py's data sets. The pair set must equal the float64 brute force, computed
#             here as blocked float64 matmuls on the GPU (every pair within 1e-9 of the threshold, then
#             simsearch.pair_sims: the brute force's own definition), and that reference is itself checked
#             against simsearch.brute_force_pairs on the CPU over a subsample. Target: < 1 s per data set.
#   2. embed: vhmine embed (embed_collection, as the CLI calls it) end to end on synthetic 640x480 JPEGs with
#             ViT-L/14 + DINOv2-L/14 shapes at 224 px, random weights built locally (vhmine/embed/tiny.py,
#             scripts/bench_embed.py's "large" preset). Target: >= 1,000 images/s.
#   3. tests: pytest -m gpu tests/test_gpu.py (CUDA equals CPU for mining, embedding and `vhmine mine`).
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
# GPU_CHECK_BATCH (256), GPU_CHECK_WORKERS (decode workers, default vhmine's choice).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python}
DRY=0
[ "${1:-}" = "--cpu-dry-run" ] && DRY=1
status=0
log=$(mktemp); trap 'rm -f "$log"' EXIT

# part NUMBER NAME SECONDS: runs the Python on stdin with a time limit; a crash or a timeout is a FAIL line too
part() {
  timeout "$3" $PY - 2>&1 | tee "$log"; local rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ]; then
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
  echo "SKIP 2 embed: no CUDA device (target >= 1,000 images/s, ViT-L/14 + DINOv2-L/14 at 224 px)"
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
from bench_mine import make_clip_like, make_vectors
from vhmine.mine.simsearch import PairSet, assert_same_pairs, brute_force_pairs, find_pairs, pair_sims

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
    sync(); t = time.perf_counter()
    st = {}
    got = find_pairs(clip, dino, CLIP, DINO, device=dev, stats=st)
    sync(); secs = time.perf_counter() - t
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
          f"pairs identical to the float64 brute force: {same and sub_ok}", flush=True)
sys.exit(0 if ok else 1)
EOF

  # --- 2. embedding --------------------------------------------------------------------------------
  GPU_CHECK_DEVICE=$DEV GPU_CHECK_DRY=$DRY part 2 embed 210 <<'EOF'
import os, sys, tempfile, time
from multiprocessing import Pool
from pathlib import Path
sys.path.insert(0, "scripts")
from bench_embed import PRESETS, make_jpegs
from vhmine import tiny
from vhmine.embed.job import EmbedOptions, embed_collection

dev, dry = os.environ["GPU_CHECK_DEVICE"], os.environ["GPU_CHECK_DRY"] == "1"
n = int(os.environ.get("GPU_CHECK_EMBED_N", 48 if dry else 10_000))
batch = int(os.environ.get("GPU_CHECK_BATCH", 16 if dry else 256))
workers = int(os.environ["GPU_CHECK_WORKERS"]) if os.environ.get("GPU_CHECK_WORKERS") else None
arch, hidden, layers, heads = PRESETS["small" if dry else "large"]
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
    clip = tiny.build_clip(tmp / "clip", like=arch)
    dino = tiny.build_dino(tmp / "dino", hidden_size=hidden, layers=layers, heads=heads, image_size=224)
    print(f"  built random-weight {arch} + DINOv2 ({hidden}d x {layers} layers) in {time.perf_counter() - t:.1f} s")
    runs = []
    for k in range(2):  # the first run pays cuDNN / allocator warm-up; the better one counts
        res = embed_collection(EmbedOptions(images=tmp / "imgs", name=f"check{k}", indexes=tmp / "idx",
                                            clip_model=clip, dino_model=dino, device=dev, batch_size=batch,
                                            workers=workers, progress=False))
        secs = res.timings["encode"] + res.timings["finalize"]
        runs.append(secs)
        print(f"  run {k + 1}: {n:,} images in {secs:.2f} s ({n / secs:,.0f} images/s) + model load "
              f"{res.timings['load']:.1f} s")
    rate = n / min(runs)
    verdict = "DRY" if dry else ("PASS" if rate >= TARGET else "FAIL")
    print(f"{verdict} 2 embed: {rate:,.0f} images/s end to end on {dev} ({arch} + DINOv2 {hidden}d, 224 px, "
          f"batch {batch}, {n:,} images; target >= {TARGET:,} images/s)", flush=True)
    sys.exit(1 if verdict == "FAIL" else 0)
EOF
fi

# --- 3. the CUDA tests -------------------------------------------------------------------------------
out=$(timeout 100 $PY -m pytest -m gpu tests/test_gpu.py -q -rs -p no:cacheprovider 2>&1); rc=$?
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
