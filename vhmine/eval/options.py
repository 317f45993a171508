"""eval's options: what one `vhmine eval` run is asked to do (the CLI's flags, the Python API's keywords).

Reads and writes nothing. vhmine.eval.job runs them; vhmine.eval.ask asks models and judges with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OEQ_SCORERS = ("match", "judge", "labels")
MMVP = "mmvp"  # --rule mmvp: MMVP's gpt_grader.py grades every answer through a judge (vhmine.rules.mmvp)


@dataclass(frozen=True)
class EvalOptions:
    bench: Path
    out: Path
    models: Sequence[str] = ()  # run these through vhmine.llm
    predictions: Sequence[tuple[str, Path]] = ()  # (model name, file) pairs
    fmt: str | None = None  # the benchmark's format [default: detected]
    images: Path | None = None  # where a foreign benchmark's images are
    rule: str = "vhtest"  # the yes/no rule (vhmine.rules.answers), or MMVP: MMVP's grader for every answer
    oeq: str | None = None  # match, judge or labels; None: judge when `judge` is given, else match (mmvp: MMVP's)
    judge: str | None = None  # judge model (oeq="judge", rule=MMVP)
    base_url: str | None = None
    db: str | None = None  # the store, for oeq="labels"
    partial: bool = False  # score only the items that have an answer
    judge_agreement: bool = False  # Cohen's kappa of the judge's verdicts against workers' labels in the store (db)
    # further vhmine.llm.LLMOptions fields (cache, max_cost, ...): a dict of them, or an LLMOptions template whose
    # model and base_url each model / judge replaces
    llm: Any = field(default_factory=dict)
