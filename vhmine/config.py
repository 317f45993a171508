"""Where artifacts live: the roots of indexes and runs and the store's URL, and the measurement caches' files
(`cache_file`); the shared defaults; the device torch work runs on (`resolve_device`) and the CPU's model and
instruction sets (`cpu`, what those caches are keyed by); work over items in a pool of threads (`in_threads`).
Reads environment variables, and /proc/cpuinfo.

Resolved at call time, never at import, so tests and users can move them with
flags or environment variables (`--indexes` / VHMINE_INDEXES, VHMINE_RUNS, VHMINE_DB). Which index a
command uses when --index is left out (VHMINE_INDEX) is vhmine.index.default_index_name.
"""

from __future__ import annotations

import os
from pathlib import Path

from vhmine.errors import EncoderError

# where `vhmine data coco` downloads from (env VHMINE_COCO_URL or --base-url name a mirror with the same layout)
COCO_BASE_URL = "http://images.cocodataset.org"

DEFAULT_DB = Path("data") / "vhmine.db"  # the curation store when neither --db nor VHMINE_DB names one


def resolve_url(db: str | os.PathLike | None = None) -> str:
    """The store's URL: `--db`, else VHMINE_DB, else data/vhmine.db; a bare path means a SQLite file.
    Here, not in vhmine.store, so `vhmine status` finds the store without SQLAlchemy."""
    raw = str(db) if db else (os.environ.get("VHMINE_DB") or str(DEFAULT_DB))
    if "://" in raw:
        return raw
    return "sqlite:///" + str(Path(raw).expanduser().resolve())


def indexes_root(override: str | os.PathLike | None = None) -> Path:
    return Path(override or os.environ.get("VHMINE_INDEXES") or "indexes")


def runs_root(override: str | os.PathLike | None = None) -> Path:
    return Path(override or os.environ.get("VHMINE_RUNS") or "runs")


def mine_command(folder: str | os.PathLike) -> str:
    """The command that mines the index in `folder` (embed's next step; `vhmine status` names it too):
    --indexes only when the index is not in the default place."""
    import shlex

    from vhmine.files import shown_path

    folder = Path(folder)
    default = folder.parent.resolve() == indexes_root().resolve()
    return f"vhmine mine --index {shlex.quote(folder.name)}" + (
        "" if default else f" --indexes {shown_path(folder.parent)}"
    )


def run_index_folders(meta) -> list[Path]:
    """The index folders a run's run.json names: the one it mined (index_folder) and, for a
    `vhmine mine --against` run, the other side's (against.index_folder)."""
    if not isinstance(meta, dict):
        return []
    against = meta.get("against") if isinstance(meta.get("against"), dict) else {}
    return [Path(f) for f in (meta.get("index_folder"), against.get("index_folder")) if isinstance(f, str) and f]


# Defaults that the CLI, the library and the README share (one place, so they cannot drift).
DEFAULT_CLIP_MODEL = "ViT-L-14:openai"
DEFAULT_DINO_MODEL = "facebook/dinov2-large"
DEFAULT_CLIP_MIN = 0.9
DEFAULT_DINO_MAX = 0.55


def resolve_device(device: str | None):
    """`None` means CUDA when present, else CPU. A CUDA device asked for but absent is an error."""
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:  # torch's own message lists some twenty device types
        raise EncoderError(f"--device {device}: not a device name; use cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise EncoderError(f"--device {device}: no CUDA device is available here; use --device cpu")
    return dev


def cache_file(env: str, name: str) -> Path:
    """A measurement cache (rates measured once per machine: vhmine.files.read_entries): $env, else
    $XDG_CACHE_HOME/vhmine/NAME, else ~/.cache/vhmine/NAME."""
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


def in_threads(fn, items, workers) -> list:
    """[fn(s) for s in items], in threads (numpy and hashlib release the GIL in the work): workers is a
    thread count (a pool just for this call) or a concurrent.futures.Executor, or None. Shared by the join
    (its checks and quantiser) and the index (its row digests), which may not import each other."""
    items = list(items)
    if len(items) < 2 or workers is None or (isinstance(workers, int) and workers <= 1):
        return [fn(s) for s in items]
    if isinstance(workers, int):
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(workers, len(items))) as pool:
            return list(pool.map(fn, items))
    return list(workers.map(fn, items))
