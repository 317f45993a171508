"""Whether a recorded image is still there: its bytes, wherever an index lists them, hash to the recorded sha256.

Reads the `images` row (recorded path and sha256) and the runs' `index_folder` (`runs.meta`) through the caller's
session, the indexes' images.parquet (index.locate_image) and the image files themselves; writes nothing to the
store. Leasing asks it for every task it hands out (curate.work.holds), so an answer is kept per process with the
recorded file's stamp (size, modification time, inode: a stat, no read): a file is hashed again only when its stamp
changed. An image found nowhere, or found through an index rather than at its recorded place, or one with no stamp
(a tar member, a URL), is checked again after `RECHECK_S`.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine.images import image_sha256, local_path, remote_url
from vhmine.index import locate_image
from vhmine.store import Image, Run

RECHECK_S = 60.0
_CHECKED: dict[tuple[str, str], tuple[tuple | None, str | None, float]] = {}  # (sha, path) -> (stamp, problem, when)
_MAX_CHECKED = 200_000  # entries kept (a few tens of MB at most); the whole table is dropped past it


def file_stamp(location) -> tuple | None:
    """(size, modification time in ns, inode) of the local file at `location`, read without opening it; None for
    what has none: a missing file, a tar member, a URL."""
    if location is None or remote_url(location) is not None:
        return None
    try:
        st = os.stat(local_path(location))
    except (OSError, TypeError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def index_folders_in(s: Session) -> list[Path]:
    """Indexes that may list the store's images: those its mined runs came from, then ./indexes (or
    VHMINE_INDEXES)."""
    from vhmine.config import indexes_root, run_index_folders
    from vhmine.index import list_indexes

    folders = [f for m in s.scalars(select(Run.meta)).all() for f in run_index_folders(m)]
    root = indexes_root()
    folders += [root / name for name in list_indexes(root)]
    return list(dict.fromkeys(folders))


def image_problem(s: Session, image_id: str, *, force: bool = False) -> str | None:
    """None while the image can be served (its recorded file, or a copy an index lists, hashes to its sha256), else
    why not: "image missing: <id>" (nothing readable where it was recorded, nor elsewhere) or "image changed: <id>"
    (the recorded file holds other bytes now). `force`: check again even when the stamp says nothing changed."""
    img = s.get(Image, image_id)
    if img is None:
        return f"image missing: {image_id} (not in the store)"
    key, stamp, now = (img.sha256, img.path), file_stamp(img.path), time.monotonic()
    seen = _CHECKED.get(key)
    # a good answer holds while the file's stamp does; any other for RECHECK_S
    if seen is not None and not force and seen[0] == stamp:
        if (seen[1] is None and stamp is not None) or now - seen[2] < RECHECK_S:
            return seen[1]
    here = image_sha256(img.path)
    if here == img.sha256:
        problem = None
    elif locate_image(img.sha256, None, lambda: index_folders_in(s)) is not None:
        problem, stamp = None, None  # a copy an index lists: the recorded file's stamp says nothing of it
    else:
        problem = f"image {'missing' if here is None else 'changed'}: {image_id}"
    if len(_CHECKED) >= _MAX_CHECKED:
        _CHECKED.clear()
    _CHECKED[key] = (stamp, problem, now)
    return problem


def problem_kind(reason: str | None) -> str:
    """ "image missing" or "image changed": what a hold's reason says, without the image id."""
    return (reason or "").split(":", 1)[0] or "unknown"
