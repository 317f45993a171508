"""Reading a model's yes/no answer: a small registry of rules (probe judges YNQ with it; so does eval).

Reads and writes nothing. Each rule maps an answer text to True (yes), False (no) or None (it cannot
be read as either). Rules:

- ``vhtest``: VHTest's rule: the answer starts with "yes" or "no" (case and punctuation aside). It
  reads the first word, so "Not sure" and "Yesterday" are unreadable, where VHTest's own character
  prefix test (`[:3] == "yes"`, `[:2] == "no"`) would take them as no and yes;
- ``pope``: POPE's rule (its `evaluate.py`): keep the first sentence, drop commas; "no", "No" or
  "not" among its words means no, anything else yes (never None);
- ``strict``: the whole answer is "yes" or "no", nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

from .errors import InputError

DEFAULT_RULE = "vhtest"


def _vhtest(answer: str) -> Optional[bool]:
    first = re.split(r"[\s,.;:!?]+", (answer or "").strip().lower(), maxsplit=1)[0]
    return {"yes": True, "no": False}.get(first)


def _pope(answer: str) -> Optional[bool]:
    text = answer or ""
    if "." in text:
        text = text.split(".")[0]
    words = text.replace(",", "").split(" ")
    return not ("No" in words or "not" in words or "no" in words)


def _strict(answer: str) -> Optional[bool]:
    return {"yes": True, "no": False}.get((answer or "").strip().strip(".!").strip().lower())


@dataclass(frozen=True)
class YesNoRule:
    name: str
    parse: Callable[[str], Optional[bool]]
    doc: str


_RULES = {r.name: r for r in (
    YesNoRule("vhtest", _vhtest, "starts with yes or no (VHTest)"),
    YesNoRule("pope", _pope, "no/No/not in the first sentence means no, else yes (POPE)"),
    YesNoRule("strict", _strict, "exactly yes or no"),
)}


def rule_names() -> tuple[str, ...]:
    return tuple(_RULES)


def get_rule(name: str) -> YesNoRule:
    if name not in _RULES:
        raise InputError(f"unknown yes/no rule {name!r}: choose one of {', '.join(_RULES)}")
    return _RULES[name]


def parse_yes_no(answer: str, rule: str = DEFAULT_RULE) -> Optional[bool]:
    """True for yes, False for no, None when `rule` cannot read the answer as either."""
    return get_rule(rule).parse(answer)
