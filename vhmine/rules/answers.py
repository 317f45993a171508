"""Reading a yes/no answer: the one registry of rules that everything reading yes/no goes through.

Reads and writes nothing. Each rule maps an answer text to True (yes), False (no) or None (it cannot
be read as either). eval and probe read model answers with the rule they are given; the curation
library (vhmine.rules.modes.yes_no_of: workers' reference answers, blind reviews) reads with DEFAULT_RULE,
so a reference answer the curation accepts is read the same way by eval's default rule. Rules:

- ``vhtest``: VHTest's own `classify_response` (Evaluation/LLaVA/llava_ynq_version.py): after
  stripping surrounding whitespace (its script strips the decoded output first), the first three
  characters lower-cased are "yes" -> yes, else the first two are "no" -> no, else None (VHTest's
  "wrong format", which its script scores as a failure, as eval does). So "Yesterday..." reads yes,
  "Nope" and "Not sure" read no, "Maybe" and " - yes" are unreadable;
- ``firstword``: the first word is "yes" or "no" (case and punctuation aside): "Yes?" and "No, two"
  read, "Yesterday" and "Not sure" do not;
- ``pope``: POPE's rule (its `evaluate.py`): keep the first sentence, drop commas; "no", "No" or
  "not" among its space-separated words means no, anything else yes (never None);
- ``strict``: the whole answer is "yes" or "no", nothing else;
- ``vlmevalkit``: VLMEvalKit's own (`YOrN_Extraction` after `process_punctuation`, as its
  ImageYORNDataset.evaluate reads str() of each cell its result-file loading gives): the word "yes"
  present and "no" absent -> yes, the reverse -> no, else None (its "Unknown", scored wrong). Its list of
  punctuation, the once-per-character choice between deleting and spacing it, the 32-period limit and the
  cells pandas reads as NaN ("None", "N/A", "" -> "nan") are reproduced (vhmine.rules.harness,
  the copy the VLMEvalKit export embeds). So "Nope", "Not sure", "Yesterday", "No, but yes" and "None"
  read as None, and "I think yes" as yes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from vhmine.errors import InputError

DEFAULT_RULE = "vhtest"


def _vhtest(answer: str) -> bool | None:
    # the one copy of VHTest's classify_response: the one the harness exports embed
    from vhmine.rules.harness import read_yes_no

    return read_yes_no(answer)


def _firstword(answer: str) -> bool | None:
    first = re.split(r"[\s,.;:!?]+", (answer or "").strip().lower(), maxsplit=1)[0]
    return {"yes": True, "no": False}.get(first)


def _pope(answer: str) -> bool | None:
    text = answer or ""
    if "." in text:
        text = text.split(".")[0]
    words = text.replace(",", "").split(" ")
    return not ("No" in words or "not" in words or "no" in words)


def _strict(answer: str) -> bool | None:
    return {"yes": True, "no": False}.get((answer or "").strip().strip(".!").strip().lower())


def _vlmevalkit(answer: str) -> bool | None:
    from vhmine.rules.harness import read_yes_no_vlmevalkit

    return read_yes_no_vlmevalkit(answer)


@dataclass(frozen=True)
class YesNoRule:
    name: str
    parse: Callable[[str], bool | None]
    doc: str


_RULES = {
    r.name: r
    for r in (
        YesNoRule("vhtest", _vhtest, "starts with the letters yes or no (VHTest's classify_response)"),
        YesNoRule("firstword", _firstword, "the first word is yes or no"),
        YesNoRule("pope", _pope, "no/No/not in the first sentence means no, else yes (POPE)"),
        YesNoRule("strict", _strict, "exactly yes or no"),
        YesNoRule(
            "vlmevalkit", _vlmevalkit, "the word yes without the word no, or the reverse (VLMEvalKit's YOrN_Extraction)"
        ),
    )
}


def rule_names() -> tuple[str, ...]:
    return tuple(_RULES)


def get_rule(name: str) -> YesNoRule:
    if name not in _RULES:
        raise InputError(f"unknown yes/no rule {name!r}: choose one of {', '.join(_RULES)}")
    return _RULES[name]


def parse_yes_no(answer: str, rule: str = DEFAULT_RULE) -> bool | None:
    """True for yes, False for no, None when `rule` cannot read the answer as either."""
    return get_rule(rule).parse(answer)


def yes_no_verdict(answer: str, truth: bool | None, rule: str = DEFAULT_RULE) -> str | None:
    """A yes/no answer against its truth: "correct" or "hallucinated"; None when `rule` cannot read it (or there is
    no truth). probe's verdicts, blind answers and what curate re-scores when a truth changes all read it so."""
    said = parse_yes_no(answer, rule)
    if said is None or truth is None:
        return None
    return "correct" if said == truth else "hallucinated"
