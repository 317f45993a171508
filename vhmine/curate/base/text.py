"""A worker's free text (a reason, an answer, a question) as the store keeps it. Reads and writes nothing."""

from __future__ import annotations


def collapse_whitespace(value: str | None) -> str:
    """A worker's free text with its whitespace collapsed to single spaces (None: "")."""
    return " ".join((value or "").split())
