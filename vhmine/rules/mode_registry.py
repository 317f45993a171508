"""The eight VHTest modes as data: each mode's definition, what a worker looks for, its question templates and the
wrong values its "no" questions draw on, and their types (Mode, Template). vhmine.rules.modes builds it once
(`build`) and holds the functions over it (and names these types too). Reads and writes nothing.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from vhmine.errors import FormError

OEQ, YNQ = "OEQ", "YNQ"
KINDS = (OEQ, YNQ)


@dataclass(frozen=True)
class Template:
    id: str  # stable: "<mode>.<name>", stored with every instance
    kind: str  # OEQ or YNQ
    text: str
    ynq: str | None = None  # OEQ only: id of the YNQ template its answer turns into
    derive: str | None = None  # OEQ only: "value" or "pick" (see module docstring)
    answer_slot: str | None = None  # derive="value": the YNQ slot the answer fills
    choices: tuple[str, ...] = ()  # derive="pick": the two slots the answer chooses between

    @property
    def slots(self) -> tuple[str, ...]:
        """Slot names in order of first appearance."""
        seen: list[str] = []
        for _, name, _, _ in string.Formatter().parse(self.text):
            if name and name not in seen:
                seen.append(name)
        return tuple(seen)


@dataclass(frozen=True)
class Mode:
    name: str
    group: str  # "object" (a property of one object) or "relation" (among objects)
    definition: str
    look_for: str
    templates: tuple[Template, ...]
    alternatives: tuple[str, ...] = ()  # wrong values for drafting "no" questions
    numeric: bool = False  # answers must be whole numbers (counting)

    def template(self, template_id: str) -> Template:
        for t in self.templates:
            if t.id == template_id:
                return t
        raise FormError(
            "template",
            f"unknown template {template_id!r} for mode {self.name}: choose one of "
            + ", ".join(t.id for t in self.templates),
        )

    def templates_of(self, kind: str) -> tuple[Template, ...]:
        return tuple(t for t in self.templates if t.kind == kind)


def _t(mode: str, name: str, kind: str, text: str, **kw) -> Template:
    return Template(id=f"{mode}.{name}", kind=kind, text=text, **kw)


def build() -> dict[str, Mode]:
    """Every mode by name, in VHTest's order: object properties first, then relations."""
    modes = [
        Mode(
            "existence",
            "object",
            "Whether an object is present in the picture.",
            "An object the other image of the pair has and this one lacks (or the reverse), or an object "
            "that is easy to imagine but absent.",
            (
                # {where} is a place in the picture ("on the table", "in the centre of the picture"): the
                # question reads as English whatever place is given
                _t(
                    "existence",
                    "what_is",
                    OEQ,
                    "What is {where}?",
                    ynq="existence.is_there_at",
                    derive="value",
                    answer_slot="object",
                ),
                _t("existence", "is_there_at", YNQ, "Is there a {object} {where}?"),
                _t("existence", "is_there", YNQ, "Is there a {object} in the picture?"),
            ),
        ),
        Mode(
            "shape",
            "object",
            "The shape of one object.",
            "An object whose shape differs between the two images, or is unusual for its kind.",
            (
                _t(
                    "shape",
                    "what_shape",
                    OEQ,
                    "What is the shape of the {object}?",
                    ynq="shape.is_shape",
                    derive="value",
                    answer_slot="shape",
                ),
                _t("shape", "is_shape", YNQ, "Is the {object} {shape}?"),
            ),
            alternatives=("round", "square", "rectangular", "triangular", "oval", "heart-shaped", "star-shaped"),
        ),
        Mode(
            "color",
            "object",
            "The color of one object.",
            "An object whose color differs between the two images, or is unusual for its kind.",
            (
                _t(
                    "color",
                    "what_color",
                    OEQ,
                    "What color is the {object}?",
                    ynq="color.is_color",
                    derive="value",
                    answer_slot="color",
                ),
                _t("color", "is_color", YNQ, "Is the {object} {color}?"),
            ),
            alternatives=(
                "red",
                "blue",
                "green",
                "yellow",
                "black",
                "white",
                "brown",
                "orange",
                "pink",
                "purple",
                "gray",
            ),
        ),
        Mode(
            "orientation",
            "object",
            "Which way one object faces, seen from the camera.",
            "An object facing a different way in the two images; use the camera's point of view.",
            (
                _t(
                    "orientation",
                    "facing",
                    OEQ,
                    "From the camera's point of view, which way is the {object} facing?",
                    ynq="orientation.is_facing",
                    derive="value",
                    answer_slot="direction",
                ),
                _t(
                    "orientation",
                    "is_facing",
                    YNQ,
                    "From the camera's point of view, is the {object} facing {direction}?",
                ),
            ),
            alternatives=("left", "right", "towards the camera", "away from the camera", "up", "down"),
        ),
        Mode(
            "ocr",
            "object",
            "The text written on an object.",
            "Legible text (signs, labels, screens) whose content a model could misread or invent.",
            (
                _t(
                    "ocr",
                    "what_text",
                    OEQ,
                    "What does the text on the {object} say?",
                    ynq="ocr.does_say",
                    derive="value",
                    answer_slot="text",
                ),
                _t("ocr", "does_say", YNQ, 'Does the text on the {object} say "{text}"?'),
            ),
        ),
        Mode(
            "size",
            "relation",
            "Which of several objects is larger.",
            "Objects whose relative size differs between the images or contradicts what is usual.",
            (
                _t(
                    "size",
                    "which_larger",
                    OEQ,
                    "Which is larger in the picture, the {a} or the {b}?",
                    ynq="size.is_larger",
                    derive="pick",
                    choices=("a", "b"),
                ),
                _t("size", "is_larger", YNQ, "Is the {a} larger than the {b} in the picture?"),
                _t(
                    "size",
                    "largest",
                    OEQ,
                    "Which {object} is the largest?",
                    ynq="size.is_largest",
                    derive="value",
                    answer_slot="which",
                ),
                _t("size", "is_largest", YNQ, "Is the {which} the largest {object} in the picture?"),
            ),
        ),
        Mode(
            "position",
            "relation",
            "Where one object is relative to another.",
            "Two objects whose left/right, above/below or front/behind relation differs between the images.",
            (
                _t(
                    "position",
                    "where",
                    OEQ,
                    "Where is the {a} relative to the {b}?",
                    ynq="position.is_at",
                    derive="value",
                    answer_slot="relation",
                ),
                _t("position", "is_at", YNQ, "Is the {a} {relation} the {b}?"),
                _t("position", "is_left_of", YNQ, "Is the {a} to the left of the {b}?"),
            ),
            alternatives=("to the left of", "to the right of", "above", "below", "in front of", "behind"),
        ),
        Mode(
            "counting",
            "relation",
            "How many objects of a kind there are.",
            "A kind of object whose count differs between the images; count only clearly visible ones.",
            (
                _t(
                    "counting",
                    "how_many",
                    OEQ,
                    "How many {object} are there in the picture?",
                    ynq="counting.exactly",
                    derive="value",
                    answer_slot="n",
                ),
                _t("counting", "exactly", YNQ, "Are there exactly {n} {object} in the picture?"),
            ),
            numeric=True,
        ),
    ]
    return {m.name: m for m in modes}
