"""Stage 9, eval: score models on a benchmark, from their answers or by asking them.

Reads a benchmark folder (or a foreign benchmark file) and predictions files or models; writes
`report.md`, `report.json`, `answers-<model>.jsonl` and a chart. Entry: `evaluate(EvalOptions(...))` in
vhmine.eval.job (the Python API's `vhmine.api.evaluate`; its options in options, the models and judges it asks
in ask). score reads and scores answers, report writes the tables and chart (html_report, html_figures the
page), metrics holds the measures, intervals and units every figure's 95% interval and the paired comparisons
of two models (interval_text prints them), mmvp scores by MMVP's rule, predictions the readers of each
harness's result files. The yes/no reading rules, `match` and MMVP's grader are in vhmine.rules, below every
stage.
"""

from vhmine.eval.job import EvalOptions, evaluate

__all__ = ["EvalOptions", "evaluate"]
