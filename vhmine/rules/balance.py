"""The yes/no balance of an export, as options: which `--per-mode` samples every mode 50/50, else
`--allow-unbalanced`. Pure functions over mode -> (yes, no) counts; reads and writes nothing. Used by export's
errors (vhmine.export.job) and by `vhmine status`'s next export (which imports nothing heavy for it).
"""

from __future__ import annotations


def balanced_per_mode(bal: dict[str, tuple[int, int]]) -> int:
    """The largest --per-mode whose sample balances every mode's yes/no questions (even; 0: some mode has no
    'yes' or no 'no' question, so no --per-mode balances it)."""
    return 2 * min((min(y, n) for y, n in bal.values()), default=0)


def balance_hint(bal: dict[str, tuple[int, int]], per_mode: int | None = None) -> str:
    """What to pass for a balanced export: `--per-mode N` (the most every mode can balance, and no more than
    `per_mode` when one was asked), else `--allow-unbalanced`; an option that surely works as printed."""
    n = balanced_per_mode(bal)
    if per_mode is not None:
        n = min(n, per_mode - per_mode % 2)
    if n >= 2:
        return f"pass --per-mode {n} to sample a balanced subset, or --allow-unbalanced"
    return "as no --per-mode balances a mode without 'yes' or without 'no' questions, pass --allow-unbalanced"


def balanced_option(bal: dict[str, tuple[int, int]]) -> str:
    """The option a plain export needs to succeed: "" when every mode is 50/50 already, else " --per-mode N"
    (balance_hint's N), else " --allow-unbalanced"."""
    if all(y == n for y, n in bal.values()):
        return ""
    n = balanced_per_mode(bal)
    return f" --per-mode {n}" if n >= 2 else " --allow-unbalanced"
