"""Generated images already recorded in the curation store, so generate renders each one once.

Reads `generations` rows (mode, prompt, seed, backend settings) of one backend and model; writes
nothing (curate.work.queue.add_generation records a new image and queues it).
"""

from __future__ import annotations

from sqlalchemy import select

from vhmine.store import (
    Generation,
    Store,
)


def recorded_renders(store: Store, backend: str, model: str) -> list[tuple[str, str, object, dict]]:
    """(mode, prompt, seed, params) of every image `backend` ("openai", "diffusers") and `model` made."""
    with store.session(write=False) as s:
        return [
            tuple(r)
            for r in s.execute(
                select(Generation.mode, Generation.prompt, Generation.seed, Generation.params).where(
                    Generation.backend == backend, Generation.model == model
                )
            ).all()
        ]
