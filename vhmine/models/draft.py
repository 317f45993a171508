"""`vhmine draft`: a vision model drafts each seeded pair task's question, per-image answers and yes/no variants.

Reads the store's open pair tasks (vhmine.seed queues one per (pair, mode)) and their two image files;
asks `--model` through vhmine.llm (cache, retries, cost cap) with the versioned prompt `draft`
(vhmine/prompts/draft.v1.txt, the mode's open templates filled in), both images attached (A first).
Each answer is checked by the draft rules (vhmine.rules.draft_check) and stored (vhmine.curate.work.record_draft)
with the model, endpoint and prompt id: a draft that passes waits in the verify queue of the app (one
holding a yes/no question the rules cannot read against its answers is listed "to check", and the
verifier must mark that question checked); a malformed one, one with the same answer on both images, or
one whose yes/no question contradicts its answers however it is worded, is stored as rejected by rule
with the reason and never queued. A task that already has a draft of this model, endpoint and prompt is not
asked again; a request that failed stores nothing (rerun to ask again). A task whose image is missing or changed
since it was seeded (no file holds its recorded sha256) is not asked: it is listed with the reason ("image
refused"), as the app refuses such an image, and the run goes on.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from vhmine import prompts as P
from vhmine import rules as R
from vhmine.errors import FormError, VhmineError
from vhmine.llm import LLM, ChatRequest, LLMOptions

log = logging.getLogger(__name__)

PROMPT = "draft"
REFUSED = "image refused"  # a task whose image is missing or changed: listed, not asked, the run goes on
DONE = ("queued", "rule_rejected", "skipped", REFUSED)


@dataclass(frozen=True)
class DraftOptions:
    llm: LLMOptions  # the vision model and how to reach it
    modes: Sequence[str] | None = None  # None: all eight
    limit: int | None = None  # at most this many tasks (smoke tests on a paid API)


@dataclass
class DraftItem:
    task_id: str
    mode: str
    status: str  # "queued", "rule_rejected", "skipped" (drafted before), or why there is no answer
    reason: str = ""


@dataclass
class DraftResult:
    model: str
    prompt: str
    items: list[DraftItem] = field(default_factory=list)
    spent: float = 0.0
    sent: int = 0

    @property
    def failed(self) -> list[DraftItem]:
        return [i for i in self.items if i.status not in DONE]

    @property
    def partial(self) -> bool:
        return bool(self.failed)

    def summary(self) -> str:
        lines = [
            f"draft {self.model} ({self.prompt}): {len(self.items)} pair tasks, ${self.spent:.4f} spent, "
            f"{self.sent} requests sent",
            f"{'mode':<12} {'tasks':>5} {'queued':>6} {'by rule':>7} {'skipped':>7} {'image':>6} {'failed':>6}",
        ]
        per: dict[str, Counter] = {}
        for i in self.items:
            per.setdefault(i.mode, Counter())[i.status if i.status in DONE else "failed"] += 1
        for mode in R.mode_names():
            if mode in per:
                c = per[mode]
                lines.append(
                    f"{mode:<12} {sum(c.values()):>5} {c['queued']:>6} {c['rule_rejected']:>7} "
                    f"{c['skipped']:>7} {c[REFUSED]:>6} {c['failed']:>6}"
                )
        for i in [i for i in self.items if i.status == "rule_rejected"][:20]:
            lines.append(f"  rejected by rule: {i.task_id}: {i.reason}")
        for i in [i for i in self.items if i.status == "queued" and i.reason][:20]:
            lines.append(f"  to check: {i.task_id}: {i.reason}")
        for i in [i for i in self.items if i.status == REFUSED][:20]:
            lines.append(f"  image refused: {i.task_id}: {i.reason}")
        for f in self.failed[:20]:
            lines.append(f"  not drafted: {f.task_id}: {f.status}: {f.reason}")
        if self.partial:
            lines.append(
                f"partial run: {len(self.failed)} task(s) without a draft; rerun the same command to ask only those"
            )
        lines.append(
            "workers accept, edit or reject the queued drafts on the app's Verify page; "
            "`vhmine draft --stats` shows what that saves"
        )
        return "\n".join(lines)


def draft_prompt(version: int | None = None) -> P.Prompt:
    return P.load(PROMPT, version)


def render(prompt: P.Prompt, mode_name: str) -> str:
    mode = R.get_mode(mode_name)
    templates = "\n".join(f"- {t.id}: {t.text}" for t in mode.templates_of(R.OEQ))
    return prompt.render(mode=mode.name, definition=mode.definition, look_for=mode.look_for, templates=templates)


def _open_pair_tasks(store, modes: list[str]) -> list[tuple[str, str, str, str]]:
    """(task id, mode, image A id, image B id) of every open pair task of `modes`, by priority."""
    from sqlalchemy import select

    from vhmine.store import Pair, Task

    with store.session(write=False) as s:
        rows = s.execute(
            select(Task.id, Task.mode, Pair.image_a, Pair.image_b)
            .join(Pair, Pair.id == Task.pair_id)
            .where(Task.status == "open", Task.mode.in_(modes))
            .order_by(Task.priority, Task.id)
        ).all()
    return [tuple(r) for r in rows]


def _located(store, files: dict, image_id: str):
    """Where the image's recorded content is now (checked by its sha256), or the error saying why it is not; each
    image once."""
    from vhmine import curate as C

    if image_id not in files:
        try:
            files[image_id] = C.image_file(store, image_id)
        except VhmineError as err:
            files[image_id] = err
    return files[image_id]


def draft(store, opts: DraftOptions) -> DraftResult:
    """Ask the model once per open pair task not yet drafted by it (model, endpoint, prompt); store every draft."""
    from vhmine import curate as C
    from vhmine.rules import parse_draft

    modes = R.selected_modes(opts.modes)
    tasks = _open_pair_tasks(store, modes)
    if opts.limit is not None:
        tasks = tasks[: opts.limit]
    prompt = draft_prompt()
    model = opts.llm.model
    result = DraftResult(model, prompt.id)
    items: dict[str, DraftItem] = {}
    with LLM(opts.llm) as llm:
        llm.check_prices([model])
        done = C.work.drafted_tasks(store, model, llm.endpoint, prompt.id)
        todo, files = [], {}
        for t in tasks:
            if t[0] in done:
                items[t[0]] = DraftItem(t[0], t[1], "skipped")
                continue
            why = [_located(store, files, img) for img in t[2:]]
            bad = next((w for w in why if isinstance(w, VhmineError)), None)
            if bad is not None:  # missing or changed since it was seeded: never sent as that image; the run goes on
                items[t[0]] = DraftItem(t[0], t[1], REFUSED, str(bad))
            else:
                todo.append(t)
        # both images of the pair, A first, as the prompt says
        reqs = [ChatRequest(render(prompt, mode), images=[files[a], files[b]]) for _, mode, a, b in todo]
        for out in llm.chat_iter(reqs, desc=f"draft {model}"):
            tid, mode, a, b = todo[out.index]
            if not out.ok:
                items[tid] = DraftItem(tid, mode, out.status, out.reason)
                continue
            text = out.answer.text
            try:
                content, reason = parse_draft(text, mode, [a, b]), None
            except FormError as err:
                content, reason = None, str(err)
            C.work.record_draft(
                store,
                tid,
                model=model,
                endpoint=llm.endpoint,
                prompt=prompt.id,
                raw=text,
                content=content,
                reason=reason,
            )
            if content is not None and content.unchecked:  # queued all the same: the verifier checks these
                reason = (
                    f"{len(content.unchecked)} yes/no question(s) the rules cannot check against the answers "
                    f"(first: {content.unchecked[0]!r}): the verifier checks them on the images"
                )
            items[tid] = DraftItem(tid, mode, "queued" if content is not None else "rule_rejected", reason or "")
        llm.raise_if_stopped(f"draft {model}")  # no key, a rejected one, endpoint down: one line, not one per item
        result.spent, result.sent = llm.spent, llm.stats.sent
    result.items = [items[t[0]] for t in tasks]
    return result
