"""vhmine's answer rules, self-contained, for the files an export hands to an evaluation harness.

Reads and writes nothing; imports only the standard library. The lmms-eval export (utils.py) and the
VLMEvalKit export (the registration file) embed this module's source as it is, so a harness user
scores answers exactly as `vhmine eval` does without installing vhmine. The originals are
vhmine.eval.answers (the default yes/no rule, VHTest's classify_response), vhmine.modes.normalize_answer
and vhmine.eval.job (match_oeq, and the suffix its prompt adds to a yes/no question); the tests check
that these copies give the same results.
"""

import re

YNQ_SUFFIX = " ONLY answer yes or no."  # what vhmine eval (and VHTest's YNQ script) appends to a yes/no question

NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
ARTICLES = re.compile(r"^(the|a|an)\s+")


def read_yes_no(answer):
    """VHTest's classify_response: True for yes, False for no, None when the answer is neither."""
    text = (answer or "").strip()
    if text[:3].lower() == "yes":  # VHTest slices first, then lower-cases
        return True
    if text[:2].lower() == "no":
        return False
    return None


def normalize_answer(text):
    """Lower case, no surrounding punctuation or leading article, number words as digits."""
    s = " ".join((text or "").lower().split())
    s = s.strip(" .,!?;:\"'")
    s = ARTICLES.sub("", s)
    return str(NUMBER_WORDS[s]) if s in NUMBER_WORDS else s


def _norm_words(text):
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", (text or "").lower())
    return " " + " ".join(normalize_answer(w) for w in words) + " "


def match_oeq(answer, references):
    """Any reference answer appears in the answer as whole words (case, punctuation and number words aside)."""
    a = _norm_words(answer)
    return any(_norm_words(r).strip() and _norm_words(r) in a for r in references)
