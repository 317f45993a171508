"""Stage 9, eval: score models on a benchmark, from their answers or by asking them.

Reads a benchmark (a folder written by `vhmine export`, or a foreign file: HallusionBench's JSON,
POPE's JSON lines; vhmine.formats) and, per model, either a predictions file (one answer per item
id: JSON lines / JSON / CSV / TSV with `id` and `answer`, or a HallusionBench result file with
`model_prediction`) or the model itself through vhmine.llm (OpenAI-compatible; answers cached).
Writes `--out DIR`: `report.md` (tables, several models side by side), `report.json` (every number,
the yes/no rule, the OEQ scorer and the judge's model and prompt), `answers-<model>.jsonl` (each
answer, how it was read, right or wrong) and `accuracy_by_mode.png`.

YNQ answers are read by a named rule (vhmine.answers: vhtest, pope, strict); answers no rule can
read are counted and reported, never taken as "no". OEQ answers are scored by `match` (a reference
answer appears in the answer, words normalized), by an LLM judge (`judge`), or by the verdicts on the
model's responses in the curation store (`labels`: the workers' majority where they labelled the
response, else probe's rule or judge; curate.response_verdicts).

A request that got no answer (from the model, or from the judge) is never scored: the item is listed
as failed with its reason, left out of every figure, and the result is partial. A missing or rejected
key, an endpoint that is down or unreachable, or a model it does not serve stops the run with the
reason (the client's own stop, as in probe), and nothing is written.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Sequence

from . import formats as F
from . import metrics as MT
from .bench import OEQ, YNQ, BenchItem, Benchmark
from .errors import CostCapError, EvalError, FormatError
from .eval_report import _pct, bar_chart, markdown

log = logging.getLogger(__name__)

YNQ_SUFFIX = " ONLY answer yes or no."  # what VHTest's YNQ script appends to every question
OEQ_SCORERS = ("match", "judge", "labels")


# --- predictions files -------------------------------------------------------------------------------

def _pick(rec: dict, names: Sequence[str]):
    for n in names:
        if n in rec:
            return rec[n]
    return None


_ID = ("id", "question_id", "index")
_ANSWER = ("answer", "prediction", "model_prediction", "response", "text")


def load_predictions(path: Path, bench: Benchmark) -> dict[str, str]:
    """item id -> answer text; FormatError naming the file, row and field for anything unreadable."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"predictions file {path} does not exist")
    suffix = path.suffix.lower()
    rows: list[tuple[str, dict]] = []
    if suffix in (".csv", ".tsv"):
        with open(path, newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ",")
            rows = [(f"{path}, row {n}", r) for n, r in enumerate(rd, start=2)]
    else:
        text = path.read_text(encoding="utf-8")
        head = text.lstrip()[:1]
        if head == "[" or (head == "{" and suffix == ".json" and "\n{" not in text.strip()):
            try:
                data = json.loads(text)
            except ValueError as err:
                raise FormatError(f"{path}: not JSON ({err})") from None
            if isinstance(data, list) and data and isinstance(data[0], dict) and "model_prediction" in data[0] and "category" in data[0]:
                from .formats.hallusionbench import read_predictions

                preds = read_predictions(path)
                return _check_ids(preds, bench, path)
            if isinstance(data, dict):
                return _check_ids({str(k): "" if v is None else str(v) for k, v in data.items()}, bench, path)
            if not isinstance(data, list):
                raise FormatError(f"{path}: expected a list of {{id, answer}} objects or an {{id: answer}} object")
            rows = [(f"{path}, row {n}", r) for n, r in enumerate(data)]
        else:
            for n, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append((f"{path}, line {n}", json.loads(line)))
                    except ValueError as err:
                        raise FormatError(f"{path}, line {n}: not JSON ({err.args[0]})") from None
    preds: dict[str, str] = {}
    for where, r in rows:
        if not isinstance(r, dict):
            raise FormatError(f"{where}: not an object with id and answer")
        rid, ans = _pick(r, _ID), _pick(r, _ANSWER)
        if rid is None:
            raise FormatError(f"{where}, field id: missing (one of {', '.join(_ID)})")
        if ans is None and not any(a in r for a in _ANSWER):
            raise FormatError(f"{where}, field answer: missing (one of {', '.join(_ANSWER)})")
        rid = str(rid)
        if rid in preds:
            raise FormatError(f"{where}, field id: {rid!r} appears twice")
        preds[rid] = "" if ans is None else str(ans)
    return _check_ids(preds, bench, path)


def _check_ids(preds: dict[str, str], bench: Benchmark, path: Path) -> dict[str, str]:
    ids = bench.by_id()
    unknown = [k for k in preds if k not in ids]
    if unknown:
        # POPE-style files name items by their bare question_id: accept "<file>:<n>" ids by suffix
        alias = {i.split(":", 1)[1]: i for i in ids if ":" in i}
        if all(k in alias for k in unknown) and len(alias) == len(ids):
            return {alias.get(k, k): v for k, v in preds.items()}
        raise FormatError(f"{path}: {len(unknown)} id(s) are not in the benchmark {bench.source or bench.name} "
                          f"(first: {unknown[0]!r}): is it the right benchmark?")
    return preds


# --- scoring -----------------------------------------------------------------------------------------

def _norm_words(text: str) -> str:
    from .modes import normalize_answer

    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", (text or "").lower())
    return " " + " ".join(normalize_answer(w) for w in words) + " "


def match_oeq(answer: str, references: Sequence[str]) -> bool:
    """Any reference answer appears in the answer as whole words (case, punctuation and number words aside)."""
    a = _norm_words(answer)
    return any(_norm_words(r).strip() and _norm_words(r) in a for r in references)


@dataclass
class ModelAnswers:
    model: str
    answers: dict[str, str]  # item id -> answer text (items whose request failed are not here)
    source: str  # "predictions:<file>" or "endpoint:<url>"
    failures: dict[str, str] = field(default_factory=dict)  # item id -> "<status>: <why no answer>"; never scored


@dataclass(frozen=True)
class EvalOptions:
    bench: Path
    out: Path
    models: Sequence[str] = ()  # run these through vhmine.llm
    predictions: Sequence[tuple[str, Path]] = ()  # (model name, file) pairs
    fmt: Optional[str] = None  # the benchmark's format [default: detected]
    images: Optional[Path] = None  # where a foreign benchmark's images are
    rule: str = "vhtest"  # the yes/no rule
    oeq: Optional[str] = None  # match, judge or labels; None: judge when `judge` is given, else match
    judge: Optional[str] = None  # judge model (oeq="judge")
    base_url: Optional[str] = None
    db: Optional[str] = None  # the store, for oeq="labels"
    partial: bool = False  # score only the items that have an answer
    llm: dict = field(default_factory=dict)  # further vhmine.llm.LLMOptions fields (cache, max_cost, ...)


def score(bench: Benchmark, ans: ModelAnswers, rule: str, oeq_verdicts: dict[str, Optional[bool]], oeq: str,
          partial: bool = False) -> tuple[list[MT.Scored], list[dict]]:
    """Scored rows for the metrics, and one detail record per item."""
    from .answers import get_rule

    parse = get_rule(rule).parse
    missing = [it.id for it in bench if it.id not in ans.answers and it.id not in ans.failures]
    if missing and not partial:
        raise EvalError(f"{len(missing)} of {len(bench)} items have no answer from {ans.model} in {ans.source} "
                        f"(first: {missing[0]}): pass --partial to score only the answered ones")
    rows, details = [], []
    for it in bench:
        base = {"id": it.id, "mode": it.mode, "kind": it.kind, "question": it.question, "reference": it.reference()}
        if it.id in ans.failures:  # no answer (or no judge verdict) came back: listed, never scored
            details.append({**base, "answer": ans.answers.get(it.id), "read_as": "failed", "correct": None,
                            "failure": ans.failures[it.id]})
            continue
        if it.id not in ans.answers:
            continue
        text = ans.answers[it.id]
        said = None
        if it.kind == YNQ:
            said = parse(text)
            correct = said is not None and said == it.truth
            how = "unreadable" if said is None else ("yes" if said else "no")
        else:
            v = match_oeq(text, it.answers) if oeq == "match" else oeq_verdicts.get(it.id)
            correct = bool(v)
            how = {True: "right", False: "wrong", None: "unjudged"}[v]
        rows.append(MT.Scored(it.id, it.mode, it.kind, correct, said, it.truth, it.pair_id, it.image_id, it.meta))
        details.append({**base, "answer": text, "read_as": how, "correct": correct})
    return rows, details


# --- asking models (vhmine.llm) --------------------------------------------------------------------

def prompt_of(item: BenchItem) -> str:
    return item.question + (YNQ_SUFFIX if item.kind == YNQ else "")


def _llm_options(opts: EvalOptions, model: str):
    from .llm import LLMOptions

    return LLMOptions(model=model, base_url=opts.base_url, **opts.llm)


def _budget(opts: EvalOptions):
    """One cost budget for every model and judge of an eval run, so `--max-cost` caps the run, not each client.

    With a cap, every model to be asked must have a price: checked here, before any is asked.
    """
    from .llm import Budget, load_prices, price_of

    budget = Budget(opts.llm.get("max_cost"))
    if budget.cap is not None:
        table = load_prices(opts.llm.get("prices"))
        asked = list(opts.models) + ([opts.judge] if opts.judge and opts.oeq == "judge" else [])
        missing = sorted({m for m in asked if price_of(m, table) is None})
        if missing:
            raise EvalError(f"--max-cost needs a price for {', '.join(missing)}, which the built-in table lacks: "
                            'pass --prices FILE with {"' + missing[0] + '": {"input": USD per 1M tokens, "output": ...}}')
    return budget


def _stop_if_fatal(llm, outcomes, asking: str) -> None:
    """EvalError when the run cannot go on: the client stopped (no or rejected key, endpoint down, no such
    model; a cost cap is a clean stop, not this), or every request failed as unavailable (unreachable)."""
    stop = llm.stopped
    failed = [o for o in outcomes if not o.ok]
    if stop is None and failed and len(failed) == len(outcomes) and all(o.status == "unavailable" for o in failed):
        stop = failed[-1].error
    if stop is not None and not isinstance(stop, CostCapError):
        raise EvalError(f"eval stopped while asking {asking}, nothing scored: {stop}")


def run_model(bench: Benchmark, model: str, opts: EvalOptions, budget=None) -> ModelAnswers:
    from .llm import LLM, ChatRequest

    reqs = []
    for it in bench:
        imgs = [] if it.image is None and it.image_data is None else [bench.image_bytes(it)]
        reqs.append(ChatRequest(prompt_of(it), images=imgs))
    out = ModelAnswers(model, {}, f"endpoint:{opts.base_url or 'OPENAI_BASE_URL'}")
    with LLM(_llm_options(opts, model), budget) as llm:
        out.source = f"endpoint:{llm.endpoint}"
        llm.check_prices([model])
        outcomes = llm.chat_many(reqs, desc=f"eval {model}")
        _stop_if_fatal(llm, outcomes, model)
        for o in outcomes:
            iid = bench.items[o.index].id
            if o.ok:
                out.answers[iid] = o.answer.text
            else:
                out.failures[iid] = f"{o.status}: {o.reason}"
    return out


def judge_oeq(bench: Benchmark, ans: ModelAnswers, opts: EvalOptions, budget=None) -> dict[str, Optional[bool]]:
    """OEQ verdicts from the LLM judge: the same prompt and parser as `vhmine probe` (judge.py).

    "unclear" is a verdict (none: scored wrong, counted as unjudged); a judge request that failed is
    not: its item moves to `ans.failures` and is left out of the score.
    """
    from .judge import judge_prompt, judge_request, parse_verdict
    from .llm import LLM

    if not opts.judge:
        raise EvalError("--oeq judge needs a judge model: pass --judge MODEL")
    prompt = judge_prompt()
    items = [it for it in bench if it.kind == OEQ and it.id in ans.answers and it.id not in ans.failures]
    reqs = [judge_request(opts.judge, it.question, it.answers, ans.answers[it.id], prompt) for it in items]
    out: dict[str, Optional[bool]] = {}
    with LLM(_llm_options(opts, opts.judge), budget) as llm:
        llm.check_prices([opts.judge])
        outcomes = llm.chat_many(reqs, desc=f"judge {ans.model}")
        _stop_if_fatal(llm, outcomes, f"the judge {opts.judge}")
        for o in outcomes:
            iid = items[o.index].id
            if not o.ok:
                ans.failures[iid] = f"{o.status}: the judge {opts.judge} gave no verdict: {o.reason}"
                continue
            out[iid] = {"correct": True, "incorrect": False}.get(parse_verdict(o.answer.text))  # unclear: no verdict
    return out


def _judge_record(model: Optional[str]) -> dict:
    from .judge import judge_name, judge_prompt

    return {"judge": judge_name(model or "?"), "judge_prompt": judge_prompt().id}


def store_labels(db: Optional[str], model: str, answers: dict[str, str]) -> dict[str, Optional[bool]]:
    """instance id -> the store's verdict on `model`'s response that says the same as `answers[id]`.

    The verdict that counts (curate.response_verdicts): the workers' majority where they labelled the
    response, else probe's rule or judge; tied workers: None. A verdict judges one answer text, so a
    response with other words (another prompt, another endpoint) does not score this answer; two
    matching responses with different verdicts give None.
    """
    from sqlalchemy import select

    from .curate import response_verdicts
    from .store import Response, open_store

    with open_store(db) as store:
        with store.session(write=False) as s:
            rows = [(rid, iid) for rid, iid, text in s.execute(
                select(Response.id, Response.instance_id, Response.answer).where(Response.model == model))
                if iid in answers and (text or "").strip() == (answers[iid] or "").strip()]
        counts = response_verdicts(store, [rid for rid, _ in rows])
    found: dict[str, set] = {}
    for rid, iid in rows:
        found.setdefault(iid, set()).add(counts[rid].verdict)
    return {iid: {"correct": True, "hallucinated": False}.get(v.pop()) if len(v) == 1 else None
            for iid, v in found.items()}


# --- the report (tables and chart: eval_report) ----------------------------------------------------

@dataclass
class EvalResult:
    out: Path
    report: dict

    @property
    def partial(self) -> bool:
        """Some requests got no answer: those items are not scored (the CLI exits with status 3)."""
        return any(m.get("failed") for m in self.report["models"].values())

    def summary(self) -> str:
        lines = [f"report: {self.out / 'report.md'}"]
        for name, m in self.report["models"].items():
            o = m["metrics"]["overall"]
            lines.append(f"  {name}: accuracy {_pct(o['accuracy'])}% over {o['n']} item(s)"
                         + (f", {o['unreadable']} unreadable" if o.get("unreadable") else "")
                         + (f", {m['oeq_unjudged']} open answers unjudged" if m.get("oeq_unjudged") else "")
                         + (f"; {m['failed']} failed, not scored (" + ", ".join(f"{st} {k}" for st, k in m["failed_by_status"].items())
                            + ")" if m.get("failed") else ""))
            for f in m.get("failed_items", [])[:5]:
                lines.append(f"    no answer: {f['id']}: {f['why']}")
            if m.get("failed", 0) > 5:
                lines.append(f"    ... and {m['failed'] - 5} more (report.json)")
        if self.partial:
            lines.append("partial run: failed items are left out of every figure; rerun the same command to ask only "
                         "those (answers are cached)")
        return "\n".join(lines)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def evaluate(opts: EvalOptions) -> EvalResult:
    from .answers import get_rule

    get_rule(opts.rule)  # an unknown rule fails before any model is asked
    if opts.oeq is None:  # `--judge M` alone means: judge the open answers with M
        opts = replace(opts, oeq="judge" if opts.judge else "match")
    if opts.oeq not in OEQ_SCORERS:
        raise EvalError(f"--oeq {opts.oeq!r} is not one of {', '.join(OEQ_SCORERS)}")
    if not opts.models and not opts.predictions:
        raise EvalError("nothing to score: pass --model M (ask a model) or --predictions NAME=FILE")
    budget = _budget(opts)  # a missing price fails before anything is read or asked
    fmt = F.get_format(opts.fmt).name if opts.fmt else F.detect(opts.bench)
    # a foreign benchmark's images may live elsewhere (--images); image paths never leave that folder or the benchmark's
    if opts.images and fmt not in F.TAKES_IMAGES:
        raise EvalError(f"--images is for benchmarks whose images live apart ({', '.join(F.TAKES_IMAGES)}); "
                        f"a {fmt} benchmark carries its own: drop --images")
    bench = F.load(opts.bench, fmt, **({"images": opts.images} if opts.images else {}))
    runs: list[ModelAnswers] = [ModelAnswers(n, load_predictions(p, bench), f"predictions:{p}") for n, p in opts.predictions]
    runs += [run_model(bench, m, opts, budget) for m in opts.models]
    names = [r.model for r in runs]
    if len(set(names)) != len(names):
        raise EvalError(f"two models are named {next(n for n in names if names.count(n) > 1)!r}: name each once (--predictions NAME=FILE)")
    has_oeq = any(it.kind == OEQ for it in bench)
    is_hb = bool(bench.items) and all(it.meta.get("source") == "hallusionbench" for it in bench)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"producer": "vhmine eval", "benchmark": {"name": bench.name, "source": bench.source, "items": len(bench)},
              "rule": opts.rule, "ynq_prompt_suffix": YNQ_SUFFIX,
              "oeq": {"scorer": opts.oeq, **(_judge_record(opts.judge) if opts.oeq == "judge" else {})},
              "modes": bench.modes(), "models": {}}
    for run in runs:
        verdicts: dict[str, Optional[bool]] = {}
        if has_oeq and opts.oeq == "judge":
            verdicts = judge_oeq(bench, run, opts, budget)
        elif has_oeq and opts.oeq == "labels":
            verdicts = store_labels(opts.db, run.model, run.answers)
        rows, details = score(bench, run, opts.rule, verdicts, opts.oeq, opts.partial)
        failed = [{"id": d["id"], "why": d["failure"]} for d in details if d["read_as"] == "failed"]
        entry = {"source": run.source, "answered": len(rows), "failed": len(failed),  # each item one or the other
                 "failed_by_status": dict(sorted(Counter(f["why"].split(":", 1)[0] for f in failed).items())),
                 "failed_items": failed,
                 # open answers with no verdict (judge unclear, labels tied or missing): scored wrong, counted here
                 "oeq_unjudged": sum(d["read_as"] == "unjudged" for d in details),
                 "metrics": MT.by_mode(rows, bench.modes())}
        if is_hb:
            entry["hallusionbench"] = MT.hallusionbench(rows)
        report["models"][run.model] = entry
        with open(out / f"answers-{_safe(run.model)}.jsonl", "w", encoding="utf-8") as f:
            for d in details:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    bar_chart(report, out / "accuracy_by_mode.png")
    return EvalResult(out, report)
