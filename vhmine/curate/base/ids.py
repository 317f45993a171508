"""Ids of what curation writes: a fresh one for a new row, and the id of a yes/no question drafted from an open one.

Reads and writes nothing: pure functions of their arguments (and, for `new_id`, of a random uuid).
"""

from __future__ import annotations

import hashlib
import uuid


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def derived_id(source_id: str, question: str) -> str:
    """The id of the yes/no question drafted from the open question `source_id` as `question`: a function of the
    source and the draft alone, so the same answers draft the same ids whatever path led there
    (curate.decisions.derived)."""
    key = " ".join(question.lower().split()).rstrip("?. ")
    return hashlib.sha256(f"{source_id}\n{key}".encode()).hexdigest()[:16]
