"""The measurement caches: rates measured once per machine and kept in a small JSON file (the products kernels'
in mine.join.calibrate, the embedding precisions' in embed.precision), and what they are keyed by.

Reads and writes only the cache file its caller names: {"entries": {digest: {...}}}, where the digest is that of
the caller's identity (the machine, `cpu`, plus what else the rates depend on). A missing or unreadable file
reads as no entries; one that cannot be written is skipped (the rates are measured again next time). Writes go
through a temporary file beside it and a rename: workers of one node may measure at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def cache_file(env: str, name: str) -> Path:
    """$env, else $XDG_CACHE_HOME/vhmine/NAME, else ~/.cache/vhmine/NAME."""
    if os.environ.get(env):
        return Path(os.environ[env])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vhmine" / name


def cpu(wanted) -> tuple[str, list[str]]:
    """The CPU's model name and which of the `wanted` instruction-set flags it has (sorted), from /proc/cpuinfo
    (elsewhere platform.processor() and none)."""
    import platform

    model, flags = platform.processor(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return model, sorted(flags & set(wanted))


def digest(identity: dict) -> str:
    """The key of an identity's entry."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def read_entries(path: Path) -> dict:
    """The cache's contents, {"entries": {...}} at least."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("entries"), dict) else {"entries": {}}
    except (OSError, ValueError):
        return {"entries": {}}


def write_entries(path: Path, data: dict) -> None:
    """Atomically (by rename); a cache that cannot be written is skipped."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
