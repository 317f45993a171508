"""vhmine's answer rules, self-contained, for the files an export hands to an evaluation harness.

Reads and writes nothing; imports only the standard library. The lmms-eval export (utils.py) and the
VLMEvalKit export (the registration file) embed this module's source as it is, so a harness user
scores answers exactly as `vhmine eval` does without installing vhmine. The originals are
vhmine.rules.answers (the default yes/no rule, VHTest's classify_response), vhmine.rules.modes.normalize_answer
and vhmine.eval.job (match_oeq, and the suffix its prompt adds to a yes/no question); the tests check
that these copies give the same results.
"""

import re

YNQ_SUFFIX = " ONLY answer yes or no."  # what vhmine eval (and VHTest's YNQ script) appends to a yes/no question

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
ARTICLES = re.compile(r"^(the|a|an)\s+")


def read_yes_no(answer):
    """VHTest's classify_response: True for yes, False for no, None when the answer is neither."""
    text = (answer or "").strip()
    if text[:3].lower() == "yes":  # VHTest slices first, then lower-cases
        return True
    if text[:2].lower() == "no":
        return False
    return None


# VLMEvalKit's own yes/no reading (open-compass/VLMEvalKit: vlmeval/smp/misc.py process_punctuation,
# vlmeval/dataset/utils/yorn.py YOrN_Extraction, applied by image_yorn.py ImageYORNDataset.evaluate to
# str() of each cell its load() read): `vhmine eval --rule vlmevalkit`, and the export's YNQ_RULE "vlmevalkit".
VLMEVALKIT_PUNCT = [
    ";",
    r"/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
_COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
_PERIOD_STRIP = re.compile(r"(?<!\d)\.(?!\d)")
# the cells pandas reads as NaN by default (read_csv / read_excel, pandas >= 2), as VLMEvalKit's load() does:
# its evaluate then reads str(NaN) == "nan"
PANDAS_NA = frozenset(
    [
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    ]
)


def process_punctuation(in_text):
    """VLMEvalKit's process_punctuation, quirks included: whether a listed character is deleted or becomes a
    space is decided once per character against the whole original text (any digit,digit deletes them all),
    and its `periodStrip.sub('', outText, re.UNICODE)` passes re.UNICODE (32) as the count."""
    out_text = in_text
    for p in VLMEVALKIT_PUNCT:
        if (p + " " in in_text or " " + p in in_text) or (re.search(_COMMA_STRIP, in_text) is not None):
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    return _PERIOD_STRIP.sub("", out_text, count=int(re.UNICODE))


def read_yes_no_vlmevalkit(answer):
    """VLMEvalKit's YOrN_Extraction: True when the word "yes" is there and "no" is not, False for the reverse,
    None (its "Unknown") otherwise; a cell its result-file loading reads as NaN ("None", "N/A", "") is "nan"."""
    text = "nan" if answer is None or answer in PANDAS_NA else str(answer)
    words = process_punctuation(text.lower()).split()
    if "yes" in words and "no" not in words:
        return True
    if "yes" not in words and "no" in words:
        return False
    return None


def normalize_answer(text):
    """Lower case, no surrounding punctuation or leading article, number words as digits."""
    s = " ".join((text or "").lower().split())
    s = s.strip(" .,!?;:\"'")
    s = ARTICLES.sub("", s)
    return str(NUMBER_WORDS[s]) if s in NUMBER_WORDS else s


ARTICLE_WORDS = ("the", "a", "an")


def _words(text):
    """The text's words, each normalised (lower case, number words as digits)."""
    return [normalize_answer(w) for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", (text or "").lower())]


def _bare(words):
    """The words without articles, as normalize_answer drops them."""
    return [w for w in words if w not in ARTICLE_WORDS]


def _within(part, words):
    return bool(part) and f" {' '.join(part)} " in f" {' '.join(words)} "


def match_oeq(answer, references):
    """Any reference answer appears in the answer as whole words (case, punctuation, articles and number words aside).

    "a dog" matches "Dog" and "The dog." (never "a cat" or "hotdog"); a reference that is only an article
    (the option letter "A") must appear as that word."""
    words = _words(answer)
    for ref in references:
        r = _words(ref)
        if _within(_bare(r), _bare(words)) if _bare(r) else _within(r, words):
            return True
    return False
