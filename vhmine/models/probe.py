"""Stage 4, probe: a victim MLLM answers the ready instances; each answer is judged.

Reads ready instances (OEQ and YNQ) and their image files from the curation store; asks the model through vhmine.llm
(cached, so a rerun or a resumed run asks only what is missing); writes one `responses` row per (instance, model,
endpoint, prompt) with its verdict: YNQ by a yes/no rule (vhmine.rules.answers), OEQ by an LLM judge (`judge` model;
its model and prompt recorded in the row's `judge` column) or left without a verdict for workers to label in the
app. The endpoint (base URL without credentials) is part of what makes a response "already answered": two servers
that serve one model name are two models. An instance is "hallucinated" (a success for VHTest) when the verdict that
counts says so: the workers' majority where they labelled the response, else the rule's or judge's
(curate.work.response_verdicts); an answer workers labelled "no answer" (it does not answer: "I cannot tell from this
image.") is counted apart, neither correct nor a hallucination to describe. Failures are recorded per item in the
request cache with their reason; the run goes on and the result says it was partial. An instance whose image is
missing or changed since it was curated (no file with its recorded sha256 is left) is never sent: it is listed as
left out, with the reason, and the run goes on (as the app, `vhmine draft` and `vhmine export` refuse such an
image). A rerun reads a stored yes/no answer again by this run's rule against the instance's current truth (a truth
fixed since, by an erratum, changes its verdict); a stored open answer whose judge's verdict was cleared
(curate.decisions.derived) is judged again when a judge is given.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import prompts as P
from vhmine import rules as R
from vhmine.errors import CostCapError, InputError, VhmineError
from vhmine.llm import LLM, ChatRequest, LLMOptions

log = logging.getLogger(__name__)

REFUSED = "image refused"  # an item's status when its image is missing or changed: left out, the run goes on


@dataclass(frozen=True)
class ProbeOptions:
    llm: LLMOptions  # the victim model and how to reach it (the judge uses the same endpoint)
    judge: str | None = None  # model that judges OEQ answers; None: workers label them in the app
    rule: str = R.DEFAULT_RULE  # the yes/no rule for YNQ answers
    modes: Sequence[str] | None = None  # None: all eight
    kinds: Sequence[str] = R.KINDS
    limit: int | None = None  # at most this many instances (smoke tests on a paid API)


@dataclass
class ItemResult:
    instance_id: str
    mode: str
    kind: str
    status: str  # "answered", "cached" (answered in an earlier run), or an LLMError status
    verdict: str | None = None  # "correct", "hallucinated", "no answer" (a worker's label), or None (not judged)
    reason: str = ""


@dataclass
class ProbeResult:
    model: str
    judge: str | None
    items: list[ItemResult] = field(default_factory=list)
    spent: float = 0.0
    sent: int = 0
    cached: int = 0
    db_option: str = ""  # " --db STORE" when the store is not the default one, for the next command

    @property
    def failed(self) -> list[ItemResult]:
        return [i for i in self.items if i.status not in ("answered", "cached", REFUSED)]

    @property
    def refused(self) -> list[ItemResult]:
        """Instances whose image is missing or changed since it was curated: never sent as that image."""
        return [i for i in self.items if i.status == REFUSED]

    @property
    def partial(self) -> bool:
        return bool(self.failed)

    def per_mode(self) -> dict[str, Counter]:
        out: dict[str, Counter] = {}
        for i in self.items:
            c = out.setdefault(i.mode, Counter())
            c["instances"] += 1
            if i.status in ("answered", "cached"):
                c["answered"] += 1
                c[i.verdict or "unjudged"] += 1
            elif i.status == REFUSED:
                c["left out"] += 1
            else:
                c["failed"] += 1
        return out

    def summary(self) -> str:
        lines = [
            f"probe {self.model}"
            + (f" (OEQ judged by {self.judge})" if self.judge else " (OEQ left for workers)")
            + f": {len(self.items)} instances, ${self.spent:.4f} spent, {self.sent} requests sent, "
            f"{self.cached} answers from the cache",
            f"{'mode':<12} {'inst':>5} {'answered':>8} {'halluc.':>7} {'correct':>7} {'no ans.':>7} {'unjudged':>8} "
            f"{'failed':>6}",
        ]
        tot = Counter()
        for mode in R.mode_names():
            c = self.per_mode().get(mode)
            if c is None:
                continue
            tot.update(c)
            lines.append(
                f"{mode:<12} {c['instances']:>5} {c['answered']:>8} {c['hallucinated']:>7} {c['correct']:>7} "
                f"{c['no answer']:>7} {c['unjudged']:>8} {c['failed']:>6}"
            )
        lines.append(
            f"{'all':<12} {tot['instances']:>5} {tot['answered']:>8} {tot['hallucinated']:>7} {tot['correct']:>7} "
            f"{tot['no answer']:>7} {tot['unjudged']:>8} {tot['failed']:>6}"
        )
        for f in self.refused[:20]:
            lines.append(f"  left out: {f.mode} {f.kind} {f.instance_id}: {f.reason}")
        if len(self.refused) > 20:
            lines.append(f"  ... and {len(self.refused) - 20} more whose image is missing or changed")
        capped = [f for f in self.failed if f.status == CostCapError.status]  # one reason: said once
        failed = [f for f in self.failed if f.status != CostCapError.status]
        for f in failed[:20]:
            lines.append(f"  not answered: {f.mode} {f.kind} {f.instance_id}: {f.status}: {f.reason}")
        if len(failed) > 20:
            lines.append(f"  ... and {len(failed) - 20} more (all in the request cache's failures table)")
        if capped:
            reason = next((f.reason for f in capped if not f.reason.startswith("not sent: ")), capped[0].reason)
            lines.append(
                f"  not sent: {len(capped)} instance(s) past the cost cap: {reason.removeprefix('not sent: ')}"
            )
        if self.partial:  # the last line names the next step: the same command
            lines.append(
                f"partial run: {len(self.failed)} instance(s) not answered; rerun the same command to ask only those"
            )
        else:
            lines.append(self._next(tot))
        return "\n".join(lines)

    def _next(self, tot: Counter) -> str:
        db = self.db_option
        if tot["unjudged"]:
            return (
                f"next: label the {tot['unjudged']} unjudged answer(s) on the app's Label answers page "
                f"(vhmine curate{db}), or probe again with --judge MODEL; then vhmine describe --model MODEL{db}"
            )
        if tot["hallucinated"]:
            return (
                f"next: vhmine describe --model MODEL{db}   (what makes {self.model} hallucinate, per mode, from "
                f"its {tot['hallucinated']} hallucination(s); then vhmine generate)"
            )
        return (
            f"next: {self.model} answered every instance right: vhmine probe --model OTHER{db}, or curate and "
            "mine harder pairs"
        )


def probe_prompt(kind: str) -> P.Prompt:
    return P.load("probe_ynq" if kind == R.YNQ else "probe_oeq")


def rule_verdict(answer: str, truth: bool | None, rule: str) -> str | None:
    """A YNQ verdict by rule; None when the answer is neither yes nor no under the rule."""
    return R.yes_no_verdict(answer, truth, rule)


def judge_verdict(text: str) -> str | None:
    """A judge's answer as a response verdict: correct -> correct, incorrect -> hallucinated, else None."""
    return R.RESPONSE_VERDICT.get(R.parse_verdict(text))


def probe(store, opts: ProbeOptions) -> ProbeResult:
    """Ask every selected ready instance once per (model, prompt); judge; return per-item results."""
    from vhmine import curate as C

    CR = C.stages  # (a room of curate, through its face)

    R.get_rule(opts.rule)
    modes = R.selected_modes(opts.modes)
    recs = [r for r in C.ready_instances(store) if r.mode in modes and r.kind in opts.kinds]
    if opts.limit is not None:
        recs = recs[: opts.limit]
    model = opts.llm.model
    result = ProbeResult(model, opts.judge, db_option=store.db_option)
    judge_prompt = R.judge_prompt()
    judge_name = R.judge_name(opts.judge, judge_prompt) if opts.judge else None
    by_id = {r.id: r for r in recs}
    with LLM(opts.llm) as llm:
        llm.check_prices([model] + ([opts.judge] if opts.judge else []))
        have, legacy = CR.stored_responses(store, model, llm.endpoint), CR.stored_responses(store, model, None)
        counts = C.work.response_verdicts(store, [v[0] for v in have.values()] + [v[0] for v in legacy.values()])
        todo, to_judge = [], []  # to_judge: (instance id, response id, answer)
        items: dict[str, ItemResult] = {}

        def reuse(r, rid: str, verdict: str | None, answer: str) -> None:
            if r.kind == R.YNQ and rule_verdict(answer, r.truth, opts.rule) != verdict:  # the truth changed since
                verdict = rule_verdict(answer, r.truth, opts.rule)
                CR.set_automatic_verdict(store, rid, verdict, f"rule:{opts.rule}")
                counts.update(C.work.response_verdicts(store, [rid]))
            # the verdict shown is the one that counts (workers' labels first); the judge fills in a missing automatic
            # one
            items[r.id] = ItemResult(r.id, r.mode, r.kind, "cached", counts[rid].verdict)
            if r.kind == R.OEQ and verdict is None and opts.judge:
                to_judge.append((r.id, rid, answer))

        files: dict[str, object] = {}  # image id -> where its recorded content is now, or why it cannot be sent
        for r in recs:
            prompt = probe_prompt(r.kind).render(question=r.question)
            prev = have.get((r.id, prompt))
            if prev is not None:
                reuse(r, *prev)
                continue
            if r.image_id not in files:  # hashed again here: only what still hashes to its sha256 is sent
                try:
                    files[r.image_id] = C.image_file(store, r.image_id)
                except VhmineError as err:
                    files[r.image_id] = err
            if isinstance(files[r.image_id], VhmineError):  # the app, draft and export refuse it too
                items[r.id] = ItemResult(r.id, r.mode, r.kind, REFUSED, reason=str(files[r.image_id]))
                continue
            todo.append((r, prompt))
        reqs = [ChatRequest(prompt, images=[Path(str(files[r.image_id]))]) for r, prompt in todo]
        for out in llm.chat_iter(reqs, desc=f"probe {model}"):
            r, prompt = todo[out.index]
            if not out.ok:
                items[r.id] = ItemResult(r.id, r.mode, r.kind, out.status, reason=out.reason)
                continue
            text = out.answer.text
            old = legacy.get((r.id, prompt))
            if old is not None and old[2] == text:  # stored before endpoints were, and this endpoint says the same
                CR.claim_endpoint(store, old[0], llm.endpoint)
                reuse(r, *old)
                continue
            if r.kind == R.YNQ:
                verdict = rule_verdict(text, r.truth, opts.rule)
                rid = C.work.add_response(
                    store, r.id, model, prompt, text, verdict, judge=f"rule:{opts.rule}", endpoint=llm.endpoint
                )
                reason = "" if verdict else f"the answer is neither yes nor no under rule {opts.rule}: left for workers"
                items[r.id] = ItemResult(r.id, r.mode, r.kind, "answered", verdict, reason)
            else:
                rid = C.work.add_response(store, r.id, model, prompt, text, endpoint=llm.endpoint)
                items[r.id] = ItemResult(r.id, r.mode, r.kind, "answered")
                if opts.judge:
                    to_judge.append((r.id, rid, text))
        llm.raise_if_stopped(f"probe of {model}")  # no key, a rejected one, endpoint down: one line, not one per item
        if to_judge:
            cases = [(by_id[iid].question, by_id[iid].answers, ans) for iid, _, ans in to_judge]
            for k, out, said in R.judge_iter(llm, opts.judge, cases, judge_prompt):
                iid, rid, _ = to_judge[k]
                if not out.ok:  # the answer stays, unjudged, for workers; the item is not a failure
                    items[iid].reason = f"judge failed ({out.status}): {out.reason}"
                    continue
                verdict = R.RESPONSE_VERDICT.get(said)
                CR.set_automatic_verdict(store, rid, verdict, judge_name)
                if rid not in counts or not counts[rid].by_workers:  # workers' labels still override the judge
                    items[iid].verdict = verdict
                if verdict is None:
                    items[iid].reason = f"the judge said {out.answer.text[:40]!r}: left for workers"
            llm.raise_if_stopped(f"probe's judge {opts.judge}")
        result.spent, result.sent, result.cached = llm.spent, llm.stats.sent, llm.stats.cached
    result.items = [items[r.id] for r in recs]
    return result


# --- successes, for describe ---------------------------------------------------------------------


@dataclass(frozen=True)
class Hallucination:
    """One successful VH instance: the model's wrong answer and what was wrong with it."""

    instance_id: str
    response_id: str
    mode: str
    kind: str
    question: str
    references: tuple[str, ...]
    answer: str
    model: str
    error: str
    image_path: str


def _error_text(kind: str, truth: bool | None, refs: Sequence[str], answer: str) -> str:
    if kind == R.YNQ and truth is not None:
        return f"the model answered {'no' if truth else 'yes'}, but the correct answer is {'yes' if truth else 'no'}"
    return f"the model answered {answer.strip()[:200]!r}, but the correct answer is {' / '.join(refs)}"


def hallucinations(store, mode: str, model: str | None = None) -> list[Hallucination]:
    """Responses whose verdict that counts is "hallucinated", by instance id (curate.work.response_verdicts: the
    workers' majority where they labelled the response, overriding the rule or judge; a tie: no verdict).

    One per instance (its first such response by id), so an instance counts once however many
    models failed on it; `model` keeps only that model's responses.
    """
    from vhmine import curate as C

    mode = R.get_mode(mode).name
    rows = C.stages.mode_responses(store, mode, model)
    counts = C.work.response_verdicts(store, [r.response_id for r in rows])
    out: dict[str, Hallucination] = {}
    for r in rows:  # by instance id, then response id
        if counts[r.response_id].verdict != "hallucinated" or r.instance_id in out:
            continue
        rec = C.get_instance(store, r.instance_id)
        # "answered yes/no" only when the rule read it so; a worker may call an unreadable answer hallucinated
        truth = r.truth if r.verdict == "hallucinated" else None
        out[r.instance_id] = Hallucination(
            r.instance_id,
            r.response_id,
            mode,
            r.kind,
            r.question,
            r.answers,
            r.answer,
            r.model,
            _error_text(r.kind, truth, r.answers, r.answer),
            rec.image_path,
        )
    return list(out.values())


def check_kinds(kinds: Sequence[str]) -> list[str]:
    """OEQ / YNQ in any case (`vhmine export --kind` takes them lower-case), as the store spells them."""
    bad = [k for k in kinds if k.upper() not in R.KINDS]
    if bad:
        raise InputError(f"unknown kind {bad[0]!r}: choose from {', '.join(R.KINDS)}")
    return [k.upper() for k in kinds]
