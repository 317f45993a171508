"""Ready instances as flat records, for export, probe and eval.

Reads instances joined with their image (id, sha256, recorded path, source) and pair from the
curation store; writes nothing. `InstanceRecord` is what vhmine.export.job and vhmine.bench consume; its
image_path is where the image's content is now (curate.stages.images.current_path: moved files are found
by sha256), or the recorded path when no file holds it any more (export then says so).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select

from vhmine import rules as R
from vhmine.errors import InputError
from vhmine.store import (
    Generation,
    Image,
    Instance,
    Pair,
    Store,
)


@dataclass(frozen=True)
class InstanceRecord:
    id: str
    mode: str
    kind: str
    question: str
    template_id: str
    slots: dict
    answers: tuple[str, ...]
    truth: bool | None
    status: str
    image_id: str
    image_sha256: str
    image_path: str
    image_source: str
    pair_id: str | None
    other_image_id: str | None  # the pair's other image, when the item was a pair
    derived_from: str | None
    task_id: str
    created_by: str
    created_at: dt.datetime
    edit: dict | None = None  # a manipulated image's edit (vhmine.manipulate): strategy, source, object, mask


# what an export may show of a `vhmine manipulate` edit (no machine paths: the mask is named inside the out folder)
EDIT_KEYS = (
    "strategy",
    "source_image_id",
    "source_sha256",
    "inserted_object",
    "removed_object",
    "asked_object",
    "object_box",
    "mask",
    "mask_sha256",
    "donor",
    "prior",
)


def _record(inst: Instance, img: Image, pair: Pair | None, gen: Generation | None = None) -> InstanceRecord:
    other = None if pair is None else (pair.image_b if pair.image_a == inst.image_id else pair.image_a)
    edit = None
    if gen is not None and gen.backend == "manipulate":
        edit = {k: gen.params[k] for k in EDIT_KEYS if k in (gen.params or {})}
    return InstanceRecord(
        inst.id,
        inst.mode,
        inst.kind,
        inst.question,
        inst.template_id,
        dict(inst.slots),
        tuple(inst.answers),
        inst.truth,
        inst.status,
        img.id,
        img.sha256,
        img.path,
        img.source,
        inst.pair_id,
        other,
        inst.derived_from,
        inst.task_id,
        inst.created_by,
        inst.created_at,
        edit,
    )


def ready_instances(
    store: Store, mode: str | None = None, kind: str | None = None, *, locate: bool = True
) -> list[InstanceRecord]:
    """Every ready instance (optionally of one mode / kind), sorted by mode order, kind, then id.
    `locate` False: image_path stays the recorded path (no image is hashed), for a caller that uses no image."""
    if kind is not None and kind not in R.KINDS:
        raise InputError(f"kind {kind!r} is not one of {', '.join(R.KINDS)}")
    with store.session(write=False) as s:
        q = (
            select(Instance, Image, Pair, Generation)
            .join(Image, Image.id == Instance.image_id)
            .outerjoin(Pair, Pair.id == Instance.pair_id)
            .outerjoin(Generation, Generation.image_id == Image.id)
            .where(Instance.status == "ready")
        )
        if mode:
            q = q.where(Instance.mode == R.get_mode(mode).name)
        if kind:
            q = q.where(Instance.kind == kind)
        recs = [_record(i, img, p, g) for i, img, p, g in s.execute(q)]
    order = {m: k for k, m in enumerate(R.mode_names())}
    return sorted(_at_current_paths(store, recs) if locate else recs, key=lambda r: (order[r.mode], r.kind, r.id))


def _at_current_paths(store: Store, recs: list[InstanceRecord]) -> list[InstanceRecord]:
    from dataclasses import replace

    from vhmine.curate.stages.images import current_path

    found: dict[tuple[str, str], str | None] = {}
    for r in recs:
        key = (r.image_sha256, r.image_path)
        if key not in found:  # each image is hashed once, however many questions it has
            p = current_path(store, *key)
            found[key] = None if p is None else str(p)
    return [replace(r, image_path=found[(r.image_sha256, r.image_path)] or r.image_path) for r in recs]


def get_instance(store: Store, instance_id: str) -> InstanceRecord:
    with store.session(write=False) as s:
        row = s.execute(
            select(Instance, Image, Pair)
            .join(Image, Image.id == Instance.image_id)
            .outerjoin(Pair, Pair.id == Instance.pair_id)
            .where(Instance.id == instance_id)
        ).first()
    if row is None:
        raise InputError(f"no instance {instance_id!r} in {store.display_url}")
    return _at_current_paths(store, [_record(*row)])[0]
