"""Peak memory of a whole `vhmine mine` run at large N (target: under 4 GB at N = 100,000).

Writes a synthetic index (bench_mine.py's random-plus-clustered vectors, 768-d CLIP and 1024-d
DINOv2, as a real ViT-L-14 + DINOv2-L index would hold) into a temporary folder, runs the real
`vhmine mine` command on it in a child process, and prints the child's peak RSS and time: its CPU time
(scripts/bench_timing.py: the child's, waited for), the wall time beside it. No ratio: the target is memory.

    python scripts/bench_mine_memory.py --n 100000
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_timing import clock  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()

    import pandas as pd
    from bench_mine import make_vectors

    from vhmine.index import write_index

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        clip, dino = make_vectors(args.n, 768, 1024, args.seed)
        n = len(clip)
        images = pd.DataFrame(
            {
                "image_id": [f"{k:016x}" for k in range(n)],
                "path": [f"{k:012d}.jpg" for k in range(n)],
                "sha256": [f"{k:064x}" for k in range(n)],
                "width": [640] * n,
                "height": [480] * n,
                "coco_id": pd.array([None] * n, dtype="Int64"),
                "categories": [[] for _ in range(n)],
            }
        )
        write_index(
            tmp / "idx" / "synthetic",
            images,
            clip,
            dino,
            skipped=pd.DataFrame({"path": [], "reason": []}),
            manifest={
                "name": "synthetic",
                "root": str(tmp / "imgs"),
                "encoders": {"clip": {"spec": "synthetic", "dim": 768}, "dino": {"spec": "synthetic", "dim": 1024}},
            },
        )
        del clip, dino, images
        cmd = [
            sys.executable,
            "-m",
            "vhmine.cli",
            "mine",
            "--indexes",
            str(tmp / "idx"),
            "--out",
            str(tmp / "run"),
            "--gallery-size",
            "20",
        ] + (["--device", args.device] if args.device else [])
        with clock() as c:
            out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if out.returncode:
            sys.exit(out.stderr)
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB on Linux
        print(out.stdout.strip().splitlines()[0])
        print(
            f"N = {n}: `vhmine mine` peak RSS {peak_gb:.2f} GB (target < 4 GB), {c.cpu_s:.1f} CPU-s "
            f"({c.wall_s:.1f} s wall)"
        )


if __name__ == "__main__":
    main()
