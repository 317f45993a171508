"""The ground floor: the rules several stages read, importing no stage.

Reads and writes nothing. The curation library, probe, blind, eval and the exports all read these, so none of
them imports another stage for a rule; they import them from here, this package's face, and never one of its
modules (`tests/test_layout.py`). The names, grouped by the module that holds them:

- the eight VH modes (`modes`, their data in `mode_registry`): `Mode`, `Template`, the kinds `KINDS`, `OEQ`,
  `YNQ`; looking them up (`get_mode`, `mode_names`, `selected_modes`, `get_template`, `own_template_id`), their
  templates' slots (`fill`, `slots_of`, `slot_hint`), the checks of a question and its answers
  (`check_question`, `check_oeq_answers`, `check_ynq`, `clean_answers`, `normalize_answer`), yes/no drafting
  (`draft_ynq`, `YnqDraft`, `yes_no_of`);
- yes/no reading (`answers`, the one registry everything reading yes/no goes through): `DEFAULT_RULE`,
  `get_rule`, `parse_yes_no`, `yes_no_verdict`; `match_oeq`, the open answers' `match` (`harness`, the rules the
  harness exports embed as they are, standard library only: `harness_source`);
- drafts (`draft_check`, `variant`): `DraftContent`, `parse_draft`, `check_content`, `check_variant`,
  `undecided_message`;
- the LLM judge (`judge`): `judge_request`, `judge_prompt`, `judge_name`, `judge_iter`, `parse_verdict`,
  `JUDGED_RIGHT`, `RESPONSE_VERDICT`; MMVP's grader, its gpt_grader.py (`mmvp`): `grading_request`,
  `grading_fields`, `read_grade`, `grader_id`, `pair_accuracy`, `LETTERS`, `YES_NO_OPTIONS`;
- what status and export say of a benchmark's size and balance (`sample_size`, `balance`): `shortfall`,
  `shortfall_line`, `balance_hint`, `balanced_option`.

Its modules import only the shared vocabulary (errors, llm, prompts) and each other, never this face.
"""

from vhmine.rules.answers import DEFAULT_RULE, get_rule, parse_yes_no, yes_no_verdict
from vhmine.rules.balance import balance_hint, balanced_option
from vhmine.rules.draft_check import DraftContent, check_content, parse_draft
from vhmine.rules.harness import match_oeq
from vhmine.rules.judge import (
    JUDGED_RIGHT,
    RESPONSE_VERDICT,
    judge_iter,
    judge_name,
    judge_prompt,
    judge_request,
    parse_verdict,
)
from vhmine.rules.mmvp import (
    LETTERS,
    YES_NO_OPTIONS,
    grader_id,
    grading_fields,
    grading_request,
    pair_accuracy,
    read_grade,
)
from vhmine.rules.modes import (
    KINDS,
    OEQ,
    YNQ,
    Mode,
    Template,
    YnqDraft,
    check_oeq_answers,
    check_question,
    check_ynq,
    clean_answers,
    draft_ynq,
    fill,
    get_mode,
    get_template,
    mode_names,
    normalize_answer,
    own_template_id,
    selected_modes,
    slot_hint,
    slots_of,
    yes_no_of,
)
from vhmine.rules.sample_size import shortfall, shortfall_line
from vhmine.rules.variant import check_variant, undecided_message


def harness_source() -> str:
    """The source of the harness rules (match, the yes/no readers) as the harness exports embed it."""
    import inspect

    from vhmine.rules import harness

    return inspect.getsource(harness)


__all__ = [
    # the modes
    "Mode",
    "Template",
    "KINDS",
    "OEQ",
    "YNQ",
    "get_mode",
    "mode_names",
    "selected_modes",
    "get_template",
    "own_template_id",
    "fill",
    "slots_of",
    "slot_hint",
    "check_question",
    "check_oeq_answers",
    "check_ynq",
    "clean_answers",
    "normalize_answer",
    "draft_ynq",
    "YnqDraft",
    "yes_no_of",
    # yes/no reading and match
    "DEFAULT_RULE",
    "get_rule",
    "parse_yes_no",
    "yes_no_verdict",
    "match_oeq",
    "harness_source",
    # drafts
    "DraftContent",
    "parse_draft",
    "check_content",
    "check_variant",
    "undecided_message",
    # the judge and MMVP's grader
    "judge_request",
    "judge_prompt",
    "judge_name",
    "judge_iter",
    "parse_verdict",
    "JUDGED_RIGHT",
    "RESPONSE_VERDICT",
    "grading_request",
    "grading_fields",
    "read_grade",
    "grader_id",
    "pair_accuracy",
    "LETTERS",
    "YES_NO_OPTIONS",
    # size and balance
    "shortfall",
    "shortfall_line",
    "balance_hint",
    "balanced_option",
]
