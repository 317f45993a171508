"""Images as base64 data URLs under the API's size limit (`max_image_bytes`, 5 MB of base64 by default).

Reads images (files, WebDataset tar members, fsspec URLs: images.read_image_bytes) or bytes; writes
nothing. JPEG, PNG, WebP and GIF under the limit go as they are, anything else is re-encoded as JPEG,
and an image still too large is downscaled until it fits; the `SentImage` returned records what was
sent. PIL is imported inside `encode_image`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
from pathlib import Path

from vhmine.errors import InputError
from vhmine.llm.records import MAX_IMAGE_BYTES, SentImage

_MIME = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}


def _b64_len(n: int) -> int:
    return 4 * math.ceil(n / 3)


def encode_image(data: bytes, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[str, SentImage]:
    """A data URL for an image and the record of what it holds; re-encodes and downscales as needed.

    Formats every API takes (JPEG, PNG, WebP, GIF) under the limit go as they are; anything else is
    re-encoded as JPEG, and an image still over the limit is shrunk until it fits.
    """
    from PIL import Image

    sha = hashlib.sha256(data).hexdigest()
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as err:
        raise InputError(
            f"image {sha[:16]} cannot be decoded ({type(err).__name__}: {err}): check the file, or remove the item"
        ) from None
    fmt = img.format or ""
    if fmt in _MIME and _b64_len(len(data)) <= max_bytes:
        out, mime, action, size = data, _MIME[fmt], "as-is", img.size
    else:
        if img.mode not in ("RGB", "L"):  # JPEG has no alpha: flatten onto white
            rgba = img.convert("RGBA")
            bg = Image.new("RGB", rgba.size, (255, 255, 255))
            bg.paste(rgba, mask=rgba.split()[-1])
            img = bg
        action, scale = "re-encoded", 1.0
        while True:
            cur = (
                img
                if scale == 1.0
                else img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.LANCZOS)
            )
            buf = io.BytesIO()
            cur.save(buf, format="JPEG", quality=90)
            out = buf.getvalue()
            if _b64_len(len(out)) <= max_bytes or (cur.width <= 16 and cur.height <= 16):
                break
            scale *= 0.95 * math.sqrt(max_bytes / _b64_len(len(out)))  # area shrinks with the byte ratio
            action = "downscaled"
        mime, size = "image/jpeg", cur.size
    url = f"data:{mime};base64," + base64.b64encode(out).decode("ascii")
    return url, SentImage(sha, hashlib.sha256(out).hexdigest(), mime, size[0], size[1], len(out), action)


def _read_image(src: Path | str | bytes) -> bytes:
    from vhmine.images import read_image_bytes

    if isinstance(src, (bytes, bytearray)):
        return bytes(src)
    try:
        return read_image_bytes(src)
    except OSError as err:
        raise InputError(f"cannot read image {src}: {err.strerror}; restore the file") from None
