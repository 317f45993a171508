"""eval's requests: the models asked through vhmine.llm, and the judge (of open answers, or of all under MMVP's rule).

Reads a Benchmark and the run's EvalOptions; writes nothing but what vhmine.llm caches. `prompt_of` is what a model
is shown (a yes/no question ends with VHTest's " ONLY answer yes or no."); `run_model` asks a model every item;
`judge_oeq` asks the judge about open answers (the prompt and parser of `vhmine probe`, vhmine.rules.judge);
`judge_mmvp` asks it about every answer with MMVP's grader (`--rule mmvp`, vhmine.eval.mmvp).
`budget_for` gives one cost budget for every model and judge of a run; `stop_if_fatal` stops the run where the client
cannot go on; `interrupted_message` says what a Ctrl-C leaves in the request cache.
"""

from __future__ import annotations

from dataclasses import replace

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark
from vhmine.errors import EvalError, Interrupted
from vhmine.eval.options import MMVP, EvalOptions
from vhmine.eval.score import ModelAnswers

YNQ_SUFFIX = " ONLY answer yes or no."  # what VHTest's YNQ script appends to every question


def prompt_of(item: BenchItem, rule: str = "vhtest") -> str:
    """What the model is shown with the image: the question, and a yes/no question VHTest's suffix; under `--rule mmvp`
    what MMVP's evaluate_mllm.py shows (Question + " " + Options; a yes/no question as `(a) Yes (b) No`), which is
    the question its grader is told was asked."""
    if rule == MMVP:
        from vhmine.rules import grading_fields

        return grading_fields(item)[0]
    return item.question + (YNQ_SUFFIX if item.kind == YNQ else "")


def llm_options(opts: EvalOptions, model: str):
    from vhmine.llm import LLMOptions

    if isinstance(opts.llm, LLMOptions):
        return replace(opts.llm, model=model, base_url=opts.base_url)
    return LLMOptions(model=model, base_url=opts.base_url, **opts.llm)


def llm_setting(opts: EvalOptions, name: str):
    """One LLMOptions field of `opts.llm` (dict or template); None where a dict lacks it."""
    return opts.llm.get(name) if isinstance(opts.llm, dict) else getattr(opts.llm, name)


def budget_for(opts: EvalOptions):
    """One cost budget for every model and judge of an eval run, so `--max-cost` caps the run, not each client.

    With a cap, every model to be asked must have a price: checked here, before any is asked.
    """
    from vhmine.llm import Budget, load_prices, price_of

    budget = Budget(llm_setting(opts, "max_cost"))
    if budget.cap is not None:
        table = load_prices(llm_setting(opts, "prices"))
        asked = list(opts.models) + ([opts.judge] if opts.judge and opts.oeq in ("judge", MMVP) else [])
        missing = sorted({m for m in asked if price_of(m, table) is None})
        if missing:
            raise EvalError(
                f"--max-cost needs a price for {', '.join(missing)}, which the built-in table lacks: "
                'pass --prices FILE with {"' + missing[0] + '": {"input": USD per 1M tokens, "output": ...}}'
            )
    return budget


def stop_if_fatal(llm, outcomes, asking: str) -> None:
    """EvalError when the run cannot go on: the client stopped (no or rejected key, endpoint down, no such
    model; a cost cap is a clean stop, not this), or every request failed as unavailable (unreachable)."""
    stop = llm.fatal_stop(outcomes)
    if stop is not None:
        raise EvalError(f"eval stopped while asking {asking}, nothing scored: {stop}")


def run_model(bench: Benchmark, model: str, opts: EvalOptions, budget=None) -> ModelAnswers:
    from vhmine.llm import LLM, ChatRequest

    reqs = []
    for it in bench:
        imgs = [] if it.image is None and it.image_data is None else [bench.image_bytes(it)]
        reqs.append(ChatRequest(prompt_of(it, opts.rule), images=imgs))
    out = ModelAnswers(model, {}, f"endpoint:{opts.base_url or 'OPENAI_BASE_URL'}")
    with LLM(llm_options(opts, model), budget) as llm:
        out.source = f"endpoint:{llm.endpoint}"
        llm.check_prices([model])
        try:
            outcomes = llm.chat_many(reqs, desc=f"eval {model}")
        except KeyboardInterrupt:
            raise Interrupted(interrupted_message(llm, len(reqs), f"asking {model}")) from None
        stop_if_fatal(llm, outcomes, model)
        for o in outcomes:
            iid = bench.items[o.index].id
            if o.ok:
                out.answers[iid] = o.answer.text
            else:
                out.failures[iid] = f"{o.status}: {o.reason}"
    return out


def interrupted_message(llm, total: int, doing: str) -> str:
    """What a Ctrl-C leaves while asking a model: the answers in the request cache, which a rerun reads back."""
    from vhmine.files import shown_path

    kept = llm.stats.answered + llm.stats.cached
    return (
        f"interrupted while {doing}: {kept} of {total} answers kept in the request cache "
        f"({shown_path(llm.cache.path)}); run the same command to resume (kept answers are not asked again)"
    )


def judge_oeq(bench: Benchmark, ans: ModelAnswers, opts: EvalOptions, budget=None) -> dict[str, bool | None]:
    """OEQ verdicts from the LLM judge: the same prompt and parser as `vhmine probe` (judge.py).

    "unclear" is a verdict (none: scored wrong, counted as unjudged); a judge request that failed is
    not: its item moves to `ans.failures` and is left out of the score. Nor is a reply that cannot be read as a
    verdict (an HTML page, a sentence): its item is "unjudged", moved to `ans.failures` with that word, left out of
    the figure and its n and never scored wrong; where no reply at all can be read, the judge is broken and the run
    stops (EvalError: exit 2), as for a dead endpoint.
    """
    from vhmine.llm import LLM
    from vhmine.rules import JUDGED_RIGHT, judge_iter, judge_prompt

    if not opts.judge:
        raise EvalError("--oeq judge needs a judge model: pass --judge MODEL")
    items = [it for it in bench if it.kind == OEQ and it.id in ans.answers and it.id not in ans.failures]
    out: dict[str, bool | None] = {}
    with LLM(llm_options(opts, opts.judge), budget) as llm:
        llm.check_prices([opts.judge])
        cases = [(it.question, it.answers, ans.answers[it.id]) for it in items]
        try:
            outcomes = sorted(
                judge_iter(llm, opts.judge, cases, judge_prompt(), f"judge {ans.model}"), key=lambda x: x[0]
            )
        except KeyboardInterrupt:
            raise Interrupted(
                interrupted_message(llm, len(cases), f"judging {ans.model}'s answers with {opts.judge}")
            ) from None
        stop_if_fatal(llm, [o for _, o, _ in outcomes], f"the judge {opts.judge}")
        unread = []
        for k, o, said in outcomes:
            iid = items[k].id
            if not o.ok:
                ans.failures[iid] = f"{o.status}: the judge {opts.judge} gave no verdict: {o.reason}"
            elif said is None:  # neither correct, incorrect nor unclear: no verdict at all
                unread.append((iid, " ".join(o.answer.text.split())[:60]))
            else:
                out[iid] = JUDGED_RIGHT.get(said)  # unclear: no verdict
        if unread and not out:
            raise EvalError(
                f"the judge {opts.judge} gave no verdict on any of {ans.model}'s {len(unread)} open answer(s) (its "
                f"replies cannot be read as correct, incorrect or unclear, e.g. {unread[0][1]!r}): nothing scored; "
                "check --judge and --base-url"
            )
        for iid, said in unread:
            ans.failures[iid] = f"unjudged: the judge {opts.judge}'s reply is no verdict: {said!r}"
    return out


def judge_mmvp(bench: Benchmark, ans: ModelAnswers, opts: EvalOptions, budget=None) -> tuple[list, dict]:
    """`--rule mmvp`: MMVP's grader asked of the judge about every answer (vhmine.eval.mmvp: for an MMVP answers
    file its own lines, in file order). Returns (the cases graded, item id -> (right, the judge's reply, MMVP's
    reading of it)); a grade that failed moves its item to `ans.failures`, never scored."""
    from vhmine.eval import mmvp as MM
    from vhmine.llm import LLM

    todo = [c for c in MM.cases(bench, ans.answers, ans.lines) if c.item_id not in ans.failures]
    grades: dict[str, tuple] = {}
    with LLM(llm_options(opts, opts.judge), budget) as llm:
        llm.check_prices([opts.judge])
        try:
            graded = sorted(MM.grade(llm, opts.judge, todo, f"mmvp grader {ans.model}"), key=lambda g: g[0])
        except KeyboardInterrupt:
            raise Interrupted(
                interrupted_message(llm, len(todo), f"grading {ans.model}'s answers with {opts.judge} (MMVP's rule)")
            ) from None
        stop_if_fatal(llm, [o for _, o, _, _ in graded], f"the judge {opts.judge}")
        for k, o, right, said in graded:
            iid = todo[k].item_id
            if not o.ok:
                ans.failures[iid] = f"{o.status}: the judge {opts.judge} gave no grade: {o.reason}"
                continue
            grades[iid] = (right, o.answer.text, said)
    return todo, grades
