"""Blind solvers: a text-only model answers each ready question WITHOUT its image.

Reads the store's ready instances (vhmine.curate.ready_instances) and asks `--model` through vhmine.llm
(cache, retries, cost cap) with the versioned prompt `blind` (vhmine/prompts/blind.v1.txt), no image
attached. Yes/no answers are read by a vhmine.rules.answers rule; open answers are scored as eval scores them:
`match` (vhmine.rules.harness.match_oeq, as eval scores), or the LLM judge of vhmine.rules.judge when `judge` is given.
Writes one `blind_answers` row per (instance, model, endpoint, prompt) with the answer, whether it was right and
the scorer (vhmine.curate.work.blind), then the flags:

A question is flagged when it was answered right without the image on EVERY image it is asked of: on
both images of its pair where the pair has the same question on both (and so, for yes/no, usually
opposite answers: a blind guess cannot be right on both), and on its one image for a question about a
single image. A request or a judge call that failed leaves its instance without an answer, so its
group is never flagged (rerun to ask again; the cache makes that free for the answers already got).

A rerun asks only what has no answer yet, and scores every stored answer again against the instance's
current reference with this run's scorers (curate.work.score_stored): a reference changed since (an erratum) or
another --rule changes the verdict, and the flags follow. The judge is asked again only for an open answer
whose reference, or judge, differs from the one it was judged with (or that waits to be judged again).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from vhmine import prompts as P
from vhmine import rules as R
from vhmine.llm import LLM, ChatRequest, LLMOptions
from vhmine.models.probe import rule_verdict

log = logging.getLogger(__name__)

PROMPT = "blind"
OK_STATUSES = ("answered", "cached", "rescored")


@dataclass(frozen=True)
class BlindOptions:
    llm: LLMOptions  # the text-only model and how to reach it (the judge uses the same endpoint)
    judge: str | None = None  # OEQ scored by this judge model; None: by match (a reference appears in the answer)
    rule: str = R.DEFAULT_RULE  # the yes/no rule
    modes: Sequence[str] | None = None  # None: all eight
    kinds: Sequence[str] = R.KINDS


@dataclass
class BlindItem:
    instance_id: str
    mode: str
    kind: str
    # "answered", "cached" (stored by an earlier run), "rescored" (stored, scored again), or why there is no answer
    status: str
    correct: bool | None = None
    flagged: bool = False
    reason: str = ""


@dataclass
class BlindResult:
    model: str
    prompt: str
    scorer: str
    items: list[BlindItem] = field(default_factory=list)
    flags: int = 0
    spent: float = 0.0
    sent: int = 0
    db_option: str = ""  # " --db STORE" when the store is not the default one

    @property
    def failed(self) -> list[BlindItem]:
        return [i for i in self.items if i.status not in OK_STATUSES]

    @property
    def rescored(self) -> int:
        return sum(i.status == "rescored" for i in self.items)

    @property
    def partial(self) -> bool:
        return bool(self.failed)

    def summary(self) -> str:
        lines = [
            f"blind {self.model} ({self.prompt}; OEQ by {self.scorer}): {len(self.items)} questions asked without "
            f"their image, ${self.spent:.4f} spent, {self.sent} requests sent; {self.flags} question group(s) "
            "flagged (right on every image they are asked of)"
            + (
                f"; {self.rescored} stored answer(s) scored again against their current reference"
                if self.rescored
                else ""
            ),
            f"{'mode':<12} {'asked':>5} {'right':>5} {'acc.':>6} {'flagged':>7} {'failed':>6}",
        ]
        per: dict[str, Counter] = {}
        for i in self.items:
            c = per.setdefault(i.mode, Counter())
            c["asked"] += 1
            c["right"] += bool(i.correct)
            c["flagged"] += i.flagged
            c["failed"] += i.status not in OK_STATUSES
        for mode in R.mode_names():
            if mode in per:
                c = per[mode]
                n = c["asked"] - c["failed"]
                acc = f"{100 * c['right'] / n:5.1f}%" if n else "    -"
                lines.append(f"{mode:<12} {c['asked']:>5} {c['right']:>5} {acc:>6} {c['flagged']:>7} {c['failed']:>6}")
        for f in self.failed[:20]:
            lines.append(f"  not answered: {f.mode} {f.kind} {f.instance_id}: {f.status}: {f.reason}")
        if self.partial:
            lines.append(
                f"partial run: {len(self.failed)} question(s) without an answer never make a flag; "
                "rerun the same command to ask only those"
            )
        lines.append(
            f"next: look at the flags on the app's Blind flags page (vhmine curate{self.db_option}) and "
            "overrule those a question needs its image for; then `vhmine export --drop-blind` leaves the "
            "rest out"
        )
        return "\n".join(lines)


def blind_prompt(version: int | None = None) -> P.Prompt:
    return P.load(PROMPT, version)


def blind(store, opts: BlindOptions) -> BlindResult:
    """Ask every selected ready instance once per (model, endpoint, prompt) without its image; flag."""
    from vhmine import curate as C
    from vhmine.rules import match_oeq  # the scorer eval uses for open answers

    R.get_rule(opts.rule)
    modes = R.selected_modes(opts.modes)
    recs = [r for r in C.ready_instances(store) if r.mode in modes and r.kind in opts.kinds]
    prompt = blind_prompt()
    judge_prompt = R.judge_prompt()
    oeq_scorer = R.judge_name(opts.judge, judge_prompt) if opts.judge else "match"
    model = opts.llm.model
    result = BlindResult(model, prompt.id, oeq_scorer, db_option=store.db_option)
    items: dict[str, BlindItem] = {}
    with LLM(opts.llm) as llm:
        llm.check_prices([model] + ([opts.judge] if opts.judge else []))
        endpoint = llm.endpoint
        stored = C.work.blind_stored_answers(store, model, endpoint, prompt.id)
        todo, again = [], []
        for r in recs:
            if r.id in stored:
                items[r.id] = BlindItem(r.id, r.mode, r.kind, "cached")
                again.append((r, stored[r.id]))
            else:
                todo.append(r)
        # no image is attached: the model sees the question text only
        reqs = [ChatRequest(prompt.render(question=r.question)) for r in todo]
        answered: list[tuple] = []  # (record, answer text)
        for out in llm.chat_iter(reqs, desc=f"blind {model}"):
            r = todo[out.index]
            if not out.ok:
                items[r.id] = BlindItem(r.id, r.mode, r.kind, out.status, reason=out.reason)
            else:
                answered.append((r, out.answer.text))
        llm.raise_if_stopped(f"blind {model}")  # no key, a rejected one, endpoint down: one line, not one per item
        verdicts: dict[str, tuple[bool, str]] = {}
        to_judge = []  # (record, answer text, stored answer or None)
        for r, text in answered:
            if r.kind == R.YNQ:
                verdicts[r.id] = (rule_verdict(text, r.truth, opts.rule) == "correct", f"rule:{opts.rule}")
            elif opts.judge:
                to_judge.append((r, text, None))
            else:
                verdicts[r.id] = (match_oeq(text, r.answers), "match")
        for r, st in again:  # stored answers, scored again against the reference they are scored against now
            ref, scorer = C.work.blind_reference(r), f"rule:{opts.rule}" if r.kind == R.YNQ else oeq_scorer
            if r.kind == R.OEQ and opts.judge:
                if st.correct is None or st.scorer != scorer or st.reference != ref:
                    to_judge.append((r, st.answer, st))
                continue
            right = C.work.score_stored(r.kind, st.answer, ref, scorer)
            if (right, scorer, ref) != (st.correct, st.scorer, st.reference):
                C.work.rescore_blind_answer(store, st.id, correct=right, scorer=scorer, reference=ref)
                items[r.id].status = "rescored"
        if to_judge:
            cases = [(r.question, r.answers, text) for r, text, _ in to_judge]
            for i, out, verdict in R.judge_iter(llm, opts.judge, cases, judge_prompt):
                r, _, st = to_judge[i]
                if not out.ok:  # no verdict: no answer stored (or the stored one stays unscored), so no flag
                    if st is not None and st.reference != C.work.blind_reference(r) and st.correct is not None:
                        C.work.rescore_blind_answer(
                            store, st.id, correct=None, scorer=st.scorer, reference=st.reference
                        )
                    items[r.id] = BlindItem(
                        r.id, r.mode, r.kind, out.status, reason=f"the judge {opts.judge} gave no verdict: {out.reason}"
                    )
                    continue
                if st is None:
                    verdicts[r.id] = (verdict == "correct", oeq_scorer)  # unclear: not right
                else:
                    C.work.rescore_blind_answer(
                        store,
                        st.id,
                        correct=verdict == "correct",
                        scorer=oeq_scorer,
                        reference=C.work.blind_reference(r),
                    )
                    items[r.id].status = "rescored"
            llm.raise_if_stopped(f"blind's judge {opts.judge}")
        for r, text in answered:
            if r.id not in verdicts:
                continue
            right, scorer = verdicts[r.id]
            C.work.record_blind_answer(
                store,
                r.id,
                model=model,
                endpoint=endpoint,
                prompt=prompt.id,
                answer=text,
                correct=right,
                scorer=scorer,
                group=C.work.blind_group_key(r.mode, r.kind, r.pair_id, r.question, r.id),
            )
            items[r.id] = BlindItem(r.id, r.mode, r.kind, "answered", right)
        flags = C.work.refresh_blind_flags(store, model, endpoint, prompt.id)
        stored = _stored(store, model, endpoint, prompt.id)
        for r in recs:
            it = items[r.id]
            if r.id in stored:
                it.correct, flag = stored[r.id]
                it.flagged = flag is not None
        result.flags = len({f for f in flags.values()})
        result.spent, result.sent = llm.spent, llm.stats.sent
    result.items = [items[r.id] for r in recs]
    return result


def _stored(store, model: str, endpoint: str | None, prompt: str) -> dict[str, tuple[bool | None, str | None]]:
    """instance id -> (right, flag id) of the stored answers of this model, endpoint and prompt."""
    from sqlalchemy import select

    from vhmine.store import BlindAnswer

    where = BlindAnswer.endpoint == endpoint  # None: IS NULL
    with store.session(write=False) as s:
        rows = s.execute(
            select(BlindAnswer.instance_id, BlindAnswer.correct, BlindAnswer.flag_id).where(
                BlindAnswer.model == model, BlindAnswer.prompt == prompt, where
            )
        ).all()
    return {iid: (None if c is None else bool(c), f) for iid, c, f in rows}
