"""The curation store's tables: SQLAlchemy classes for images, runs, pairs, workers, tasks, the action log,
instances, reviews, model responses and labels, descriptions, generations, secrets, blind answers, drafts,
errata and near duplicates, with the values their status columns take.

Reads and writes nothing itself: vhmine.store opens the database, and its migrations (vhmine/store/migrations/),
not these classes, create the tables; the classes mirror the migrations' result (tests/store/test_store.py
compares them). Import them through `vhmine.store`, which first says which extra to install when
SQLAlchemy is missing. Ids are stable strings (image ids are the first 16 hex digits of the sha256), so
nothing depends on row order.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# the values of the status and source columns
IMAGE_SOURCES = ("mined", "generated", "imported")
TASK_STATUSES = ("open", "done", "discarded", "held")  # held: revision 0012
INSTANCE_STATUSES = ("draft", "ready", "discarded")
# "no answer": the model did not answer ("I cannot tell from this image."): not correct, but no hallucination either
VERDICTS = ("correct", "hallucinated", "no answer")


def utcnow() -> dt.datetime:
    """Naive UTC, the form every DateTime column holds (SQLite keeps no time zone)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict: JSON, list: JSON, dt.datetime: DateTime()}


class Image(Base):
    __tablename__ = "images"
    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16))
    categories: Mapped[list | None] = mapped_column(JSON)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[dt.datetime]


class Run(Base):
    __tablename__ = "runs"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    pairs_path: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict | None] = mapped_column(JSON)
    seeded_at: Mapped[dt.datetime]


class Pair(Base):
    __tablename__ = "pairs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # "<smaller id>-<larger id>"
    image_a: Mapped[str] = mapped_column(ForeignKey("images.id"))
    image_b: Mapped[str] = mapped_column(ForeignKey("images.id"))
    rank: Mapped[int | None] = mapped_column(Integer)
    clip_sim: Mapped[float | None] = mapped_column(Float)
    dino_sim: Mapped[float | None] = mapped_column(Float)
    gap: Mapped[float | None] = mapped_column(Float)
    run: Mapped[str | None] = mapped_column(ForeignKey("runs.name"))
    created_at: Mapped[dt.datetime]


class Worker(Base):
    __tablename__ = "workers"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean)
    active: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[dt.datetime]
    # schema revision 0005: bumped by `workers rotate` / `deactivate`; a signed-in
    # session holds the value it signed in with and stops working once they differ
    token_generation: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # schema revision 0009: the mode the worker last chose in the app (None: the first mode)
    mode: Mapped[str | None] = mapped_column(String(16))


class Task(Base):
    """One queue item: a mined pair (pair_id) or a single image (image_id) to annotate in a mode."""

    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_queue", "mode", "status", "priority"),)
    id: Mapped[str] = mapped_column(String(80), primary_key=True)  # "<mode>:<pair id or image id>"
    mode: Mapped[str] = mapped_column(String(16))
    pair_id: Mapped[str | None] = mapped_column(ForeignKey("pairs.id"))
    image_id: Mapped[str | None] = mapped_column(ForeignKey("images.id"))
    priority: Mapped[float] = mapped_column(Float)  # lower is handed out first (the pair's rank)
    status: Mapped[str] = mapped_column(String(16))
    discard_reason: Mapped[str | None] = mapped_column(Text)
    lease_worker: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    lease_until: Mapped[dt.datetime | None]
    version: Mapped[int] = mapped_column(Integer)  # bumped by every change: compare-and-set
    done_by: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    done_at: Mapped[dt.datetime | None]
    created_at: Mapped[dt.datetime]
    # revision 0012: why the system holds the task (status "held": an image missing or changed; curate.work.holds)
    held_reason: Mapped[str | None] = mapped_column(Text)


class Action(Base):
    """The log of what each worker did, newest last per worker; `undo` reverts the last one."""

    __tablename__ = "actions"
    __table_args__ = (Index("ix_actions_worker", "worker", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    worker: Mapped[str] = mapped_column(ForeignKey("workers.name"))
    kind: Mapped[str] = mapped_column(String(16))  # annotate, discard, skip, confirm, review, label, hold, ...
    task_id: Mapped[str | None] = mapped_column(ForeignKey("tasks.id"))
    payload: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime]
    undone_at: Mapped[dt.datetime | None]


class Instance(Base):
    __tablename__ = "instances"
    __table_args__ = (Index("ix_instances_mode", "mode", "kind", "status"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"))
    action_id: Mapped[int | None] = mapped_column(ForeignKey("actions.id"))
    mode: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(3))  # OEQ or YNQ
    image_id: Mapped[str] = mapped_column(ForeignKey("images.id"))  # the image the question is about
    pair_id: Mapped[str | None] = mapped_column(ForeignKey("pairs.id"))
    template_id: Mapped[str] = mapped_column(String(64))
    slots: Mapped[dict] = mapped_column(JSON)
    question: Mapped[str] = mapped_column(Text)
    answers: Mapped[list] = mapped_column(JSON)  # acceptable reference answers, best first
    truth: Mapped[bool | None] = mapped_column(Boolean)  # YNQ only
    derived_from: Mapped[str | None] = mapped_column(ForeignKey("instances.id"))
    draft_value: Mapped[str | None] = mapped_column(Text)  # the OEQ answer value a drafted YNQ tests
    status: Mapped[str] = mapped_column(String(16))
    discard_reason: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(ForeignKey("workers.name"))
    created_at: Mapped[dt.datetime]
    updated_by: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    updated_at: Mapped[dt.datetime | None]
    # revision 0011 (curate.decisions.derived): a drafted YNQ that derivation set aside, from this status (it comes
    # back to it)
    retired_from: Mapped[str | None] = mapped_column(String(16))
    # None is SQL NULL (not JSON null): "IS NULL" finds the rows without a fact, the queue's rows are "IS NOT NULL"
    truth_fact: Mapped[dict | None] = mapped_column(
        JSON(none_as_null=True)
    )  # a person's truth: {"truth", "by", "source"}
    contradiction: Mapped[dict | None] = mapped_column(JSON(none_as_null=True))  # the person-queue


class Review(Base):
    """A second worker's blind answer to an instance; `label` is the category kappa compares."""

    __tablename__ = "reviews"
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), primary_key=True)
    worker: Mapped[str] = mapped_column(ForeignKey("workers.name"), primary_key=True)
    answer: Mapped[str] = mapped_column(Text)
    label: Mapped[str] = mapped_column(Text)
    action_id: Mapped[int | None] = mapped_column(ForeignKey("actions.id"))
    created_at: Mapped[dt.datetime]


# --- schema revision 0002: room for the probe, describe and generate stages ---------------------


class Response(Base):
    """A model's answer to an instance, with the judge's verdict when one was run."""

    __tablename__ = "responses"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    model: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    verdict: Mapped[str | None] = mapped_column(String(16))  # VERDICTS; None: not judged
    judge: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[dt.datetime]
    # revision 0004: the endpoint that answered, without credentials (llm.safe_endpoint);
    # None for responses stored before it was recorded
    endpoint: Mapped[str | None] = mapped_column(String(500))


class ResponseLabel(Base):
    """A worker's verdict on a model response: correct, hallucinated, or no answer (the model did not answer)."""

    __tablename__ = "response_labels"
    response_id: Mapped[str] = mapped_column(ForeignKey("responses.id"), primary_key=True)
    worker: Mapped[str] = mapped_column(ForeignKey("workers.name"), primary_key=True)
    verdict: Mapped[str] = mapped_column(String(16))
    action_id: Mapped[int | None] = mapped_column(ForeignKey("actions.id"))
    created_at: Mapped[dt.datetime]


class Description(Base):
    __tablename__ = "descriptions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # "example" (from one success) or "merged"
    text: Mapped[str] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(200))
    hypothetical: Mapped[bool] = mapped_column(Boolean)
    sources: Mapped[list | None] = mapped_column(JSON)  # instance or description ids it came from
    created_at: Mapped[dt.datetime]


class Generation(Base):
    __tablename__ = "generations"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    image_id: Mapped[str] = mapped_column(ForeignKey("images.id"), unique=True)
    mode: Mapped[str] = mapped_column(String(16))
    prompt: Mapped[str] = mapped_column(Text)
    description_id: Mapped[str | None] = mapped_column(ForeignKey("descriptions.id"))
    backend: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200))
    seed: Mapped[int | None] = mapped_column(Integer)
    params: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime]


# --- schema revision 0003: the store's own secrets ---------------------------------------------


class Secret(Base):
    """A random key made once per store; "pseudonyms" keys the worker pseudonyms of exports (never exported)."""

    __tablename__ = "secrets"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[dt.datetime]


# --- schema revision 0006: blind solvers (vhmine blind, vhmine/curate/work/blind.py) ----------------


class BlindAnswer(Base):
    """A text-only model's answer to an instance asked WITHOUT its image, and whether it was right.

    Rows of one question group (the same question on each image of a pair; a single-image question
    alone) share `group_key`; when every row of a group is right they share a `flag_id`: the item is
    answerable blind. A worker may overrule the flag (who, when, why); `export --drop-blind` leaves
    flagged, not overruled, instances out.

    Revision 0009: `reference` is the instance's {"answers", "truth"} the answer was scored against; `correct`
    None is an answer waiting to be scored again against a changed reference (curate.decisions.derived, vhmine blind):
    it counts nowhere and makes no flag until then."""

    __tablename__ = "blind_answers"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    model: Mapped[str] = mapped_column(String(200))
    endpoint: Mapped[str | None] = mapped_column(String(500))  # llm.safe_endpoint: no credentials
    prompt: Mapped[str] = mapped_column(String(200))  # the prompt's id, blind@vN#sha8
    answer: Mapped[str] = mapped_column(Text)
    correct: Mapped[bool | None] = mapped_column(Boolean)  # None: to be scored again (revision 0009)
    scorer: Mapped[str] = mapped_column(String(300))  # rule:<rule>, match, or llm:<judge> judge_oeq@vN#sha8
    group_key: Mapped[str] = mapped_column(String(120))
    flag_id: Mapped[str | None] = mapped_column(String(32), index=True)
    overruled_by: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    overruled_at: Mapped[dt.datetime | None]
    overrule_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime]
    reference: Mapped[dict | None] = mapped_column(JSON)  # revision 0009: {"answers", "truth"} it was scored against


# --- schema revision 0007: drafts that workers verify (vhmine draft), errata of released items ----

DRAFT_STATUSES = ("pending", "accepted", "edited", "rejected", "rule_rejected", "superseded")
ERRATUM_STATUSES = ("open", "accepted", "rejected", "withdrawn")


class Draft(Base):
    """A vision model's draft for one pair task: an OEQ with a reference answer per image and yes/no variants.

    `answers` maps image id -> reference answers; `yes_no` is a list of {"question", "truths": {image id:
    bool}}. A draft breaking a rule (malformed, the same answer on both images, ...) is stored with status
    `rule_rejected` and the `reason`, never queued; a worker accepts, edits or rejects the others
    (`decided_by`, `action_id`). Model, endpoint (no credentials) and prompt id say what made it."""

    __tablename__ = "drafts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    mode: Mapped[str] = mapped_column(String(16))
    model: Mapped[str] = mapped_column(String(200))
    endpoint: Mapped[str | None] = mapped_column(String(500))
    prompt: Mapped[str] = mapped_column(String(200))
    raw: Mapped[str] = mapped_column(Text)  # the model's answer as sent back
    template_id: Mapped[str | None] = mapped_column(String(64))
    slots: Mapped[dict | None] = mapped_column(JSON)
    question: Mapped[str | None] = mapped_column(Text)
    answers: Mapped[dict | None] = mapped_column(JSON)
    yes_no: Mapped[list | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    decided_at: Mapped[dt.datetime | None]
    action_id: Mapped[int | None] = mapped_column(ForeignKey("actions.id"))
    created_at: Mapped[dt.datetime]


class Erratum(Base):
    """A worker's flag that a (released) instance is wrong, and an admin's decision on it.

    `changes` (field -> [old, new]) is what accepting it changed on the instance; the `errata_accept` /
    `errata_reject` action (`action_id`) carries the same, for the next export's changelog."""

    __tablename__ = "errata"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    instance_id: Mapped[str] = mapped_column(ForeignKey("instances.id"), index=True)
    flagged_by: Mapped[str] = mapped_column(ForeignKey("workers.name"))
    reason: Mapped[str] = mapped_column(Text)
    proposed: Mapped[str | None] = mapped_column(Text)  # the answer the flagger thinks is right, if given
    status: Mapped[str] = mapped_column(String(16))
    decided_by: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    decided_at: Mapped[dt.datetime | None]
    decision_reason: Mapped[str | None] = mapped_column(Text)
    changes: Mapped[dict | None] = mapped_column(JSON)
    action_id: Mapped[int | None] = mapped_column(ForeignKey("actions.id"))
    created_at: Mapped[dt.datetime]


# --- schema revision 0008: near duplicates found by export (vhmine.export.neardup, vhmine/curate/work/neardups.py) ----


class NearDuplicate(Base):
    """A pair of images an export's near-duplicate check found (`scope`: within / reference / generated).

    `a_image` is an exported image; `b_image` another exported image (`b_index` None) or an image of the
    index `b_index`. The id is derived from (scope, a, b), so the next export finds the same row: its
    cosines, encoders and thresholds are refreshed (`seen_at`) and a worker's overrule (who, when, why) stays."""

    __tablename__ = "near_duplicates"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    scope: Mapped[str] = mapped_column(String(16))  # within, reference or generated
    a_image: Mapped[str] = mapped_column(String(64))
    a_sha256: Mapped[str | None] = mapped_column(String(64))
    b_index: Mapped[str | None] = mapped_column(String(200))
    b_image: Mapped[str] = mapped_column(String(200))
    b_sha256: Mapped[str | None] = mapped_column(String(64))
    b_path: Mapped[str | None] = mapped_column(Text)  # the index image's file on this machine, for the app
    clip: Mapped[float] = mapped_column(Float)
    dino: Mapped[float] = mapped_column(Float)
    exact: Mapped[bool] = mapped_column(Boolean)
    encoders: Mapped[dict] = mapped_column(JSON)  # {"clip": {"spec", "model", "dim"}, "dino": {...}}
    thresholds: Mapped[dict] = mapped_column(JSON)
    overruled_by: Mapped[str | None] = mapped_column(ForeignKey("workers.name"))
    overruled_at: Mapped[dt.datetime | None]
    overrule_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime]
    seen_at: Mapped[dt.datetime]
