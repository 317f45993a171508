"""vhmine: mine visual-hallucination test cases for multi-modal LLMs and turn them into benchmarks.

Stages, in data-flow order (one module each): embed -> mine -> (seed, probe, describe, generate,
curate) -> export -> eval. Heavy libraries (torch, open_clip, transformers, faiss) are imported
inside the functions that need them, so importing this package is instant.
"""

__version__ = "0.1.0"
