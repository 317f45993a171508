"""Which benchmark item a harness's row answers: the id checks and the position rule vhmine's exports use.

Reads a Benchmark; writes nothing. vhmine's VLMEvalKit TSVs number rows `index` 0, 1, ... within each
kind's file (`<name>_<kind>.tsv`, items in benchmark order) and keep the item id in `vhmine_id`; an
lmms-eval task's `doc_id` is the row's position in its kind's data. `items_of_kind` gives that order;
`kind_in_name` reads the kind from a dataset or task name; `check_question` refuses a row whose
question is another item's, so a file from another benchmark is never scored by position.
"""

from __future__ import annotations

import re
from pathlib import Path

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark
from vhmine.errors import FormatError


def aliases(bench: Benchmark) -> dict[str, str]:
    """Other spellings of item ids: POPE-style files name items by their bare question_id, so where every id is
    `<file>:<n>` and no two share an `<n>`, `n` -> `<file>:<n>`; else none."""
    ids = [it.id for it in bench]
    alias = {i.split(":", 1)[1]: i for i in ids if ":" in i}
    return alias if len(alias) == len(ids) else {}


def canonical_id(rid: str, ids, alias: dict[str, str]) -> str:
    """The item id a row's id names: itself when an item has it, else the item it is an alias of (else itself)."""
    return rid if rid in ids else alias.get(rid, rid)


def check_ids(preds: dict[str, str], bench: Benchmark, path: Path) -> dict[str, str]:
    """`preds` keyed by item ids: aliases (`aliases`) replaced by the id; FormatError for an id no item has, or
    for two spellings of one item's id (which answer counts would depend on the file's order)."""
    ids = bench.by_id()
    alias = aliases(bench)
    out: dict[str, str] = {}
    spelt: dict[str, str] = {}
    unknown = []
    for k, v in preds.items():
        iid = canonical_id(k, ids, alias)
        if iid not in ids:
            unknown.append(k)
        elif iid in out:
            raise FormatError(
                f"{path}: item {iid!r} is answered twice, as {spelt[iid]!r} and as {k!r}: give each item's answer once"
            )
        out[iid], spelt[iid] = v, k
    if unknown:
        raise FormatError(
            f"{path}: {len(unknown)} id(s) are not in the benchmark {bench.source or bench.name} "
            f"(first: {unknown[0]!r}): is it the right benchmark?"
        )
    return out


def kind_in_name(name: str, bench: Benchmark) -> str | None:
    """YNQ or OEQ when `name` holds one as a word (`vh_YNQ`, `vhmine_ynq`), else the benchmark's only kind, else
    None."""
    found = {k for k in (OEQ, YNQ) if re.search(rf"(?:^|[^a-z0-9]){k.lower()}(?:$|[^a-z0-9])", name.lower())}
    if len(found) == 1:
        return found.pop()
    kinds = {it.kind for it in bench}
    return kinds.pop() if len(kinds) == 1 else None


def items_of_kind(bench: Benchmark, kind: str) -> list[BenchItem]:
    """The items of one kind in benchmark order: row k of that kind's export is the k-th."""
    return [it for it in bench if it.kind == kind]


def _norm(text: str) -> str:
    return " ".join(str(text or "").split()).lower()


def check_question(item: BenchItem, shown: str | None, where: str) -> None:
    """FormatError when the text the harness showed the model (`shown`) does not hold `item`'s question."""
    if shown and _norm(item.question) not in _norm(shown):
        raise FormatError(
            f"{where}: the row's question {str(shown)[:80]!r} is not item {item.id}'s "
            f"({item.question[:80]!r}): the file answers another benchmark (or another export of it); "
            "pass the benchmark the harness ran"
        )
