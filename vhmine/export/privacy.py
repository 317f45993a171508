"""What an export may show of people and of this machine: worker pseudonyms and public paths.

Reads the store's pseudonym secret (`secrets`, made by migration 0003); writes nothing. Used by the
export job, its changelog and its near-duplicate check, so that no worker name or machine path leaves
without `--with-provenance`.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace
from pathlib import Path
from typing import Optional

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


def public_path(path: Optional[str]) -> Optional[str]:
    """A path as an export may show it: relative to the working folder when inside it, else the file name."""
    if not path:
        return path
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.name


def public_spec(spec: str, public: bool = True) -> str:
    """An encoder spec as an export may show it: paths in it made public (public_path)."""
    if not public:
        return spec
    prefix = "local-dir:"
    if spec.startswith(prefix):
        return prefix + (public_path(spec[len(prefix):]) or "")
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


def private_removed(bench: Benchmark, key: str) -> Benchmark:
    """The benchmark with worker names pseudonymized and this machine's paths made public (see the docstring)."""
    items = []
    for it in bench:
        meta = dict(it.meta)
        if meta.get("created_by"):
            meta["created_by"] = pseudonym(meta["created_by"], key)
        if meta.get("source_path"):
            meta["source_path"] = public_path(meta["source_path"])
        items.append(replace(it, meta=meta))
    return Benchmark(bench.name, items, bench.root, bench.source)
