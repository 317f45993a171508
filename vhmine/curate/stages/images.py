"""Image bytes for the app, and image files for export: found by content (sha256), never taken on trust.

Reads the `images` table (recorded path and sha256), the runs' `index_folder` (from their run.json)
and those indexes' images.parquet (index.locate_image), and the images themselves: files, or members of
WebDataset tars, local or behind an fsspec URL (images.read_image_bytes); writes nothing.
The recorded image is used while its bytes still hash to the recorded sha256; when it has moved or
changed, another copy with that content that an index lists is used (a duplicate copy, or the
image's new place after `vhmine embed` ran again). When none is left, a StoreError says to restore it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from vhmine.curate.base import file_stamp, index_folders_in
from vhmine.errors import InputError, StoreError
from vhmine.images import image_sha256, read_image_bytes
from vhmine.index import locate_image
from vhmine.store import Image, Store

_IMAGE_ID = re.compile(r"^[0-9a-f]{16}$")


def index_folders(store: Store) -> list[Path]:
    """Indexes that may list the store's images: those its mined runs came from, then ./indexes (or
    VHMINE_INDEXES)."""
    with store.session(write=False) as s:
        return index_folders_in(s)


def current_path(store: Store, sha256: str, recorded: str) -> Path | str | None:
    """Where the image with this sha256 is now (the recorded place first: a file, a tar member, a URL), or None."""
    return locate_image(sha256, recorded, lambda: index_folders(store))


def _recorded(store: Store, image_id: str) -> tuple[str, str]:
    """(sha256, recorded path) of a recorded image id; InputError for anything else."""
    if not isinstance(image_id, str) or not _IMAGE_ID.match(image_id):
        raise InputError(f"{image_id!r} is not an image id (16 lower-case hex digits)")
    with store.session(write=False) as s:
        img = s.get(Image, image_id)
        sha, recorded = (img.sha256, img.path) if img is not None else (None, None)
    if img is None:
        raise InputError(f"no image {image_id} in {store.display_url}")
    return sha, recorded


def _located(store: Store, image_id: str, sha: str, recorded: str) -> Path | str:
    found = current_path(store, sha, recorded)
    if found is not None:
        return found
    if image_sha256(recorded) is not None:
        raise StoreError(
            f"image {image_id} at {recorded} no longer matches its recorded sha256: the file was changed; "
            "restore it (no index lists another file with its content)"
        )
    raise StoreError(
        f"image {image_id} is recorded at {recorded}, which is missing, and no index lists another file with "
        "its content: restore the file, or run `vhmine embed` again on the folder it moved to"
    )


def image_stamp(store: Store, image_id: str) -> tuple:
    """What changes when the recorded image's file does (its size, modification time and inode), read without
    hashing: a cache of what image_bytes served (the app's thumbnails) is good while the stamp stays the same."""
    sha, recorded = _recorded(store, image_id)
    stamp = file_stamp(recorded)  # None: gone, a tar member or a URL (the caller checks it again)
    return (sha, recorded, *(stamp or (None,)))


def image_file(store: Store, image_id: str) -> Path | str:
    """Where a recorded image id's content is: a file or a tar member (a Path), or an fsspec URL (a str).
    Nothing but a recorded id reaches the file system."""
    return _located(store, image_id, *_recorded(store, image_id))


def image_bytes(store: Store, image_id: str) -> bytes:
    """The bytes of a recorded image, checked against its recorded sha256: read and hashed once from the
    recorded place; the indexes are searched (image_file) only when those bytes are gone or changed."""
    sha, recorded = _recorded(store, image_id)
    if recorded is not None:
        try:
            data = read_image_bytes(recorded)
        except (OSError, ValueError):  # what image_sha256 takes for "cannot be read"
            data = None
        if data is not None and hashlib.sha256(data).hexdigest() == sha:
            return data
    p = _located(store, image_id, sha, recorded)
    try:
        data = read_image_bytes(p)
    except OSError as err:  # gone between the check and the read
        raise StoreError(f"image {image_id} at {p} cannot be read now ({err.strerror or err}): restore it") from None
    if hashlib.sha256(data).hexdigest() != sha:  # changed between the check and the read
        raise StoreError(
            f"image {image_id} at {p} no longer matches its recorded sha256: the file was changed; restore it"
        )
    return data
