"""An lmms-eval task folder: `lmms-eval --tasks vhmine --include_path FOLDER` runs it as it is.

Writes (and reads back, with pyarrow alone) `data/ynq.parquet` and `data/oeq.parquet` (one per kind,
the Hugging Face layout of formats.hf: images embedded as the `datasets` Image feature, so a document's
`image` is a PIL image), one task YAML per kind (`vhmine_ynq.yaml`, `vhmine_oeq.yaml`: `dataset_path:
parquet` with `data_files` relative to the YAML, which lmms-eval resolves against the YAML's folder),
the group `vhmine.yaml` (size-weighted accuracy over both tasks, i.e. the overall accuracy) and
`utils.py`: doc_to_visual, doc_to_text (the question plus the suffix `vhmine eval` adds to a yes/no
question), process_results and the aggregations: accuracy per task and per mode (`<mode>_acc`), and for yes/no
precision, recall, F1, the yes ratio of the model's answers (lmms-eval's POPE task counts the truths
instead) and the unreadable count, as vhmine.eval.metrics defines them; accuracy's records carry a 0/1 `score`,
so lmms-eval prints accuracy's standard error (its Stderr_CLT column). utils.py embeds vhmine.rules.harness (the
default yes/no rule and the `match` scorer of vhmine eval) so it needs no vhmine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from vhmine.bench import OEQ, YNQ, Benchmark
from vhmine.errors import FormatError
from vhmine.formats import hf
from vhmine.rules import harness_source

GROUP = "vhmine"
TASKS = {YNQ: "vhmine_ynq", OEQ: "vhmine_oeq"}
DATA = {YNQ: "data/ynq.parquet", OEQ: "data/oeq.parquet"}
YNQ_METRICS = ("accuracy", "precision", "recall", "f1", "yes_ratio", "unreadable")
OEQ_METRICS = ("accuracy",)

_HOOKS = '''

# --- lmms-eval's hooks (task YAMLs name them with !function utils.<name>) ---------------------------

def doc_to_visual(doc):
    return [] if doc["image"] is None else [doc["image"].convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """The question as `vhmine eval` asks it (yes/no: plus YNQ_SUFFIX), inside the model's pre/post prompt."""
    kw = lmms_eval_specific_kwargs or {}
    suffix = YNQ_SUFFIX if doc["kind"] == "YNQ" else ""
    return f"{kw.get('pre_prompt', '')}{doc['question']}{suffix}{kw.get('post_prompt', '')}"


def doc_to_target(doc):
    if doc["kind"] == "YNQ":
        return "yes" if doc["truth"] else "no"
    return " or ".join(doc["answers"])


def process_results(doc, results):
    """One record per answer, under every metric name of its task; the aggregations below count them."""
    answer = results[0] if results else ""
    if doc["kind"] == "YNQ":
        said = read_yes_no(answer)  # None: unreadable, which is wrong, never "no"
        correct = said is not None and said == doc["truth"]
    else:
        said = None
        correct = bool(match_oeq(answer, doc["answers"]))
    record = {"id": doc["id"], "mode": doc["mode"], "kind": doc["kind"], "answer": answer, "said": said,
              "truth": doc["truth"], "correct": correct}
    # accuracy's records carry a 0/1 `score`: lmms-eval prints its standard error (Stderr_CLT, sd / sqrt(n)) for
    # it; the other metrics are no mean of a per-item score, and a score on their records would give them accuracy's
    return {
        name: {**record, "score": float(correct)} if name == "accuracy" else record for name in METRICS[doc["kind"]]
    }


def _ratio(a, b):
    return a / b if b else None


def aggregate_accuracy(results):
    return _ratio(sum(r["correct"] for r in results), len(results))


def _confusion(results):
    tp = sum(1 for r in results if r["truth"] and r["said"] is True)
    fp = sum(1 for r in results if r["truth"] is False and r["said"] is True)
    return tp, fp, sum(1 for r in results if r["truth"])


def aggregate_precision(results):
    tp, fp, _ = _confusion(results)
    return _ratio(tp, tp + fp)


def aggregate_recall(results):
    tp, _, truth_yes = _confusion(results)
    return _ratio(tp, truth_yes)


def aggregate_f1(results):
    """2TP / (said yes + truth yes): 0 when nothing said "yes" was right."""
    tp, fp, truth_yes = _confusion(results)
    return _ratio(2 * tp, tp + fp + truth_yes)


def aggregate_yes_ratio(results):
    """The share of the MODEL's answers that read "yes" (not the share of yes truths)."""
    return _ratio(sum(1 for r in results if r["said"] is True), len(results))


def aggregate_unreadable(results):
    return sum(1 for r in results if r["said"] is None)


def mode_accuracy(mode):
    def aggregate(results):
        return aggregate_accuracy([r for r in results if r["mode"] == mode])
    aggregate.__name__ = f"accuracy of {mode}"
    return aggregate
'''


def _safe(mode: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", mode.lower()).strip("_") or "mode"


def mode_metrics(modes: list[str]) -> dict[str, str]:
    """mode -> its accuracy metric's name, `<mode>_acc` (letters, digits and _; distinct). Not `..._accuracy`:
    lmms-eval's group pools every subtask metric whose name CONTAINS "accuracy" by task size, which would
    mix a mode's yes/no and open accuracy with the wrong weights."""
    out: dict[str, str] = {}
    for m in modes:
        base, k = _safe(m), 2
        name = f"{base}_acc"
        while name in out.values() or name in YNQ_METRICS:
            name, k = f"{base}_{k}_acc", k + 1
        out[m] = name
    return out


def _rules_source() -> str:
    src = harness_source()
    return src[src.index('"""', 3) + 3 :].lstrip("\n")  # without the module docstring: utils.py has its own


def utils_source(bench: Benchmark) -> str:
    per_kind = {k: mode_metrics(bench.select(kind=k).modes()) for k in bench.kinds()}
    metrics = {k: list(YNQ_METRICS if k == YNQ else OEQ_METRICS) + list(per_kind[k].values()) for k in per_kind}
    lines = [
        '"""lmms-eval hooks of the vhmine tasks (written by `vhmine export --format lmms-eval`; needs no vhmine).',
        "",
        "The yes/no rule and the open-answer scorer are vhmine eval's defaults (VHTest's classify_response;",
        "`match`), copied here so that lmms-eval scores answers exactly as `vhmine eval` does.",
        '"""',
        "",
        _rules_source(),
        "METRICS = " + json.dumps(metrics, indent=1, ensure_ascii=False),
        _HOOKS,
        "",
        "# per-mode accuracy: one aggregation per metric the task YAMLs name",
    ]
    for mode, name in dict.fromkeys((m, n) for k in per_kind for m, n in per_kind[k].items()):
        lines.append(f"aggregate_{name} = mode_accuracy({json.dumps(mode, ensure_ascii=False)})")
    return "\n".join(lines) + "\n"


def _metric(name: str, fn: str, higher: bool = True) -> str:
    return (
        f"  - metric: {name}\n    aggregation: !function utils.{fn}\n    higher_is_better:"
        f" {'true' if higher else 'false'}\n"
    )


def task_yaml(bench: Benchmark, kind: str) -> str:
    modes = mode_metrics(bench.select(kind=kind).modes())
    what = "yes/no" if kind == YNQ else "open"
    out = (
        f"# vhmine {what} questions (written by `vhmine export --format lmms-eval`)\ntask: {TASKS[kind]}\ndataset_path:"
        f" parquet\ndataset_kwargs:\n  data_files:\n    test: {DATA[kind]}\ntest_split: test\noutput_type:"
        " generate_until\ndoc_to_visual: !function utils.doc_to_visual\ndoc_to_text: !function"
        " utils.doc_to_text\ndoc_to_target: !function utils.doc_to_target\ngeneration_kwargs:\n  max_new_tokens: 128\n"
        "  temperature: 0\n  top_p: 1.0\n  num_beams: 1\n  do_sample: false\nprocess_results: !function"
        " utils.process_results\nmetric_list:\n"
    )
    for m in YNQ_METRICS if kind == YNQ else OEQ_METRICS:
        out += _metric(m, f"aggregate_{m}", higher=m not in ("unreadable", "yes_ratio"))
    for name in modes.values():
        out += _metric(name, f"aggregate_{name}")
    out += 'lmms_eval_specific_kwargs:\n  default:\n    pre_prompt: ""\n    post_prompt: ""\n'
    return out + "metadata:\n  version: 1.0\n"


def group_yaml(bench: Benchmark) -> str:
    tasks = "".join(f"  - {TASKS[k]}\n" for k in bench.kinds())
    return (
        "# vhmine: every task of this folder; accuracy weighted by task size is the overall accuracy\n"
        f"group: {GROUP}\ntask:\n{tasks}"
        "aggregate_metric_list:\n  - metric: accuracy\n    aggregation: mean\n    weight_by_size: true\n"
        "metadata:\n  version: 1.0\n"
    )


def write(bench: Benchmark, folder: Path) -> None:
    for kind in bench.kinds():
        hf.write_parquet(bench.select(kind=kind), folder / DATA[kind])
        (folder / f"{TASKS[kind]}.yaml").write_text(task_yaml(bench, kind), encoding="utf-8")
    (folder / f"{GROUP}.yaml").write_text(group_yaml(bench), encoding="utf-8")
    (folder / "utils.py").write_text(utils_source(bench), encoding="utf-8")


def next_steps(out: str, bench: Benchmark) -> list[str]:
    """How to run the folder in lmms-eval and score its logged answers with vhmine (the export's closing lines)."""
    logs = " ".join(
        f"--predictions MODEL=results/.../<date>_samples_{TASKS[k]}.jsonl" for k in (YNQ, OEQ) if k in bench.kinds()
    )
    return [
        (
            'run it in lmms-eval (pip install lmms-eval==0.7.3 "filelock<4"): lmms-eval --model MODEL --model_args'
            f" pretrained=HUB_ID --tasks {GROUP} --include_path {out} --batch_size 1 --log_samples --output_path"
            " results/"
        ),
        f"then score its answers with vhmine's rules: vhmine eval --bench {out} {logs}",
    ]


def read(path: Path) -> Benchmark:
    path = Path(path)
    if not path.is_dir():
        return hf.read(path)
    files = [path / DATA[k] for k in (YNQ, OEQ) if (path / DATA[k]).is_file()]
    if not files:
        raise FormatError(f"{path}: no {' or '.join(DATA.values())}: not a vhmine lmms-eval folder (export it again)")
    items = [it for f in files for it in hf.read(f)]
    return Benchmark(path.name, items, path, str(path))
