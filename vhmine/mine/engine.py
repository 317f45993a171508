"""The one interface of a run's engines: `Engine.mine(plan)` takes a RunPlan (mine.plan: the shape and its
indexes) and returns the run's pairs found, ranked and capped, as `Mined`: what mine.publish writes into the
run folder. Two engines, interchangeable and siblings (neither imports the other): LocalEngine (mine.local_run:
the exact join, mine.join, in this process) and RayEngine (mine.ray_run: the same blocks as Ray tasks over
tiles, mine.ray). Neither knows the run folder: they write only into the temporary folder publish hands to
`Mined.write_pairs`, and a Ray job into its job folder (RunPlan.job_dir).

Reads and writes nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class Mined:
    """A shape's pairs, ranked and capped, and what the run folder says of them.

    write_pairs(tmp) writes pairs.parquet and pairs.csv (and, for one index, the growth state: rows.parquet,
    alike.parquet; mine.state) into the temporary folder and returns (pairs written, the gallery's rows).
    alike: (clip sims, dino sims) of the CLIP-alike pairs the scatter shows; background: those of random pairs
    (mine.background); extra: run.json's keys from the engine, in order. done() / failed(): what the engine
    does once the run folder is in place, or when writing it failed (a Ray job's folder removed / kept)."""

    name: str  # what MineResult calls the run's images: the index, or "A x B"
    counts: dict
    write_pairs: Callable[[Path], tuple]
    alike: tuple
    background: tuple
    extra: dict = field(default_factory=dict)
    pairs: int | None = None  # the pairs the run looked at [default: every pair of the index's images]
    title: str | None = None  # what the pictures call the run's images [default: the index's name]
    kernel: str = ""
    reuse: str = ""
    relax: list[str] = field(default_factory=list)
    cuts: dict = field(default_factory=dict)
    shared: int = 0
    job: dict = field(default_factory=dict)
    done: Callable[[], None] | None = None
    failed: Callable[[], None] | None = None


class Engine(Protocol):
    """What mine.run asks of an engine (LocalEngine, RayEngine)."""

    name: str  # "local" or "ray" (--engine)

    def mine(self, plan) -> Mined:
        """The plan's pairs (mine.plan.RunPlan), ranked and capped."""
        ...
