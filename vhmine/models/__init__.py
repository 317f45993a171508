"""The stages that ask models: probe, describe, generate, draft (and draft_check, its rules), blind, judge.

Read the curation store (through vhmine.curate) and models through vhmine.llm (OpenAI-compatible) or local
diffusers pipelines; write model responses, verdicts, descriptions, generated images, drafts and blind
answers back into the store. One module per stage, each with its entry of the same name: `probe`,
`describe`, `generate`, `draft`, `blind`; judge is the LLM judge of open answers that probe, blind and
eval share; draft_check holds the rules a draft (or a worker's edit) must pass.
"""
