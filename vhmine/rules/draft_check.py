"""The rules a pair draft must pass, for a model's draft (vhmine.models.draft) and a worker's edit (curate.work.verify)
alike.

Reads and writes nothing: pure functions over vhmine.rules.modes. A draft is an open question (OEQ) from one of
the mode's templates with reference answers for each image of the pair, and yes/no variants that each
have a truth per image. The rules: the template is one of the mode's open templates and its slots are
filled; the answers are of the mode's form (vhmine.rules.modes.check_oeq_answers); the two images' answers
differ (the pair is a difference CLIP misses: a question with one answer for both tells the images
apart no better than a guess); each yes/no variant is yes on one image and no on the other, and does not
contradict what the open answers imply, however it is worded (vhmine.rules.variant); a variant the check
cannot read is listed in `unchecked`, for the verifying worker to check (curate.work.verify). `parse_draft` reads a
model's JSON into the same form, raising FormError with the reason when it is malformed or its question does not fit its
template (a worker's edit may be their own wording; a model's draft may not).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vhmine.errors import FormError
from vhmine.rules import modes as M
from vhmine.rules.variant import check_variant


@dataclass(frozen=True)
class YesNo:
    question: str
    truths: dict = field(hash=False)  # image id -> True / False


@dataclass(frozen=True)
class DraftContent:
    template_id: str  # the OEQ template, or `<mode>.own` for a question reworded past it
    slots: dict = field(hash=False)
    question: str = ""
    answers: dict = field(default_factory=dict, hash=False)  # image id -> list of reference answers
    yes_no: tuple[YesNo, ...] = ()
    base_template: str = ""  # the open template it was filled from (kept when the question is reworded past it)
    unchecked: tuple[str, ...] = ()  # yes/no questions the rules could not check against the answers

    def as_json(self) -> dict:
        return {
            "template_id": self.base_template or self.template_id,
            "slots": self.slots,
            "question": self.question,
            "answers": self.answers,
            "yes_no": [{"question": y.question, "truths": y.truths} for y in self.yes_no],
        }


def _where(role: str) -> str:
    return f"image {role}"


def check_content(
    mode_name: str,
    images: Sequence[str],
    template_id: str,
    slots: Mapping[str, str],
    question: str | None,
    answers: Mapping[str, Sequence[str] | str],
    yes_no: Sequence[tuple[str, Mapping[str, bool | None]]] | None,
) -> DraftContent:
    """A checked draft for the pair `images` (A, B); FormError naming the first rule it breaks.

    `question` None: the filled template. `yes_no` None: the variants are drafted from the answers as the
    annotate page drafts them (vhmine.rules.modes.draft_ynq); [] keeps none."""
    mode = M.get_mode(mode_name)
    tpl = mode.template(template_id)
    if tpl.kind != M.OEQ:
        raise FormError(
            "template",
            f"template {tpl.id} is a yes/no template: a pair draft starts from an open "
            f"question ({', '.join(t.id for t in mode.templates_of(M.OEQ))})",
        )
    slots = {k: " ".join(str(v).split()) for k, v in (slots or {}).items() if k in tpl.slots}
    question = M.check_question(M.fill(tpl, slots) if question is None else question)
    kept = M.slots_of(tpl, question, slots)  # None: reworded past the template
    roles = dict(zip(images, "AB"))
    clean = {img: M.clean_answers(answers.get(img)) for img in images}
    for img in images:
        M.check_oeq_answers(mode, tpl if kept is not None else None, kept or {}, clean[img], _where(roles[img]))
    a, b = ({M.normalize_answer(x) for x in clean[img]} for img in images)
    if a & b:
        raise FormError(
            "answers",
            f"image A and image B share the answer {sorted(a & b)[0]!r}: a pair question must "
            "have a different answer on each image",
        )
    out: list[YesNo] = []
    unchecked: list[str] = []  # variants the check could not read against the answers: a worker checks them
    for q, truths in _derived(mode, tpl, kept, clean, images) if yes_no is None else yes_no:
        q = M.check_question(q)
        t = {img: truths.get(img) for img in images}
        if any(v is None for v in t.values()):
            raise FormError("yes_no", f"the yes/no question {q!r} needs yes or no for both images")
        if len(set(t.values())) == 1:
            raise FormError(
                "yes_no",
                f"the yes/no question {q!r} is {'yes' if t[images[0]] else 'no'} on both images: "
                "a pair's yes/no question must be yes on one image and no on the other",
            )
        decided = [
            check_variant(
                mode,
                tpl,
                kept if kept is not None else slots,
                q,
                t[img],
                clean[img],
                [x for o in images if o != img for x in clean[o]],
                f"{q!r} on {_where(roles[img])}",
            )
            for img in images
        ]
        if not all(decided):
            unchecked.append(q)
        out.append(YesNo(q, {img: bool(v) for img, v in t.items()}))
    tid = tpl.id if kept is not None else M.own_template_id(mode)
    return DraftContent(tid, kept or {}, question, clean, tuple(out), tpl.id, tuple(unchecked))


def _derived(mode: M.Mode, tpl: M.Template, slots: dict | None, answers: dict, images: Sequence[str]):
    """Yes/no variants drafted from each image's answer (the other image's answer as the wrong value), merged by
    question: a question kept only where it has a truth on both images, and not the same one."""
    if slots is None:
        return []
    merged: dict[str, dict] = {}
    for img in images:
        others = [x for o in images if o != img for x in answers[o]]
        for d in M.draft_ynq(mode, tpl, slots, answers[img], others):
            merged.setdefault(d.question, {})[img] = d.truth
    # a question with one truth on both images tells them apart no better than a guess: not a pair's variant
    return [(q, t) for q, t in merged.items() if len(t) == len(images) and len(set(t.values())) > 1]


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def _yes_no_word(v) -> bool | None:
    if isinstance(v, bool):
        return v
    return {"yes": True, "no": False}.get(str(v).strip().lower().rstrip("."))


def parse_draft(text: str, mode_name: str, images: Sequence[str]) -> DraftContent:
    """A model's JSON draft (a ```json fence around it is allowed) checked by the rules; FormError with the
    reason when it is not JSON of the asked shape or breaks a rule."""
    m = _FENCE.match(text or "")
    try:
        data = json.loads(m.group(1) if m else (text or ""))
    except ValueError as err:
        raise FormError("json", f"malformed draft: not JSON ({err.msg} at character {err.pos})") from None
    if not isinstance(data, dict):
        raise FormError("json", "malformed draft: the JSON is not an object")
    missing = [k for k in ("template", "answer_a", "answer_b") if not isinstance(data.get(k), (str, int))]
    if missing:
        raise FormError("json", f"malformed draft: {', '.join(missing)} missing or not text")
    slots = data.get("slots") or {}
    yes_no = data.get("yes_no") or []
    if not isinstance(slots, dict) or not isinstance(yes_no, list) or not all(isinstance(y, dict) for y in yes_no):
        raise FormError("json", "malformed draft: slots must be an object and yes_no a list of objects")
    a, b = images
    yn = [
        (str(y.get("question") or ""), {a: _yes_no_word(y.get("answer_a")), b: _yes_no_word(y.get("answer_b"))})
        for y in yes_no
    ]
    q = data.get("question")
    content = check_content(
        mode_name,
        images,
        str(data["template"]),
        {k: str(v) for k, v in slots.items()},
        None if q in (None, "") else str(q),
        {a: [str(data["answer_a"])], b: [str(data["answer_b"])]},
        yn or None,
    )  # none given: drafted from the answers
    if content.template_id != content.base_template:  # a worker may word a question their own way; a model may not
        raise FormError(
            "question",
            f"the question {content.question!r} does not fit template {content.base_template} "
            f"({M.get_template(content.base_template).text}) with the slots given: a draft "
            "asks its template's question",
        )
    return content
