"""What an export may show of people and of this machine: worker pseudonyms and public paths.

Reads the store's pseudonym secret (`secrets`, made by migration 0003); writes nothing. Used by the
export job, its changelog and its near-duplicate check, so that no worker name or machine path leaves
without `--with-provenance`.

Names inside logged actions (`NameScrubber`): a field that holds a worker (`worker`, `by`, `flagged_by`,
`decided_by`, ...) is swapped when its value is a worker's name; free text (reasons, states) has every
worker name swapped where it stands as a whole token (the name's own characters, letters, digits, '_',
'.', '-', do not continue it on either side; a sentence's full stop after it does not count), case
aside. A name that is also a word of the item's own content (its question or answers, e.g. a worker
called "red" on a colour question) stays a word there, unless written as a person: "by red", "@red".
The content fields themselves (`changes`, `answer`, ...) are the item's content, exported anyway, and
are left as they are.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from vhmine.bench import Benchmark


def pseudonym(name: str, key: str) -> str:
    """A worker's stable stand-in in exports: the same name and store key give the same pseudonym."""
    return "w-" + hmac.new(key.encode("utf-8"), name.encode("utf-8"), hashlib.sha256).hexdigest()[:8]


def pseudonym_key(store) -> str:
    """The store's secret for pseudonyms (made by its migration 0003; made here if someone deleted it)."""
    import secrets

    from vhmine.store import Secret, utcnow

    with store.session() as s:
        row = s.get(Secret, "pseudonyms")
        if row is None:
            row = Secret(name="pseudonyms", value=secrets.token_hex(32), created_at=utcnow())
            s.add(row)
        return row.value


def collection_roots(indexes) -> list[Path]:
    """The collection roots (each index's recorded `root`, manifest.json) of `indexes` (the CollectionIndexes the
    store's mining runs came from: export.neardup.home_indexes): an image under one is shown relative to it."""
    roots = []
    for idx in indexes:
        try:
            root = idx.root
        except (KeyError, TypeError, ValueError):
            continue
        if root.is_absolute():  # local roots only
            roots.append(root.resolve())
    return list(dict.fromkeys(roots))


def public_path(path: str | None, roots=()) -> str | None:
    """A path as an export may show it, the same from any working folder: relative to the first collection root in
    `roots` (collection_roots) that holds it, else the file's name (a relative path stays as recorded)."""
    if not path:
        return path
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    for root in roots:
        for q in (p, p.resolve()):  # as recorded, or with its links resolved, as the root is
            if q.is_relative_to(root):
                return q.relative_to(root).as_posix()
    return p.name


def public_spec(spec: str, public: bool = True) -> str:
    """An encoder spec as an export may show it: paths in it made public (public_path)."""
    if not public:
        return spec
    prefix = "local-dir:"
    if spec.startswith(prefix):
        return prefix + (public_path(spec[len(prefix) :]) or "")
    name, sep, rest = spec.partition(":")
    if sep and rest.startswith("/"):
        return f"{name}:{public_path(rest)}"
    return public_path(spec) if spec.startswith("/") else spec


def public_store(url: str) -> str:
    """The store as an export may name it: a SQLite file's public path, or a server database's backend and name."""
    from sqlalchemy.engine import make_url

    try:
        u = make_url(url)
    except Exception:
        return "<unparsable database URL>"
    if u.get_backend_name() == "sqlite":
        return "sqlite:///" + (public_path(u.database) or "")
    return f"{u.get_backend_name()} database {u.database}"


def private_removed(bench: Benchmark, key: str, roots=()) -> Benchmark:
    """The benchmark with worker names pseudonymized and this machine's paths made public (see the docstring):
    source images relative to their collection root (`roots`: collection_roots)."""
    items = []
    for it in bench:
        meta = dict(it.meta)
        if meta.get("created_by"):
            meta["created_by"] = pseudonym(meta["created_by"], key)
        if meta.get("source_path"):
            meta["source_path"] = public_path(meta["source_path"], roots)
        items.append(replace(it, meta=meta))
    return Benchmark(bench.name, items, bench.root, bench.source)


NAME_FIELDS = frozenset(
    {
        "worker",
        "by",
        "flagged_by",
        "decided_by",
        "updated_by",
        "created_by",
        "done_by",
        "lease_worker",
        "reviewer",
        "workers",
    }
)
CONTENT_FIELDS = frozenset({"changes", "answer", "answers", "question", "proposed", "truth"})
_WORD = re.compile(r"\w+(?:[.-]\w+)*")
_AS_PERSON = re.compile(r"(?:\bby\s+|@)$", re.IGNORECASE)


def content_words(*texts) -> frozenset:
    """The lower-cased words of an item's content (strings, nested in lists and dicts), for `NameScrubber(keep=)`."""
    out: set = set()

    def walk(x):
        if isinstance(x, str):
            out.update(w.lower() for w in _WORD.findall(x))
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple, set, frozenset)):
            for v in x:
                walk(v)

    for t in texts:
        walk(t)
    return frozenset(out)


class NameScrubber:
    """Swaps worker names for their public form in logged actions (see the module docstring)."""

    def __init__(self, names: Iterable[str], public: Callable[[str], str]):
        names = sorted({n for n in names if n}, key=lambda n: (-len(n), n))
        self.public = public
        self.exact = set(names)
        self.by_lower: dict[str, str] = {}
        for n in names:  # a name written in another case is that worker (the exact spelling first)
            self.by_lower.setdefault(n.lower(), n)
        # whole tokens: no word character next to it, nor '.'/'-' going on into one (a name's own characters)
        self.pattern = (
            re.compile(r"(?<!\w)(?<!\w[.-])(" + "|".join(map(re.escape, names)) + r")(?!\w)(?![.-]\w)", re.IGNORECASE)
            if names
            else None
        )

    def text(self, s: str, keep: frozenset = frozenset()) -> str:
        if self.pattern is None:
            return s

        def swap(m: re.Match) -> str:
            found = m.group(1)
            if found.lower() in keep and not _AS_PERSON.search(m.string, 0, m.start()):
                return found  # a word of the item's content, not a person
            return self.public(found if found in self.exact else self.by_lower[found.lower()])

        return self.pattern.sub(swap, s)

    def __call__(self, obj, keep: frozenset = frozenset(), field: str | None = None):
        if isinstance(obj, str):
            if field in NAME_FIELDS and obj in self.exact:
                return self.public(obj)
            return self.text(obj, keep)
        if isinstance(obj, dict):
            return {k: v if k in CONTENT_FIELDS else self(v, keep, k) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self(v, keep, field) for v in obj]
        return obj
