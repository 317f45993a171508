"""What to relax when a mining run finds no pair: pair counts at nearby thresholds.

Reads only what the run already holds (the local engine, mine.local_run, passes it in): every pair with CLIP >= --clip
and its DINOv2 similarity (the exact search's result), and the run's background sample (every pair of a
small collection, else 20,000 random pairs, with the miner's own float64 similarities). Writes nothing.

- A higher --dino: counted exactly from the CLIP-alike pairs (every one of them is known).
- A lower --clip: those pairs were never searched; counted from the background sample, exactly when it
  holds every pair of the collection, else estimated (share of the sample x all pairs) and said so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

STEPS = 3  # nearby values per threshold


@dataclass
class Nearby:
    clip: float
    dino: float
    dino_counts: dict[float, int]  # --dino value -> pairs (at --clip), exact
    clip_counts: dict[float, int]  # --clip value -> pairs (at --dino), exact or estimated
    clip_exact: bool
    sample: int  # pairs in the background sample
    clip_alike: int
    command: str = ""  # `vhmine mine ...` with the first relaxed threshold that finds pairs
    lines: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return {
            "dino": {f"{d:g}": n for d, n in self.dino_counts.items()},
            "clip": {f"{c:g}": n for c, n in self.clip_counts.items()},
            "clip_counts": "exact" if self.clip_exact else f"estimated from {self.sample} random pairs",
        }


def higher_dino(dino: float) -> list[float]:
    """The next multiples of 0.1 above --dino (0.55 -> 0.6, 0.7, 0.8), at most 1."""
    start = math.floor(dino * 10 + 1e-9) + 1
    return [round(k / 10, 2) for k in range(start, start + STEPS) if k <= 10]


def lower_clip(clip: float) -> list[float]:
    """The next multiples of 0.05 below --clip (0.9 -> 0.85, 0.8, 0.75), at least -1."""
    start = math.ceil(clip * 20 - 1e-9) - 1
    return [round(k / 20, 2) for k in range(start, start - STEPS, -1) if k >= -20]


def nearby(
    found,
    background,
    n_images: int,
    clip: float,
    dino: float,
    *,
    all_pairs: bool,
    base_command: str,
    pairs: int | None = None,
) -> Nearby:
    """Counts at nearby thresholds and the lines that say what to relax (see the module docstring).

    found: the PairSet of every pair with CLIP >= clip (dino_sim known for each); background: (clip sims,
    dino sims) of the sample; all_pairs: the sample is every pair; base_command: `vhmine mine --index ...`;
    pairs: how many pairs the run looked at [default: every pair of the n_images]."""
    import numpy as np

    dino_counts = {d: int(np.count_nonzero(found.dino_sim <= d)) for d in higher_dino(dino)}
    bc, bd = background
    total = n_images * (n_images - 1) // 2 if pairs is None else pairs
    clip_counts = {}
    for c in lower_clip(clip):
        hits = int(np.count_nonzero((bc >= c) & (bd <= dino)))
        clip_counts[c] = hits if all_pairs else (round(hits / len(bc) * total) if len(bc) else 0)
    out = Nearby(clip, dino, dino_counts, clip_counts, all_pairs, len(bc), len(found.i))
    why = (
        f"no pair has CLIP >= {clip:g} at all"
        if not len(found.i)
        else f"{len(found.i)} pair(s) have CLIP >= {clip:g}, but every one has DINOv2 > {dino:g} "
        f"(the least DINOv2-alike: {float(found.dino_sim.min()):.3f})"
    )
    out.lines.append(f"0 pairs: {why}. Pairs at nearby thresholds:")
    if dino_counts and len(found.i):  # with no CLIP-alike pair, no --dino helps
        out.lines.append(
            "  " + " / ".join(f"--dino {d:g}: {k}" for d, k in dino_counts.items()) + f"  (with --clip {clip:g}; exact)"
        )
    if clip_counts:
        how = (
            "exact: every pair of the collection"
            if all_pairs
            else f"estimated from {len(bc):,} random pairs of {total:,}"
        )
        out.lines.append(
            "  "
            + " / ".join(f"--clip {c:g}: {'' if all_pairs else '~'}{k}" for c, k in clip_counts.items())
            + f"  (with --dino {dino:g}; {how})"
        )
    pick = next(((f"--clip {clip:g} --dino {d:g}") for d, k in dino_counts.items() if k), None) or next(
        ((f"--clip {c:g} --dino {dino:g}") for c, k in clip_counts.items() if k), None
    )
    if pick:
        out.command = f"{base_command} {pick}"
        out.lines.append(f"relax: {out.command}  (scatter.png shows where the pairs lie)")
    else:
        out.lines.append(
            "relax both thresholds (scatter.png shows where the pairs lie); a collection of similar "
            "images, or more images, gives more pairs"
        )
    return out


def for_run(found, background, n_images: int, opts, index: str, *, all_pairs: bool, pairs: int | None = None):
    """A run that wrote no pair: (the lines that say what to relax, run.json's `nearby`), from nearby with the
    command that reruns the run (rerun_command)."""
    base = rerun_command(index, opts)
    out = nearby(found, background, n_images, opts.clip, opts.dino, all_pairs=all_pairs, base_command=base, pairs=pairs)
    return out.lines, {"nearby": out.record()}


def rerun_command(name: str, opts) -> str:
    """`vhmine mine` naming this run's index (and --indexes, --engine) for a rerun with other thresholds."""
    from vhmine.files import shown_path

    return (
        "vhmine mine --index "
        + name
        + (f" --against {opts.against}" if opts.against else "")
        + (f" --indexes {shown_path(opts.indexes)}" if opts.indexes else "")
        + (f" --engine {opts.engine}" if opts.engine != "local" else "")
    )
