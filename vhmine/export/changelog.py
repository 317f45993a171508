"""Export versions and changelogs: what changed since an earlier export, and who changed it and why.

Reads an earlier export (`vhmine export --since DIR`: its manifest.json, and its items through
vhmine.formats, whatever its format) and the curation store's action log (actions, instances,
workers); writes nothing itself: `build` returns the changelog as a dict (`changelog.json`) and as
Markdown (`CHANGELOG.md`), which vhmine.export.job writes into the new folder.

- version: `--version V` (an integer, or semver X.Y.Z) must be later than the earlier export's;
  without it the earlier version is counted up (an integer by 1; semver: minor when items were
  added or removed, else patch); with neither, 1.
- content_hash: sha256 of the items' content (id, mode, kind, question, answers, truth, image sha256,
  pair group), sorted by id: equal for equal content in any format, with or without provenance.
- The changelog lists the items added, removed and changed (question, answers, truth, image or pair
  group), each with the actions that touched the instance since the earlier export (annotate, confirm, review,
  discard, an undo, errata decisions such as `errata_accept`, any other action whose payload names
  the instance), and for removed items the instance's state now. An action made and undone since the
  earlier export is left out (it changed nothing); one made before and undone since shows as its undo.
  An errata decision's payload {"instance_id", "reason", "changes": {field: [old, new]}, "flag_id",
  "flagged_by", "derived"} (curate.decisions.errata) gives the why (its reason) and the details. What an accepted
  erratum changed beyond its instance (curate.decisions.derived: yes/no questions drafted again, retired or sent back,
  pair groups rebuilt) shows on those items with the erratum's why for each; everything else it derived
  (new drafts waiting for a worker, model verdicts, workers' labels set aside, blind answers and flags,
  reviews) is listed under `derived` (changelog.json) and "Derived from errata" (CHANGELOG.md). Workers appear
  as the export's pseudonyms (also inside reasons and payloads, as whole tokens; a name that is also a word of
  the item's question or answers stays a word there: export.privacy.NameScrubber) unless `--with-provenance`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path

from vhmine.errors import ExportError, FormatError, InputError

FIELDS = ("question", "answers", "truth", "image_sha256", "mode", "kind", "group_id")
_INT, _SEMVER = re.compile(r"^\d+$"), re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _content(it) -> dict:
    return {
        "id": it.id,
        "mode": it.mode,
        "kind": it.kind,
        "question": it.question,
        "answers": list(it.answers),
        "truth": it.truth,
        "image_sha256": it.meta.get("image_sha256"),
        "group_id": it.group_id,
    }


def content_hash(bench) -> str:
    rows = sorted((_content(it) for it in bench), key=lambda r: r["id"])
    return hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def store_fingerprint(key: str) -> str:
    """Names the store (from its pseudonym secret, which it does not reveal): a later export knows its own store."""
    return hmac.new(key.encode("utf-8"), b"store fingerprint", hashlib.sha256).hexdigest()[:16]


def _parse(v: str):
    if _INT.match(v):
        return (int(v),)
    m = _SEMVER.match(v)
    return tuple(int(x) for x in m.groups()) if m else None


def check_version(v: str) -> str:
    v = str(v).strip()
    if _parse(v) is None:
        raise InputError(f"--version {v!r} is neither an integer (3) nor semver (1.2.0): give one of those")
    return v


def next_version(given: str | None, earlier: str | None, structural: bool, since: Path | None) -> str:
    """The new export's version (see the module docstring); ExportError when it would not come after `earlier`."""
    if given is not None:
        given = check_version(given)
        old = _parse(str(earlier)) if earlier is not None else None
        new = _parse(given)
        if old is not None and len(old) == len(new) and new <= old:
            raise ExportError(f"--version {given} does not come after version {earlier} of {since}: give a later one")
        return given
    if earlier is None:
        return "1"
    old = _parse(str(earlier))
    if old is None:
        raise ExportError(f"version {earlier!r} of {since} cannot be counted up: pass --version")
    if len(old) == 1:
        return str(old[0] + 1)
    major, minor, patch = old
    return f"{major}.{minor + 1}.0" if structural else f"{major}.{minor}.{patch + 1}"


@dataclass
class Earlier:
    path: Path
    manifest: dict
    items: dict  # id -> BenchItem

    @property
    def version(self) -> str | None:
        v = self.manifest.get("version")
        return None if v is None else str(v)


def read_earlier(since: Path) -> Earlier:
    """The earlier export's manifest and items; ExportError when DIR is no vhmine export."""
    from vhmine import formats as F

    since = Path(since)
    man = since / "manifest.json"
    if not man.is_file():
        raise ExportError(f"--since {since}: no manifest.json there: give the folder of an earlier `vhmine export`")
    try:
        manifest = json.loads(man.read_text(encoding="utf-8-sig"))
        bench = F.load(since, manifest["format"])
    except (ValueError, KeyError, TypeError, FormatError) as err:
        raise ExportError(
            f"--since {since}: not a readable vhmine export ({err}): give the folder of an earlier export"
        ) from None
    if manifest.get("producer") != "vhmine export":
        raise ExportError(f"--since {since}: its manifest was not written by `vhmine export`")
    return Earlier(since, manifest, {it.id: it for it in bench})


def diff(earlier: Earlier, bench) -> dict:
    """Item ids added, removed, and changed (id -> {field: [before, after]})."""
    new = bench.by_id()
    changed = {}
    for i in sorted(set(new) & set(earlier.items)):
        a, b = _content(earlier.items[i]), _content(new[i])
        d = {f: [a[f], b[f]] for f in FIELDS if a[f] != b[f]}
        if d:
            changed[i] = d
    return {
        "added": sorted(set(new) - set(earlier.items)),
        "removed": sorted(set(earlier.items) - set(new)),
        "changed": changed,
    }


def _parse_time(s) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(str(s))
    except ValueError:
        return None
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def _derived_on(payload: dict) -> dict:
    """instance id -> the derived entries (curate.decisions.derived) an errata decision's payload holds for it."""
    out: dict = {}
    for e in (payload or {}).get("derived") or []:
        if isinstance(e, dict) and e.get("table") in ("instances", "groups") and isinstance(e.get("id"), str):
            out.setdefault(e["id"], []).append(e)
    return out


def _touches(payload: dict) -> set:
    """Instance ids an action's payload names (review, errata and edit: instance_id; annotate: instances;
    confirm: drafts; any action: instance_ids; an errata decision: the instances it derived changes on)."""
    p = payload or {}
    ids = {p.get("instance_id")} | set(p.get("instances") or []) | set(p.get("instance_ids") or [])
    ids |= {d.get("id") for d in p.get("drafts") or [] if isinstance(d, dict)}
    ids |= set(_derived_on(p))
    return {i for i in ids if isinstance(i, str)}


def _why(kind: str, p: dict, row=None) -> str:
    if p.get("reason"):
        return str(p["reason"])
    if kind == "confirm":  # the payload holds the drafts before the decision; the instance says which it was
        status, reason = (row.status, row.discard_reason or "") if row is not None else ("", "")
        return {"ready": "yes/no draft confirmed"}.get(
            status, "yes/no draft rejected" if reason.startswith("draft rejected") else "yes/no draft decided"
        )
    return {
        "annotate": "question written",
        "review": f"second answer {p.get('answer')!r}" if p.get("answer") is not None else "reviewed",
    }.get(kind, kind)


def store_state(store) -> dict:
    """What a manifest records so that a later --since reads only the actions after this export."""
    from sqlalchemy import func, select

    from vhmine.store import Action

    with store.session(write=False) as s:
        return {"actions_upto": s.scalar(select(func.max(Action.id))) or 0}


def _events(store, ids: set, earlier: Earlier, same_store: bool) -> tuple[dict, dict, list]:
    """instance id -> actions that touched it since the earlier export; instance id -> its row; worker names."""
    from sqlalchemy import select

    from vhmine.store import Action, Instance, Worker

    upto = earlier.manifest.get("actions_upto") if same_store else None
    t0 = _parse_time(earlier.manifest.get("created_at")) or dt.datetime.min
    out: dict[str, list] = {i: [] for i in ids}
    with store.session(write=False) as s:
        names = list(s.scalars(select(Worker.name)))
        rows = {r.id: r for r in s.scalars(select(Instance).where(Instance.id.in_(sorted(ids))))} if ids else {}
        for a in s.scalars(select(Action).order_by(Action.id)):
            hit = _touches(a.payload) & ids
            if not hit:
                continue
            after = a.id > upto if upto is not None else a.created_at > t0
            if after and a.undone_at is not None:  # made and taken back since the earlier export: no change
                continue
            derived = _derived_on(a.payload)
            for i in sorted(hit):
                if after:
                    ev = {
                        "action": a.id,
                        "kind": a.kind,
                        "worker": a.worker,
                        "at": a.created_at.isoformat(timespec="seconds"),
                        "why": _why(a.kind, a.payload or {}, rows.get(i)),
                    }
                    extra = {
                        k: v
                        for k, v in (a.payload or {}).items()
                        if k not in ("instance_id", "instances", "instance_ids", "drafts", "reason", "derived")
                    }
                    if i in derived and i != (a.payload or {}).get("instance_id"):  # carried through from another item
                        ev["why"] = "; ".join(e["why"] for e in derived[i])
                        extra = {
                            "flag_id": extra.get("flag_id"),
                            "derived_from": (a.payload or {}).get("instance_id"),
                            "changes": {f: v for e in derived[i] for f, v in (e.get("changes") or {}).items()},
                        }
                    if a.kind not in ("annotate", "confirm") and extra:  # e.g. an errata decision's "changes"
                        ev["details"] = extra
                    out[i].append(ev)
                if a.undone_at is not None and a.undone_at > t0:
                    out[i].append(
                        {
                            "action": a.id,
                            "kind": "undo",
                            "worker": a.worker,
                            "at": a.undone_at.isoformat(timespec="seconds"),
                            "why": f"{a.kind} undone",
                        }
                    )
    return out, rows, names


_TABLE_NAMES = {
    "instances": "yes/no question",
    "groups": "pair group",
    "responses": "model verdict",
    "response_labels": "worker's label",
    "blind_answers": "blind answer",
    "reviews": "review",
}


def _derived_log(store, earlier: Earlier, same_store: bool, shown: set) -> list[dict]:
    """What the errata decisions since the earlier export derived beyond the items the changelog lists
    (`shown`): new drafts, verdicts, labels set aside, blind answers and flags, reviews; oldest first."""
    from sqlalchemy import select

    from vhmine.store import Action

    upto = earlier.manifest.get("actions_upto") if same_store else None
    t0 = _parse_time(earlier.manifest.get("created_at")) or dt.datetime.min
    out = []
    with store.session(write=False) as s:
        for a in s.scalars(select(Action).where(Action.kind == "errata_accept").order_by(Action.id)):
            after = a.id > upto if upto is not None else a.created_at > t0
            p = a.payload or {}
            if not after or a.undone_at is not None:
                continue
            for e in p.get("derived") or []:
                if e.get("table") in ("instances", "groups") and e.get("id") in shown and "created" not in e:
                    continue  # on an item of the changelog, with this why
                what = (
                    "new draft: " + f"{e['created']['question']} → {'yes' if e['created']['truth'] else 'no'}"
                    if "created" in e
                    else (
                        "set aside: " + str(e["deleted"].get("verdict"))
                        if "deleted" in e
                        else "; ".join(
                            f"{f}: {_cell(v[0])} → {_cell(v[1])}" for f, v in (e.get("changes") or {}).items()
                        )
                    )
                )
                out.append(
                    {
                        "action": a.id,
                        "flag_id": p.get("flag_id"),
                        "instance_id": p.get("instance_id"),
                        "worker": a.worker,
                        "at": a.created_at.isoformat(timespec="seconds"),
                        "table": e["table"],
                        "id": e["id"],
                        "what": what,
                        "why": e.get("why", ""),
                    }
                )
    return out


def build(
    store,
    earlier: Earlier,
    bench,
    *,
    version: str,
    key: str,
    with_provenance: bool,
    left_out: set = frozenset(),
    changes: dict | None = None,
) -> tuple[dict, str]:
    """changelog.json's dict and CHANGELOG.md's text for `bench` (before its names are pseudonymized) against `earlier`.
    `changes`: diff(earlier, bench) when the caller has made it already."""
    from vhmine.export.privacy import NameScrubber, content_words, pseudonym, public_path

    d = diff(earlier, bench) if changes is None else changes
    same_store = earlier.manifest.get("store_fingerprint") == store_fingerprint(key)
    ids = set(d["added"]) | set(d["removed"]) | set(d["changed"])
    events, rows, names = _events(store, ids, earlier, same_store)
    public = (lambda n: n) if with_provenance else (lambda n: pseudonym(n, key))
    scrub = NameScrubber([] if with_provenance else names, public)
    new = bench.by_id()

    def keep(i: str) -> frozenset:
        """The words of item i's content, before and after: a worker's name that is one stays a word there."""
        versions = [it for it in (new.get(i), earlier.items.get(i)) if it is not None]
        changes = [ev.get("details", {}).get("changes") for ev in events.get(i, [])]
        return content_words([(it.question, list(it.answers)) for it in versions], changes)

    def entry(i: str, item) -> dict:
        evs = scrub(events.get(i, []), keep(i))
        e = {
            "id": i,
            "mode": item.mode,
            "kind": item.kind,
            "question": item.question,
            "answer": item.reference(),
            "group_id": item.group_id,
            "actions": evs,
            "by": sorted({ev["worker"] for ev in evs}),
            "why": [ev["why"] for ev in evs],
        }
        return e

    added = []
    for i in d["added"]:
        e = entry(i, new[i])
        if not e["actions"]:
            e["why"] = ["in the store before the earlier export, and left out of it (its options, or not ready then)"]
            e["by"] = [public(new[i].meta["created_by"])] if new[i].meta.get("created_by") else []
        added.append(e)
    removed = []
    for i in d["removed"]:
        e = entry(i, earlier.items[i])
        r = rows.get(i)
        if r is None:
            e["state"] = "not in this store"
        elif r.status == "ready":
            e["state"] = "ready, left out by this export's options" + (
                " (--drop-blind: a blind solver answered it)" if i in left_out else ""
            )
        else:
            e["state"] = scrub(f"{r.status}: {r.discard_reason}" if r.discard_reason else r.status, keep(i))
            if r.updated_by and not e["by"]:
                e["by"] = [public(r.updated_by)]
        if not e["why"]:
            e["why"] = [e["state"]]
        removed.append(e)
    changed = []
    for i, fields in d["changed"].items():
        e = entry(i, new[i])
        e["fields"] = fields
        if not e["why"]:
            e["why"] = ["no action in the store's log explains it"]
        changed.append(e)
    derived = scrub(_derived_log(store, earlier, same_store, ids))
    log = {
        "producer": "vhmine export",
        "version": version,
        "since": {
            "path": str(earlier.path) if with_provenance else public_path(str(earlier.path)),
            "version": earlier.version,
            "content_hash": earlier.manifest.get("content_hash"),
            "created_at": earlier.manifest.get("created_at"),
            "same_store": same_store,
        },
        "counts": {"added": len(added), "removed": len(removed), "changed": len(changed)},
        "added": added,
        "removed": removed,
        "changed": changed,
        "derived": derived,
    }
    return log, markdown(log, bench.name)


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown(log: dict, name: str) -> str:
    s = log["since"]
    c = log["counts"]
    lines = [
        f"# {name} {log['version']}: changes since {s['version'] or 'an unversioned export'}",
        "",
        (
            f"Against `{s['path']}` ({s['created_at']}): {c['added']} added, {c['removed']} removed, {c['changed']}"
            " changed."
        ),
        "",
    ]
    if not s["same_store"]:
        lines += [
            (
                "The earlier export came from another store (or one without a fingerprint): actions are those logged "
                "after its date."
            ),
            "",
        ]
    for title, key in (("Changed", "changed"), ("Added", "added"), ("Removed", "removed")):
        if not log[key]:
            continue
        lines += [
            f"## {title}",
            "",
            "| id | mode | kind | question | " + ("change | " if key == "changed" else "answer | ") + "by | why |",
            "|---|---|---|---|---|---|---|",
        ]
        for e in log[key]:
            what = (
                "; ".join(f"{f}: {_cell(a)} → {_cell(b)}" for f, (a, b) in e["fields"].items())
                if key == "changed"
                else e["answer"]
            )
            lines.append(
                f"| {e['id']} | {e['mode']} | {e['kind']} | {_cell(e['question'])} | {_cell(what)} | "
                f"{', '.join(e['by']) or '-'} | {_cell('; '.join(e['why']))} |"
            )
        lines.append("")
    if log.get("derived"):
        lines += [
            "## Derived from errata",
            "",
            (
                "What accepted errata changed beyond the items above: drafts waiting for a "
                "worker, model verdicts, workers' labels set aside, blind answers and their flags, reviews."
            ),
            "",
            "| erratum | fixed item | what | id | change | why |",
            "|---|---|---|---|---|---|",
        ]
        for e in log["derived"]:
            ident = "/".join(e["id"]) if isinstance(e["id"], list) else e["id"]
            lines.append(
                f"| {e['flag_id']} | {e['instance_id']} | {_TABLE_NAMES.get(e['table'], e['table'])} | "
                f"{_cell(ident)} | {_cell(e['what'])} | {_cell(e['why'])} |"
            )
        lines.append("")
    return "\n".join(lines)
