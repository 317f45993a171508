"""Where artifacts live: the roots of indexes and runs, the default index, and the store's URL.

Resolved at call time, never at import, so tests and users can move them with
flags or environment variables (`--indexes` / VHMINE_INDEXES, VHMINE_RUNS, VHMINE_INDEX).
"""

from __future__ import annotations

import os
from pathlib import Path

from vhmine.errors import IndexMissingError


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
    from vhmine.files import shown_path

    folder = Path(folder)
    default = folder.parent.resolve() == indexes_root().resolve()
    return f"vhmine mine --index {folder.name}" + ("" if default else f" --indexes {shown_path(folder.parent)}")


def run_index_folders(meta) -> list[Path]:
    """The index folders a run's run.json names: the one it mined (index_folder) and, for a
    `vhmine mine --against` run, the other side's (against.index_folder)."""
    if not isinstance(meta, dict):
        return []
    against = meta.get("against") if isinstance(meta.get("against"), dict) else {}
    return [Path(f) for f in (meta.get("index_folder"), against.get("index_folder")) if isinstance(f, str) and f]


def list_indexes(root: Path) -> list[str]:
    """Names of the collections under `root` (finished or not)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def default_index_name(root: Path, name: str | None) -> str:
    """The index to use when `--index` is left out: VHMINE_INDEX, else the only one there is."""
    if name:
        return name
    env = os.environ.get("VHMINE_INDEX")
    if env:
        return env
    every = list_indexes(root)
    names = [n for n in every if (root / n / "manifest.json").is_file()]  # an unfinished embed job is no choice
    unfinished = [n for n in every if n not in names]
    if len(names) == 1:
        return names[0]
    if not names and unfinished:
        raise IndexMissingError(
            f"no finished index under {root}/: {', '.join(unfinished)} did not finish embedding; rerun the same "
            "`vhmine embed` command to finish it (or pass --index NAME)"
        )
    if not names:
        raise IndexMissingError(
            f"no index under {root}/: build one with `vhmine embed FOLDER --name NAME` "
            "(or point --indexes / VHMINE_INDEXES at the folder that holds them)"
        )
    raise IndexMissingError(
        f"{len(names)} indexes under {root}/ ({', '.join(names)}): say which with --index NAME "
        "or set VHMINE_INDEX"
    )


# Defaults that the CLI, the library and the README share (one place, so they cannot drift).
DEFAULT_CLIP_MODEL = "ViT-L-14:openai"
DEFAULT_DINO_MODEL = "facebook/dinov2-large"
DEFAULT_CLIP_MIN = 0.9
DEFAULT_DINO_MAX = 0.55
