"""The request cache: answers by request key, and failures with reasons, in one SQLite file.

Reads and writes `data/llm-cache.db` by default (`--cache` / VHMINE_LLM_CACHE). The key is the
sha256 of everything that decides an answer: the endpoint without credentials (two servers may serve
one model name with different weights), the model, prompt, image hashes and parameters; never the API
key. So a second run costs nothing and a killed run resumes where it stopped. Answers cached by older
vhmine (keys without the endpoint) are still found when the endpoint they were recorded with matches.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from vhmine.errors import InputError

DEFAULT_CACHE = Path("data") / "llm-cache.db"
CACHE_VERSION = 2  # 2: the endpoint is part of the key


def cache_path(override: os.PathLike | str | None = None) -> Path:
    return Path(override or os.environ.get("VHMINE_LLM_CACHE") or DEFAULT_CACHE)


class Cache:
    """Answers by request key, and failures with reasons, in one SQLite file (WAL; one writer lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
                "model TEXT NOT NULL, endpoint TEXT, request TEXT NOT NULL, answer TEXT NOT NULL, "
                "cost REAL NOT NULL, created_at TEXT NOT NULL)"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS failures (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "key TEXT NOT NULL, kind TEXT NOT NULL, model TEXT NOT NULL, endpoint TEXT, "
                "status TEXT NOT NULL, reason TEXT NOT NULL, attempts INTEGER, created_at TEXT NOT NULL)"
            )
        except sqlite3.Error as err:
            raise InputError(f"cannot open the request cache {self.path}: {err}; pass --cache FILE") from None

    def get(
        self, key: str, legacy_key: str | Callable[[], str] | None = None, endpoint: str | None = None
    ) -> dict | None:
        """The answer under `key`; else one an older vhmine stored under `legacy_key` from this `endpoint`.

        `legacy_key` may be a function that computes it: called only when `key` misses.
        """
        with self._lock:
            row = self._db.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
            if row is None and callable(legacy_key):
                legacy_key = legacy_key()
            if row is None and legacy_key is not None:
                row = self._db.execute(
                    "SELECT answer FROM answers WHERE key = ? AND endpoint = ?", (legacy_key, endpoint)
                ).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, kind: str, model: str, endpoint: str, request: dict, answer: dict, cost: float) -> None:
        with self._lock:  # autocommit: an answer on disk survives a kill right after
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    kind,
                    model,
                    endpoint,
                    json.dumps(request, sort_keys=True),
                    json.dumps(answer, sort_keys=True),
                    cost,
                    _now(),
                ),
            )

    def fail(self, key: str, kind: str, model: str, endpoint: str, status: str, reason: str, attempts: int) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO failures (key, kind, model, endpoint, status, reason, attempts, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, kind, model, endpoint, status, reason, attempts, _now()),
            )

    def failures(self) -> list[dict]:
        with self._lock:
            cur = self._db.execute("SELECT key, kind, model, status, reason, attempts FROM failures ORDER BY id")
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def request_key(kind: str, model: str, endpoint: str, payload: dict) -> str:
    """sha256 of the canonical JSON of everything that decides an answer, the endpoint (`safe_endpoint`:
    no credentials) included; never the API key."""
    return _sha({"v": CACHE_VERSION, "kind": kind, "model": model, "endpoint": endpoint, **payload})


def legacy_request_key(kind: str, model: str, payload: dict) -> str:
    """The key vhmine used before the endpoint was part of it (cache version 1)."""
    return _sha({"v": 1, "kind": kind, "model": model, **payload})


def _sha(record: dict) -> str:
    blob = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
