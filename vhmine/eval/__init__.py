"""Stage 9, eval: score models on a benchmark, from their answers or by asking them.

Reads a benchmark folder (or a foreign benchmark file) and predictions files or models; writes
`report.md`, `report.json`, `answers-<model>.jsonl` and a chart. Entry: `evaluate(EvalOptions(...))` in
vhmine.eval.job (the Python API's `vhmine.api.evaluate`). score reads and scores answers, report writes
the tables and chart, metrics holds the measures, predictions the readers of each harness's result files.
The yes/no reading rules and `match` are in vhmine.rules, below every stage.
"""
