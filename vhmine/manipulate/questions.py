"""AutoHallusion's question templates (the paper's Table 9, as its utils_eval.py words them) at each context level.

Reads an `Edit` (vhmine.manipulate.strategies), the victim's caption of the edited image and its
description of the target object; writes nothing. Existence questions ask about the inserted object
(abnormal), the absent partner (paired) or the removed object (removal) with no context, with the
victim's own caption, with the paired object (removal: the objects still there), and with the object's
description. Spatial questions relate the target to the other objects by box centres (the paper's
`relation_determine`: left, right, above, below, front when one box holds the other's centre and is
not smaller), with no context and with the object description; removal asks them with truth "no".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vhmine.manipulate.scenes import SceneObject

FLAGS = {
    "left": "on the left of",
    "right": "on the right of",
    "up": "above",
    "down": "below",
    "front": "on the front of",
}
LEVELS = ("none", "caption", "paired", "description")
MAX_SPATIAL = 2  # spatial questions relate the target to its nearest objects only

# (strategy, level) -> template; {obj} the object asked about, {other} the paired object, {caption}, {desc}, {objects}
EXISTENCE = {
    ("abnormal", "none"): "Is there a {obj} in this image?",
    ("abnormal", "caption"): "We have an image depicting {caption}. Is there a {obj} in this image?",
    ("abnormal", "description"): "Is there a/an {obj} in this image? This object is {desc}",
    ("paired", "none"): "Is there a/an {obj} in this image?",
    ("paired", "paired"): "We have {other} in this image. Is there a/an {obj} in this image as well?",
    ("paired", "caption"): "We have an image depicting {caption}. Is there a/an {obj} in this image as well?",
    ("removal", "none"): "Is there a/an {obj} in this image?",
    ("removal", "description"): "Is there a/an {obj} in this image? This object is {desc}",
    (
        "removal",
        "paired",
    ): "In this image, We have existing objects including: {objects}. Is there a/an {obj} in this image?",
    ("removal", "caption"): "This image depicts {caption}. Is there a/an {obj} in this image?",
}
SPATIAL = {
    "none": "Is the {obj} {flag} a/an {other} in this image, given their center positions?",
    "description": "Is the object({desc}) {flag} a/an {other} in this image, given their center positions?",
}


@dataclass(frozen=True)
class Question:
    family: str  # "existence" or "spatial"
    level: str  # none, caption, paired, description
    fact: str  # what is asked: answers about one fact must agree across levels
    text: str
    truth: bool
    reference: str  # the truth as a statement, for the judge
    template_id: str
    obj: str  # the object asked about


def relation(target: Sequence[float], ref: Sequence[float]) -> list[str]:
    """AutoHallusion's relation_determine (thres=0): where the target box is relative to the reference box."""
    tcx, tcy = round((target[0] + target[2]) / 2), round((target[1] + target[3]) / 2)
    tw, th = abs(target[2] - target[0]), abs(target[3] - target[1])
    rcx, rcy = round((ref[0] + ref[2]) / 2), round((ref[1] + ref[3]) / 2)
    rw, rh = abs(ref[2] - ref[0]), abs(ref[3] - ref[1])
    out = []
    if rcx - tcx > (tw + rw) / 2:
        out.append("left")
    if tcx - rcx > (tw + rw) / 2:
        out.append("right")
    if rcy - tcy > (th + rh) / 2:
        out.append("up")
    if tcy - rcy > (th + rh) / 2:
        out.append("down")
    if (tw <= rw or th <= rh) and ref[0] <= tcx <= ref[2] and ref[1] <= tcy <= ref[3]:
        out.append("front")
    return out


def _center_distance(a, b) -> float:
    return math.dist(((a[0] + a[2]) / 2, (a[1] + a[3]) / 2), ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2))


def existence_questions(
    strategy: str, asked: str, inserted: str, remaining: Sequence[str], caption: str | None, desc: str | None
) -> list[Question]:
    truth = strategy == "abnormal"  # abnormal: the object is there; paired: the partner is not; removal: gone
    ref = f"There is a {asked}." if truth else f"There is no {asked}."
    values = {
        "obj": asked,
        "other": inserted,
        "caption": (caption or "").strip().rstrip("."),
        "desc": desc or "",
        "objects": ", ".join(remaining),
    }
    out = []
    for level in [lv for st, lv in EXISTENCE if st == strategy]:  # the order the paper asks them in
        tpl = EXISTENCE[(strategy, level)]
        if (
            (level == "caption" and not caption)
            or (level == "description" and not desc)
            or (level == "paired" and strategy == "removal" and not remaining)
        ):
            continue
        out.append(
            Question(
                "existence",
                level,
                f"exists:{asked}",
                tpl.format(**values),
                truth,
                ref,
                f"autohallusion.{strategy}.existence.{level}",
                asked,
            )
        )
    return out


def spatial_questions(
    strategy: str, target: str, target_box: Sequence[float], others: Sequence[SceneObject], desc: str | None
) -> list[Question]:
    truth = strategy != "removal"
    near = sorted((o for o in others if o.name != target), key=lambda o: (_center_distance(target_box, o.box), o.name))
    out = []
    for o in near[:MAX_SPATIAL]:
        rels = relation(target_box, o.box)
        if not rels:
            continue
        flag = FLAGS[rels[0]]
        for level, tpl in SPATIAL.items():
            if level == "description" and not desc:
                continue
            text = tpl.format(obj=target, flag=flag, other=o.name, desc=desc or "")
            ref = f"{target} is {'' if truth else 'not '}{flag} a/an {o.name} in this image"
            out.append(
                Question(
                    "spatial",
                    level,
                    f"{rels[0]}:{target}:{o.name}",
                    text,
                    truth,
                    ref,
                    f"autohallusion.{strategy}.spatial.{level}",
                    target,
                )
            )
    return out
