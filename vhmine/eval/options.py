"""What a `vhmine eval` run is asked to do: EvalOptions (vhmine.eval.job.evaluate takes them; vhmine.api builds them).

Reads and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OEQ_SCORERS = ("match", "judge", "labels")


@dataclass(frozen=True)
class EvalOptions:
    bench: Path
    out: Path
    models: Sequence[str] = ()  # run these through vhmine.llm
    predictions: Sequence[tuple[str, Path]] = ()  # (model name, file) pairs
    fmt: str | None = None  # the benchmark's format [default: detected]
    images: Path | None = None  # where a foreign benchmark's images are
    rule: str = "vhtest"  # the yes/no rule
    oeq: str | None = None  # match, judge or labels; None: judge when `judge` is given, else match
    judge: str | None = None  # judge model (oeq="judge")
    base_url: str | None = None
    db: str | None = None  # the store, for oeq="labels"
    partial: bool = False  # score only the items that have an answer
    judge_agreement: bool = False  # Cohen's kappa of the judge's verdicts against workers' labels in the store (db)
    # further vhmine.llm.LLMOptions fields (cache, max_cost, ...): a dict of them, or an LLMOptions template whose
    # model and base_url each model / judge replaces
    llm: Any = field(default_factory=dict)


# --- the report (tables and chart: report) ----------------------------------------------------
