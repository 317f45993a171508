"""Stage 9, eval: score models on a benchmark, from their answers or by asking them.

Reads a benchmark (a folder written by `vhmine export`, or a foreign one: HallusionBench's JSON, POPE's JSON
lines, MMVP's folder; vhmine.formats) and, per model, either a predictions file (vhmine.eval.predictions:
vhmine's own with `id` and `answer`, a HallusionBench result file, VLMEvalKit's `<model>_<dataset>.xlsx`,
lmms-eval's `--log_samples` JSONL or MMVP's answer.jsonl) or the model itself through vhmine.llm
(OpenAI-compatible; answers cached; vhmine.eval.ask asks, with the options of vhmine.eval.options). This module
runs the stage; score reads and scores the answers, report writes the tables and chart, and the store is read
through vhmine.curate only. Writes `--out DIR`: `report.md` (tables, several models side by side),
`report.json` (every number, the benchmark's name and sha256 (formats.identity, no path), the yes/no rule, the OEQ
scorer and the judge's model and prompt; every figure's 95% interval beside it, `intervals`, and `comparisons`:
every two models' paired differences, vhmine.eval.units;
and `across_models`: each item's number of models that failed it, the transfer table, the items that fool every
model, vhmine.eval.across), `answers-<model>.jsonl` (each answer, how it was read, right or wrong and why; one
file per model, named in report.json's `answers_file`, and those of models an earlier run here scored but this
one does not are removed), `accuracy_by_mode.png` and `report.html` (vhmine.eval.html_report: every item with
its image and each model's answer, failures first, filters; one file that opens offline). Answers from
`--predictions` and from `--model` give the same report. `--out` must be a new or empty folder, or one `vhmine
eval` wrote (its report.json, written first, says so: files.check_owned), so a report never lands in a photo
folder.

YNQ answers are read by a named rule (vhmine.rules.answers: vhtest, pope, strict); answers no rule can
read are counted and reported, never taken as "no". OEQ answers are scored by `match` (a reference
answer appears in the answer, words normalized), by an LLM judge (`judge`), or by the verdicts on the
model's responses in the curation store (`labels`: the workers' majority where they labelled the
response, else probe's rule or judge; curate.work.response_verdicts, read by vhmine.eval.labels; an answer labelled
"no answer" is scored wrong and counted apart). With a judge, `judge_agreement`
adds Cohen's kappa between the judge's verdicts and the workers' majority on the same answers. `--rule mmvp`
instead grades every answer as MMVP's gpt_grader.py does (vhmine.eval.mmvp, vhmine.rules.mmvp).

A request that got no answer (from the model, or from the judge) is never scored: the item is listed
as failed with its reason, left out of every figure, and the result is partial. A missing or rejected
key, an endpoint that is down or unreachable, or a model it does not serve stops the run with the
reason (the client's own stop, as in probe), and nothing is written.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from vhmine import formats as F
from vhmine.bench import OEQ, Benchmark
from vhmine.errors import EvalError
from vhmine.eval import intervals
from vhmine.eval import metrics as MT
from vhmine.eval import mmvp as MM
from vhmine.eval.ask import (  # noqa: F401  (eval's public names, importable from here)
    YNQ_SUFFIX,
    budget_for,
    interrupted_message,
    judge_mmvp,
    judge_oeq,
    llm_options,
    prompt_of,
    run_model,
)
from vhmine.eval.labels import RIGHT, store_labels, store_verdicts
from vhmine.eval.options import MMVP, OEQ_SCORERS, EvalOptions
from vhmine.eval.predictions import load_predictions, read_predictions  # noqa: F401
from vhmine.eval.report import (
    HB_KEYS,
    YNQ_KEYS,
    _kappa,
    bar_chart,
    figure_values,
    figures_line,
    keyed_line,
    kinds_line,
    markdown,
    mmvp_line,
    pair_groups_line,
)
from vhmine.eval.score import (  # noqa: F401  (eval's public names, importable from here)
    ModelAnswers,
    group_sizes,
    judge_agreement,
    match_oeq,
    score,
)
from vhmine.eval.units import attach_intervals, report_comparisons
from vhmine.files import atomic_write, atomic_write_text, check_owned, check_writable, write_failed

log = logging.getLogger(__name__)


def _judge_record(model: str | None, scorer: str = "judge") -> dict:
    if scorer == MMVP:  # MMVP's grader: its system message and prompt, named by their hash
        from vhmine.rules import grader_id

        return {"judge": f"llm:{model or '?'} {grader_id()}", "grader": grader_id()}
    from vhmine.rules import judge_name, judge_prompt

    return {"judge": judge_name(model or "?"), "judge_prompt": judge_prompt().id}


def _mmvp_options(opts: EvalOptions) -> EvalOptions:
    """`--rule mmvp`'s options checked: a judge grades every answer as MMVP's gpt_grader.py does (its own judge,
    gpt-4-0314, is retired), so there is no other OEQ scorer and no yes/no rule."""
    if not opts.judge:
        raise EvalError(
            "--rule mmvp grades every answer with a judge, as MMVP's gpt_grader.py does: pass --judge MODEL (MMVP "
            "used gpt-4-0314, which OpenAI has retired; any OpenAI-compatible model with --base-url)"
        )
    if opts.oeq not in (None, MMVP):
        raise EvalError(f"--rule mmvp grades open and yes/no answers alike with MMVP's grader: drop --oeq {opts.oeq}")
    if opts.judge_agreement:
        raise EvalError(
            "--judge-agreement compares probe's judge with workers' labels: it does not go with --rule mmvp"
        )
    return replace(opts, oeq=MMVP)


# --- the report (tables and chart: report) ----------------------------------------------------


@dataclass
class EvalResult:
    out: Path
    report: dict

    @property
    def partial(self) -> bool:
        """Some requests got no answer: those items are not scored (the CLI exits with status 3)."""
        return any(m.get("failed") for m in self.report["models"].values())

    def compared(self, a: str, b: str) -> str:
        """`vhmine eval --compare A B`'s lines: A - B on every figure, overall and per mode, with its interval."""
        from vhmine.eval.interval_text import compare_header, compare_lines

        lines = compare_lines(self.report.get("comparisons") or [], a, b)
        return "\n".join([compare_header(a, b), *lines])

    def summary(self) -> str:
        lines = []
        for name, m in self.report["models"].items():
            o = m["metrics"]["overall"]
            lines.append(
                f"  {name}: {figures_line(o)}"
                + (f", {o['unreadable']} unreadable" if o.get("unreadable") else "")
                + (f", {_unjudged(m['oeq_unjudged'], self.report['oeq']['scorer'])}" if m.get("oeq_unjudged") else "")
                + (f", {m['oeq_no_answer']} open answers that do not answer" if m.get("oeq_no_answer") else "")
                + (
                    f"; {m['failed']} failed, not scored ("
                    + ", ".join(f"{st} {k}" for st, k in m["failed_by_status"].items())
                    + ")"
                    if m.get("failed")
                    else ""
                )
            )
            figures = figure_values(m)
            if len(m["metrics"].get("kinds", {})) > 1:
                lines.append("    " + kinds_line(m["metrics"]["kinds"]))
            if "tp" in o:
                lines.append("    " + keyed_line("yes/no", figures, YNQ_KEYS))
            if o.get("pair_groups"):
                lines.append("    " + pair_groups_line(o["pair_groups"]))
            if m.get("hallusionbench"):
                lines.append("    " + keyed_line("HallusionBench", figures, HB_KEYS))
            if "mmvp" in m:
                lines.append("    " + mmvp_line(m["mmvp"]))
            if "judge_agreement" in m:
                a = m["judge_agreement"]
                lines.append(
                    f"    judge vs workers: Cohen's kappa {_kappa(a['kappa'])} over {a['items']} open answer(s) "
                    f"both judged ({a['agree']} agree)"
                )
            for f in m.get("failed_items", [])[:5]:
                lines.append(f"    no answer: {f['id']}: {f['why']}")
            if m.get("failed", 0) > 5:
                lines.append(f"    ... and {m['failed'] - 5} more (report.json)")
        if self.partial:
            lines.append(
                "partial run: failed items are left out of every figure; rerun the same command to ask only "
                "those (answers are cached)"
            )
        from vhmine.files import shown_path

        where = shown_path(self.out)
        lines.append(
            f"report: {shown_path(self.out / 'report.md')}   (every number in {where}/report.json, the chart"
            f" {where}/accuracy_by_mode.png, each answer and how it was read in {where}/answers-<model>.jsonl; browse"
            f" the failures in {where}/report.html)"
        )
        return "\n".join(lines)


def _unjudged(n: int, scorer: str) -> str:
    """The summary's words for open answers with no verdict (scored wrong): what the judge or the store said."""
    answers = "open answer" if n == 1 else "open answers"
    if scorer == "labels":
        return f"{n} {answers} with no workers' verdict (tied or not labelled), scored wrong"
    return f"{n} {answers} the judge called unclear, scored wrong"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def answers_files(models: Sequence[str]) -> dict[str, str]:
    """model name -> its answers file's name, one per model: `answers-<name>.jsonl` where the name is safe as it
    stands, else its safe form and 8 hex digits of its sha256 (`a/b` and `a_b` are two files)."""
    import hashlib

    out = {}
    for m in models:
        safe = _safe(m)
        out[m] = (
            f"answers-{safe}.jsonl"
            if safe == m
            else f"answers-{safe}-{hashlib.sha256(m.encode('utf-8')).hexdigest()[:8]}.jsonl"
        )
    folded = [f.lower() for f in out.values()]  # a case-insensitive disk (macOS, Windows) must keep them apart too
    clash = next((m for m, f in out.items() if folded.count(f.lower()) > 1), None)
    if clash is not None:
        raise EvalError(
            f"two models' answers would share the file {out[clash]} (names that differ only in case): "
            "name them apart (--predictions NAME=FILE)"
        )
    return out


def _read_runs(bench: Benchmark, predictions: Sequence[tuple[str, Path]]) -> list[ModelAnswers]:
    """One ModelAnswers per name. A harness writes a file per dataset or task (VLMEvalKit's `<model>_<name>_YNQ.xlsx`
    and `..._OEQ.xlsx`, lmms-eval's `samples_vhmine_ynq.jsonl`, ...): files given under one name are merged."""
    runs: dict[str, ModelAnswers] = {}
    given: dict[str, str] = {}  # the files as typed, for messages (the report keeps their names only)
    for name, path in predictions:
        got = read_predictions(path, bench)
        run = runs.get(name)
        if run is None:
            given[name] = str(path)
            # the file's name, not its folder: a report is shared, a home directory is not
            runs[name] = ModelAnswers(
                name, got.answers, f"predictions:{Path(path).name}", dict(got.failures), got.harness, got.lines
            )
            continue
        twice = sorted(set(got.answers).union(got.failures) & (set(run.answers) | set(run.failures)))
        if twice:
            raise EvalError(
                f"{name}: item {twice[0]!r} is answered in {path} and in {given[name]}: give each item's "
                "answer once per model (or name the runs apart)"
            )
        if (run.lines is None) != (got.lines is None):
            raise EvalError(
                f"{name}: {path} and {given[name]} are an MMVP answers file and a file of another layout: MMVP's"
                " grader pairs the lines of its own file, so give it under a NAME of its own"
            )
        run.answers.update(got.answers)
        run.failures.update(got.failures)
        if got.lines is not None:  # MMVP's files: one after the other, as their lines run
            run.lines = run.lines + got.lines
        run.source += f", {Path(path).name}"
        given[name] += f", {path}"
        if run.harness != got.harness:
            run.harness = f"{run.harness}+{got.harness}"
    return list(runs.values())


def evaluate(opts: EvalOptions) -> EvalResult:
    from vhmine.rules import get_rule

    if opts.rule == MMVP:  # MMVP's grader scores every answer, open or yes/no: it is the OEQ scorer too
        opts = _mmvp_options(opts)
    else:
        get_rule(opts.rule)  # an unknown rule fails before any model is asked
    check_owned(Path(opts.out), "vhmine eval", whole=False)  # and a folder eval may not write into
    check_writable(Path(opts.out), flag="--out")  # one line, before any model is asked
    if opts.oeq is None:  # `--judge M` alone means: judge the open answers with M
        opts = replace(opts, oeq="judge" if opts.judge else "match")
    if opts.oeq not in (*OEQ_SCORERS, MMVP):
        raise EvalError(f"--oeq {opts.oeq!r} is not one of {', '.join(OEQ_SCORERS)}")
    unnamed = [str(f) for n, f in opts.predictions if not str(n).strip()]
    if unnamed:
        raise EvalError(f"--predictions ={unnamed[0]} has no model name: pass NAME=FILE")
    if not opts.models and not opts.predictions:
        raise EvalError("nothing to score: pass --model M (ask a model) or --predictions NAME=FILE")
    if opts.judge_agreement and (opts.oeq != "judge" or not opts.judge):
        raise EvalError("--judge-agreement compares a judge's verdicts with workers' labels: pass --judge MODEL")
    budget = budget_for(opts)  # a missing price fails before anything is read or asked
    fmt = F.get_format(opts.fmt).name if opts.fmt else F.detect(opts.bench)
    # a foreign benchmark's images may live elsewhere (--images); image paths never leave that folder or the benchmark's
    if opts.images and fmt not in F.TAKES_IMAGES:
        raise EvalError(
            f"--images is for benchmarks whose images live apart ({', '.join(F.TAKES_IMAGES)}); "
            f"a {fmt} benchmark carries its own: drop --images"
        )
    bench = F.load(opts.bench, fmt, **({"images": opts.images} if opts.images else {}))
    runs = _read_runs(bench, opts.predictions)
    runs += [run_model(bench, m, opts, budget) for m in opts.models]
    names = [r.model for r in runs]
    if len(set(names)) != len(names):
        raise EvalError(
            f"two models are named {next(n for n in names if names.count(n) > 1)!r}: name each once (--predictions"
            " NAME=FILE)"
        )
    files = answers_files(names)
    has_oeq = any(it.kind == OEQ for it in bench)
    mmvp = opts.rule == MMVP
    is_hb = not mmvp and bool(bench.items) and all(it.meta.get("source") == "hallusionbench" for it in bench)
    out = Path(opts.out)
    answer_rows: dict[str, list] = {}
    report = {
        "producer": "vhmine eval",
        # its name and checksum, never the path as typed: a report is shared and the same from any folder
        "benchmark": F.identity(opts.bench, bench, fmt),
        "rule": opts.rule,
        "ynq_prompt_suffix": None if mmvp else YNQ_SUFFIX,  # mmvp: MMVP's prompt, Question + " " + Options
        "oeq": {"scorer": opts.oeq, **(_judge_record(opts.judge, opts.oeq) if opts.oeq in ("judge", MMVP) else {})},
        "modes": bench.modes(),
        "intervals": intervals.settings(),  # how every figure's `intervals` and the `comparisons` were drawn
        "models": {},
    }
    modes = bench.modes()  # the same for every model; bench.items: what a complete pair, image or group holds
    judge = report["oeq"].get("judge")
    units: dict[str, dict] = {}  # model -> the units of each figure, per scope: what the comparisons resample
    for run in runs:
        verdicts: dict[str, bool | None] = {}
        no_answer: set[str] = set()  # open answers the store's verdict says do not answer (scored wrong)
        agreement = None
        if mmvp:  # MMVP's grader: the order of an answers file checked before the judge is asked
            breaks = MM.check_run(bench, run, opts.partial)
            todo, grades = judge_mmvp(bench, run, opts, budget)
            rows, details = MM.scored(bench, run, grades)
        elif has_oeq and opts.oeq == "judge":
            verdicts = judge_oeq(bench, run, opts, budget)
            if opts.judge_agreement:  # judges disagree (HallusionBench #12): how far this one agrees with people
                agreement = judge_agreement(verdicts, store_labels(opts.db, run.model, run.answers, workers_only=True))
        elif has_oeq and opts.oeq == "labels":
            said = store_verdicts(opts.db, run.model, run.answers)
            verdicts = {iid: RIGHT.get(v) for iid, v in said.items()}
            no_answer = {iid for iid, v in said.items() if v == "no answer"}
        if not mmvp:
            rows, details = score(
                bench, run, opts.rule, verdicts, opts.oeq, opts.partial, judge=judge, no_answer=no_answer
            )
        failed = [{"id": d["id"], "why": d["failure"]} for d in details if d["read_as"] == "failed"]
        entry = {
            "source": run.source,
            **({"harness": run.harness} if run.harness else {}),
            "answers_file": files[run.model],
            "answered": len(rows),
            "failed": len(failed),  # each item one or the other
            "failed_by_status": dict(sorted(Counter(f["why"].split(":", 1)[0] for f in failed).items())),
            "failed_items": failed,
            # open answers with no verdict (judge unclear, labels tied or missing): scored wrong, counted here
            "oeq_unjudged": sum(d["read_as"] == "unjudged" for d in details),
            # open answers the store says do not answer ("I cannot tell from this image."): scored wrong, counted here
            "oeq_no_answer": sum(d["read_as"] == "no answer" for d in details),
            "metrics": MT.by_mode(rows, modes, bench.items, yes_no=not mmvp),  # mmvp reads no yes or no
        }
        if mmvp:  # MMVP's figure: pairs with both right, over the benchmark's complete pairs (and the file's lines)
            pairs = MT.group_accuracy(rows, "pair_id", MT.sizes_of(bench.items, "pair_id"))
            entry["mmvp"] = MM.record(todo, grades, pairs, breaks)
        if agreement is not None:
            entry["judge_agreement"] = agreement
        if is_hb:
            entry["hallusionbench"] = MT.hallusionbench(rows, bench.items)
        units[run.model] = attach_intervals(entry, rows, modes, bench.items, hallusionbench=is_hb)
        report["models"][run.model] = entry
        answer_rows[run.model] = details
    from vhmine.eval.across import across_models

    report["comparisons"] = report_comparisons(units, modes)  # every two models, every figure both have
    report["across_models"] = across_models(answer_rows, modes)
    check_owned(out, "vhmine eval", whole=False)  # again: the folder may have changed while models answered
    try:
        _write(out, report, answer_rows, files, bench)
    except OSError as err:  # a full disk, a folder made read-only meanwhile: one line, as the other stages say it
        raise write_failed(
            out,
            err,
            "the report there is incomplete",
            "free some space or choose another --out, and run the same command again (answers from --model are"
            " cached, not asked again)",
        ) from None
    return EvalResult(out, report)


def _write(out: Path, report: dict, answer_rows: dict, files: dict, bench: Benchmark) -> None:
    from vhmine.eval import html_report

    # report.json first: it marks the folder as eval's, so a run stopped after it can still write here
    atomic_write_text(out / "report.json", json.dumps(report, indent=1, ensure_ascii=False))
    for model, details in answer_rows.items():
        atomic_write_text(out / files[model], "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in details))
    for old in out.glob("answers-*.jsonl"):  # an earlier run's models that this report does not hold
        if old.name not in files.values():
            old.unlink()
    atomic_write_text(out / "report.md", markdown(report))
    atomic_write(out / "accuracy_by_mode.png", lambda tmp: bar_chart(report, tmp))
    html_report.write(report, bench, answer_rows, out)
