"""The in-memory benchmark: what exporters take, importers return and `vhmine eval` scores.

Reads and writes no files itself. A `Benchmark` is a list of `BenchItem`s with stable ids (from the
curation store, or derived from the source benchmark's own keys, never from row order), plus the
folder its relative image paths resolve against. `from_records` builds one from the store's ready
instances (vhmine.curate.InstanceRecord). `assign_groups` marks pair groups: where a pair's two images
have different answers to the same question (NaturalBench's design), the questions so asked of the pair
in one mode and kind form a group that `vhmine eval` scores whole (vhmine.eval.metrics.pair_groups).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from vhmine.errors import FormatError

OEQ, YNQ = "OEQ", "YNQ"


@dataclass(frozen=True)
class BenchItem:
    id: str  # stable: the store's instance id, or the source benchmark's key
    mode: str  # a vhmine mode, or the source benchmark's category (e.g. "VD/illusion")
    kind: str  # OEQ or YNQ
    question: str
    answers: tuple[str, ...] = ()  # acceptable reference answers, best first
    truth: bool | None = None  # YNQ only
    image: str | None = None  # path, absolute or relative to Benchmark.root; None: no image
    image_id: str | None = None  # items on the same picture share it (per-image accuracy)
    pair_id: str | None = None  # items asking the same question of a pair's images share it
    meta: dict = field(default_factory=dict, compare=True, hash=False)  # provenance, source fields
    image_data: bytes | None = field(default=None, compare=False, repr=False)  # when read from a file that embeds it
    group_id: str | None = None  # a pair group (assign_groups): items of a pair whose answers differ by image

    def reference(self) -> str:
        """The answers as one line ("4 or 5"); YNQ: "yes"/"no"."""
        if self.kind == YNQ and self.truth is not None:
            return "yes" if self.truth else "no"
        return " or ".join(self.answers)


@dataclass
class Benchmark:
    name: str
    items: list[BenchItem]
    root: Path | None = None  # relative image paths resolve against it
    source: str = ""  # the file or folder it was read from, for messages

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for it in self.items:
            if it.id in seen:
                raise FormatError(f"{self.source or self.name}: item id {it.id!r} appears twice: ids must be unique")
            seen.add(it.id)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[BenchItem]:
        return iter(self.items)

    def by_id(self) -> dict[str, BenchItem]:
        return {it.id: it for it in self.items}

    def modes(self) -> list[str]:
        """Modes in first-seen order (vhmine's mode order for benchmarks built from the store)."""
        return list(dict.fromkeys(it.mode for it in self.items))

    def kinds(self) -> list[str]:
        return [k for k in (OEQ, YNQ) if any(it.kind == k for it in self.items)]

    def select(self, kind: str | None = None, mode: str | None = None) -> Benchmark:
        items = [it for it in self.items if (kind is None or it.kind == kind) and (mode is None or it.mode == mode)]
        return Benchmark(self.name, items, self.root, self.source)

    def image_path(self, item: BenchItem) -> Path | None:
        if item.image is None:
            return None
        p = Path(item.image)
        return p if p.is_absolute() or self.root is None else self.root / p

    def image_bytes(self, item: BenchItem) -> bytes:
        """The item's image file's bytes (embedded, or read from its path)."""
        if item.image_data is not None:
            return item.image_data
        p = self.image_path(item)
        if p is None:
            raise FormatError(f"{self.source or self.name}: item {item.id} has no image")
        from vhmine.images import read_image_bytes

        try:
            return read_image_bytes(p)  # a file, or a WebDataset tar member
        except OSError as err:
            raise FormatError(
                f"{self.source or self.name}: image {p} of item {item.id} cannot be read ({err.strerror}): "
                "restore the file, or give the images' folder (--images)"
            ) from None


def question_key(question: str) -> str:
    """A short digest of a question, ignoring case and spacing."""
    norm = " ".join(question.lower().split()).rstrip("?. ")
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:10]


def from_records(records: Sequence, name: str = "vhmine") -> Benchmark:
    """A benchmark from the store's ready instances (InstanceRecord), images at their recorded paths."""
    items = []
    for r in records:
        # a "pair" for pair accuracy: the same question asked of both images of one mined pair
        pair = f"{r.pair_id}:{r.kind}:{question_key(r.question)}" if r.pair_id else None
        prov = {
            "instance_id": r.id,
            "task_id": r.task_id,
            "template_id": r.template_id,
            "slots": dict(r.slots),
            "image_id": r.image_id,
            "image_sha256": r.image_sha256,
            "image_source": r.image_source,
            "source_path": r.image_path,
            "pair_id": r.pair_id,
            "other_image_id": r.other_image_id,
            "derived_from": r.derived_from,
            "created_by": r.created_by,
            "created_at": r.created_at.isoformat(),
        }
        if getattr(r, "edit", None):  # a manipulated image: what was edited, from which image, with which mask
            prov["edit"] = dict(r.edit)
        items.append(
            BenchItem(
                r.id,
                r.mode,
                r.kind,
                r.question,
                tuple(r.answers),
                r.truth if r.kind == YNQ else None,
                r.image_path,
                r.image_id,
                pair,
                prov,
            )
        )
    return Benchmark(name, items)


def _differ(a: BenchItem, b: BenchItem) -> bool:
    """The two images' answers to one question differ: yes/no truths, or open answers with none in common."""
    if a.kind == YNQ:
        return a.truth is not None and b.truth is not None and a.truth != b.truth
    norm = lambda it: {" ".join(x.lower().split()) for x in it.answers}  # noqa: E731
    return bool(a.answers and b.answers) and not (norm(a) & norm(b))


def assign_groups(bench: Benchmark) -> Benchmark:
    """The benchmark with `group_id` set on pair groups (and cleared elsewhere).

    A question asked of both images of a mined pair (the items sharing a `pair_id`, one per image) whose
    answers differ joins the group of its pair, mode and kind, `<mode>:<kind>:<pair>`; for yes/no it is
    "yes" on one image and "no" on the other, so every group is balanced by construction. A question
    whose images agree, or whose other image is not in this benchmark (a --per-mode cut), is in no group.
    """
    by_pair: dict[str, list[BenchItem]] = {}
    for it in bench:
        if it.pair_id:
            by_pair.setdefault(it.pair_id, []).append(it)
    gid: dict[str, str] = {}
    for items in by_pair.values():
        if len(items) != 2 or items[0].image_id == items[1].image_id or not _differ(*items):
            continue
        a = items[0]
        pair = a.meta.get("pair_id") or a.pair_id  # the store's pair; a foreign item's question pair
        for it in items:
            gid[it.id] = f"{a.mode}:{a.kind}:{pair}"
    return with_items(bench, (replace(it, group_id=gid.get(it.id)) for it in bench))


def with_items(bench: Benchmark, items: Iterable[BenchItem]) -> Benchmark:
    return Benchmark(bench.name, list(items), bench.root, bench.source)


def strip_image(item: BenchItem, image: str | None) -> BenchItem:
    """The item pointing at a new image path (its bytes no longer carried)."""
    return replace(item, image=image, image_data=None)
