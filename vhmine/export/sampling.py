"""Which ready instances an export takes, and what it counts of them: `sample` (up to --per-mode items per mode
and kind by a hash of (seed, pair or instance id), YNQ half yes and half no, then the yes/no balance check that
stops an unbalanced export unless --allow-unbalanced), `balance` and `unbalanced_message` (mode -> yes/no and
the one line that says by how much; vhmine.rules.balance names the options that balance it), `counts` and
`group_counts` (what manifest.json records per mode and kind). Pure functions over a Benchmark (vhmine.bench);
reads and writes nothing. vhmine.export.job calls them.
"""

from __future__ import annotations

import hashlib

from vhmine.bench import OEQ, YNQ, Benchmark
from vhmine.errors import UnbalancedError
from vhmine.rules import balance_hint


def _order(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def _group(item) -> str:
    return item.pair_id or item.id


def balance(bench: Benchmark) -> dict[str, tuple[int, int]]:
    """mode -> (yes, no) over the YNQ items."""
    out: dict[str, tuple[int, int]] = {}
    for it in bench:
        if it.kind == YNQ:
            y, n = out.get(it.mode, (0, 0))
            out[it.mode] = (y + bool(it.truth), n + (not it.truth))
    return out


def unbalanced_message(bal: dict[str, tuple[int, int]]) -> str | None:
    bad = [(m, y, n) for m, (y, n) in bal.items() if y != n]
    if not bad:
        return None
    parts = []
    for m, y, n in bad:
        more, less = ("yes", "no") if y > n else ("no", "yes")
        parts.append(
            f"{m}: {y} yes / {n} no ({100 * max(y, n) / (y + n):.1f}% {more}; {abs(y - n)} more '{less}' "
            f"question(s) needed, or {abs(y - n)} '{more}' dropped)"
        )
    return (
        "yes/no questions are not 50/50 within each mode: "
        + "; ".join(parts)
        + ". Write more in the app, or "
        + balance_hint(bal)
    )


def sample(bench: Benchmark, per_mode: int | None, seed: int = 0, allow_unbalanced: bool = False) -> Benchmark:
    """Up to `per_mode` items per mode and kind (YNQ: half yes, half no), by hash order; then the balance check."""
    items = list(bench)
    if per_mode is not None:
        whole, picked = balance(bench), []
        for m in bench.modes():
            for kind in (OEQ, YNQ):
                pool = sorted(
                    (it for it in items if it.mode == m and it.kind == kind),
                    key=lambda it: (_order(seed, _group(it)), it.id),
                )
                if kind == OEQ:
                    picked += pool[:per_mode]
                    continue
                if not pool:
                    continue
                half = per_mode // 2
                yes = [it for it in pool if it.truth][: per_mode - half if allow_unbalanced else half]
                no = [it for it in pool if not it.truth][:half]
                if per_mode % 2 and not allow_unbalanced:
                    raise UnbalancedError(
                        f"--per-mode {per_mode} is odd: a yes/no benchmark needs an even number per mode; "
                        + balance_hint(whole, per_mode)
                    )
                if not allow_unbalanced and (len(yes) < half or len(no) < half):
                    raise UnbalancedError(
                        f"mode {m} has {sum(1 for it in pool if it.truth)} yes and"
                        f" {sum(1 for it in pool if not it.truth)} no questions: {half} of each are needed for"
                        f" --per-mode {per_mode}. Write more in the app, or {balance_hint(whole, per_mode)}"
                    )
                picked += yes + no
        keep = {it.id for it in picked}
        items = [it for it in items if it.id in keep]  # the store's order (mode, kind, id), not the sample's
    out = Benchmark(bench.name, items, bench.root, bench.source)
    msg = unbalanced_message(balance(out))
    if msg and not allow_unbalanced:
        raise UnbalancedError(msg)
    return out


def counts(bench: Benchmark) -> dict:
    out: dict[str, dict] = {}
    for it in bench:
        c = out.setdefault(it.mode, {OEQ: 0, YNQ: 0, "yes": 0, "no": 0})
        c[it.kind] += 1
        if it.kind == YNQ:
            c["yes" if it.truth else "no"] += 1
    return out


def group_counts(bench: Benchmark) -> dict:
    """mode -> kind -> number of pair groups (vhmine.bench.assign_groups)."""
    out: dict[str, dict[str, set]] = {}
    for it in bench:
        if it.group_id:
            out.setdefault(it.mode, {}).setdefault(it.kind, set()).add(it.group_id)
    return {m: {k: len(g) for k, g in per.items()} for m, per in out.items()}
