"""The ground floor: the rules several stages read, importing no stage.

Reads and writes nothing. `modes` (the eight VH modes, their templates, yes/no drafting), `answers` (the one
registry of yes/no reading rules), `harness` (the answer rules the harness exports embed as they are:
standard library only), `variant` (what a drafted yes/no variant asserts), `draft_check` (the rules a draft,
or a worker's edit, must pass), `judge` (the LLM judge's request and verdict), `mmvp` (MMVP's grader, its
gpt_grader.py: request, reading of the reply, pairs) and `sample_size` (how many items per mode tell two models
apart: status and export say which modes fall short). The curation library,
probe, blind, eval and the exports all read these, so none of them imports another stage for a rule. It
imports only the shared vocabulary (errors, llm, prompts) and nothing in this `__init__`, so importing one
rule runs no other.
"""
