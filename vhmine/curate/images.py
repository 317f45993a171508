"""Image bytes for the app: only files whose image id is recorded in the curation store.

Reads the `images` table (recorded path and sha256) and that file; writes nothing. A missing or
changed file is a StoreError that says to restore it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..errors import InputError, StoreError
from ..store import Image, Store

_IMAGE_ID = re.compile(r"^[0-9a-f]{16}$")


def image_file(store: Store, image_id: str) -> Path:
    """The recorded file of an image id. Nothing but a recorded id reaches the file system."""
    if not isinstance(image_id, str) or not _IMAGE_ID.match(image_id):
        raise InputError(f"{image_id!r} is not an image id (16 lower-case hex digits)")
    with store.session(write=False) as s:
        img = s.get(Image, image_id)
    if img is None:
        raise InputError(f"no image {image_id} in {store.display_url}")
    p = Path(img.path)
    if not p.is_file():
        raise StoreError(f"image {image_id} is recorded at {p}, which is missing: restore the file or re-seed")
    return p


def image_bytes(store: Store, image_id: str) -> bytes:
    """The bytes of a recorded image, checked against its recorded sha256."""
    p = image_file(store, image_id)
    data = p.read_bytes()
    with store.session(write=False) as s:
        want = s.get(Image, image_id).sha256
    if hashlib.sha256(data).hexdigest() != want:
        raise StoreError(f"image {image_id} at {p} no longer matches its recorded sha256: the file was changed; restore it")
    return data
