"""Which words of a question change what it asserts: the one list the template matching (vhmine.rules.modes) and the
variant check (vhmine.rules.variant) read, so that a wording one of them cannot read surely is never read by the other.

Reads and writes nothing; standard library only. A negation ("not", "isn't"), a comparison ("other than", "more"),
a quantifier ("any", "only") or a disjunction ("or") that the template's own text does not have makes a reworded
question one the rules cannot map to the template with certainty: it is the worker's own wording (its truth is the
worker's fact, never derived again). Text in double quotes is a value as a whole (ocr's `"{text}"`): its words are
not the question's function words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FUNCTION_WORDS = frozenset(
    "not no never none nothing nobody neither nor without except besides instead rather other than more less fewer "
    "most least only almost nearly about approximately around roughly also either or any some".split()
)
# a template's own words that carry no meaning of their own: what a rewording may drop and still be the template
GLUE = frozenset(
    "a an the is are was were be there of in on at to from for by with this that it its what which how "
    "does do did say says picture image".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')


def words(text: str) -> list[str]:
    """Lower-case words ("isn't" one word; a typographic apostrophe read as ')."""
    return _WORD.findall(str(text or "").lower().replace("’", "'"))


def is_function_word(word: str) -> bool:
    return word in FUNCTION_WORDS or word.endswith("n't")


def added_function_words(question: str, allowed: Iterable[str]) -> list[str]:
    """The function words of `question` (outside double quotes) that none of the `allowed` texts (the template's
    literal text, the slot values given) holds, in order."""
    ok = {w for text in allowed for w in words(text)}
    return [w for w in words(_QUOTED.sub(" ", str(question or ""))) if is_function_word(w) and w not in ok]


def content_words(text: str) -> set[str]:
    """The words of a template's literal text that say what it asks ("shape", "color", "many", "larger")."""
    return {w for w in words(text) if w not in GLUE and not is_function_word(w)}
