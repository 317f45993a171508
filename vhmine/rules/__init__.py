"""The ground floor: the rules several stages read, importing no stage.

Reads and writes nothing. `modes` (the eight VH modes, their templates, yes/no drafting), `answers` (the one
registry of yes/no reading rules), `harness` (the answer rules the harness exports embed as they are:
standard library only), `variant` (what a drafted yes/no variant asserts), `draft_check` (the rules a draft,
or a worker's edit, must pass) and `judge` (the LLM judge's request and verdict). The curation library,
probe, blind, eval and the exports all read these, so none of them imports another stage for a rule. It
imports only the shared vocabulary (errors, llm, prompts) and nothing in this `__init__`, so importing one
rule runs no other.
"""
