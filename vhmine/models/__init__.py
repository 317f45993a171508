"""The stages that ask models: probe, describe, generate, draft, blind.

Read the curation store (through vhmine.curate) and models through vhmine.llm (OpenAI-compatible) or local
diffusers pipelines; write model responses, verdicts, descriptions, generated images, drafts and blind
answers back into the store. One module per stage, each with its entry of the same name: `probe`,
`describe`, `generate`, `draft`, `blind`; this face names them `run_probe` ... `run_blind`, with their options, so
the modules keep their names. The rules they share with the curation library and eval (the
draft and variant checks, the LLM judge's request) are in vhmine.rules.
"""

from vhmine.models.blind import BlindOptions
from vhmine.models.blind import blind as run_blind
from vhmine.models.describe import DescribeOptions
from vhmine.models.describe import describe as run_describe
from vhmine.models.draft import DraftOptions
from vhmine.models.draft import draft as run_draft
from vhmine.models.generate import GenerateOptions, parse_backend
from vhmine.models.generate import generate as run_generate
from vhmine.models.probe import ProbeOptions, check_kinds, judge_verdict, rule_verdict
from vhmine.models.probe import probe as run_probe

__all__ = [
    # each stage: its options and its entry (run_<stage>: the module of the stage's name stays the module)
    "ProbeOptions",
    "run_probe",
    "check_kinds",
    "DescribeOptions",
    "run_describe",
    "GenerateOptions",
    "run_generate",
    "parse_backend",
    "DraftOptions",
    "run_draft",
    "BlindOptions",
    "run_blind",
    # probe's verdicts, which manipulate's detection reads the same way
    "rule_verdict",
    "judge_verdict",
]
