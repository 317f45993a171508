"""The stages that ask models: probe, describe, generate, draft, blind.

Read the curation store (through vhmine.curate) and models through vhmine.llm (OpenAI-compatible) or local
diffusers pipelines; write model responses, verdicts, descriptions, generated images, drafts and blind
answers back into the store. One module per stage, each with its entry of the same name: `probe`,
`describe`, `generate`, `draft`, `blind`. The rules they share with the curation library and eval (the
draft and variant checks, the LLM judge's request) are in vhmine.rules.
"""
