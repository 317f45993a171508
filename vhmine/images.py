"""Find image files and decode them, safely, into 8-bit RGB.

The embed stage's reader goes through this module: `list_images` walks a folder, the reader
reads each file once, hashes the bytes with `sha256_bytes` and decodes the same bytes with
`decode_rgb`. A file that cannot be used raises `BadImage` with a short reason, which the
reader records as data; a bad image never stops a job.

`read_image_bytes` is the one place the stages after embed (gallery, seed, the curation app, export,
probe, eval, describe) open an image where an index or the store records it: a file, a member of a
WebDataset tar (`<folder>/00000.tar/<member>`, read through vhmine.tars.read_member), or either behind an
fsspec URL (`s3://bucket/shards/00000.tar/<member>`). Reads those bytes; writes nothing. `encode_as` is how
every export format that re-encodes an image gets bytes its file type holds (`image_for`: any mode PIL reads).
"""

from __future__ import annotations

import errno
import hashlib
import io
import math
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from vhmine.errors import BadImage

# numpy and PIL are imported inside the functions that decode: the stages that only hash or read bytes (the
# store, `vhmine status`) do not pay for them
if TYPE_CHECKING:  # annotations only
    import numpy as np
    from PIL import Image, ImageFile

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")

# Formats tried when identifying bytes. A mis-named file of a common raster format still decodes;
# formats whose loaders run external programs (EPS calls Ghostscript) are never tried.
_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")

# Serialises the few microseconds during which PIL's own bomb limit is lifted (see _open).
_PIL_LIMIT_LOCK = threading.Lock()

_WHITE = (255, 255, 255)
_KEEPS_ALPHA = ("PNG", "WEBP")  # output formats whose files hold an alpha channel (image_for)


def list_images(root: Path) -> list[Path]:
    """Image files under `root`, recursively, sorted by their POSIX path relative to `root`.

    Hidden files and folders (a leading dot) are skipped. Symbolic links are followed, but each
    real folder is visited once, so a link loop (or two links to one folder) adds nothing twice.
    Returned paths are `root / relative path`, never resolved.
    """
    from vhmine.errors import InputError

    root = Path(root)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise InputError(f"image folder {root} {what}: pass a folder of .jpg/.jpeg/.png/.webp files")
    found: list[tuple[str, Path]] = []
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        st = os.stat(dirpath)
        if (st.st_dev, st.st_ino) in seen:
            dirnames[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        # Sorted so that, of two links to one folder, the same one wins on every run.
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = Path(dirpath).relative_to(root)
        for name in filenames:
            if name.startswith(".") or not name.lower().endswith(IMAGE_SUFFIXES):
                continue
            path = Path(dirpath, name)
            if path.is_file():  # False for a dangling link
                found.append(((rel_dir / name).as_posix(), root / rel_dir / name))
    found.sort(key=lambda item: item[0])
    return [path for _, path in found]


def file_digest(path: Path, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    """Hex digest of a file, read in chunks (the one file hasher: indexes, store, exports, downloads)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/+")


def remote_url(location) -> str | None:
    """`location` as an fsspec URL when it is one (also when a Path folded its `//` into `/`), else None.
    file:// URLs are local paths: None."""
    text = str(location)
    m = _SCHEME.match(text)
    if m is None or m.group(1).lower() in ("file", "local") or os.path.exists(text):
        return None
    return f"{m.group(1)}://{text[m.end() :]}"


def local_path(location) -> str:
    """A location that is not a remote URL, as a local path (file:// URLs lose their scheme)."""
    text = str(location)
    m = _SCHEME.match(text)
    if m is not None and m.group(1).lower() in ("file", "local") and not os.path.exists(text):
        return "/" + text[m.end() :]
    return text


def join_location(root: str, rel: str) -> str:
    """The location of `rel` (a POSIX path, as images.parquet records it) under `root` (a folder, or a URL)."""
    url = remote_url(root)
    return f"{url.rstrip('/')}/{rel}" if url else str(Path(local_path(root)) / rel)


def read_image_bytes(location) -> bytes:
    """The bytes of the image at `location`: a file; a member of a tar (the first `.tar` along the path
    that is a file holds the rest of the path as a member); either through fsspec for a URL. Raises
    OSError (FileNotFoundError when there is no such file or member)."""
    url = remote_url(location)
    if url is None:
        path = local_path(location)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                return f.read()
        parts = path.split("/")
        is_file = os.path.isfile
    else:
        import fsspec

        try:
            fs, path = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as err:
            raise OSError(
                errno.EPROTONOSUPPORT,
                f"cannot open this URL ({err}); install the fsspec package for its protocol (e.g. s3fs, gcsfs)",
                url,
            ) from None
        if fs.isfile(path):
            return fs.cat_file(path)
        parts = path.split("/")
        is_file = fs.isfile
    for k, part in enumerate(parts[:-1]):
        tar = "/".join(parts[: k + 1])
        if part.lower().endswith(".tar") and is_file(tar):
            from vhmine.tars import read_member

            return read_member(tar if url is None else fs.unstrip_protocol(tar), "/".join(parts[k + 1 :]))
    raise FileNotFoundError(errno.ENOENT, "no such file", str(location))


def open_scene_image(location) -> Image.Image:
    """The decoded RGB picture at `location` (a file or a tar member, as read_image_bytes reads it)."""
    return decode_rgb(read_image_bytes(location))


def image_sha256(location) -> str | None:
    """sha256 of the image at `location` (see read_image_bytes), or None when it cannot be read."""
    path = local_path(location)
    try:
        if remote_url(location) is None and os.path.isfile(path):
            return sha256_file(Path(path))  # a plain file is hashed in chunks
        return sha256_bytes(read_image_bytes(location))
    except (OSError, ValueError):
        return None


def decode_rgb(data: bytes, *, max_pixels: int = 89_478_485, at_least: int | None = None) -> Image.Image:
    """Decode image bytes into a fully loaded 8-bit RGB image, upright per its EXIF orientation.

    Raises BadImage for empty, unidentifiable, too large (checked from the header, before any
    pixel is decoded), truncated or otherwise undecodable data. Transparent pixels are laid on
    white; 16-bit and float images are scaled, not clipped; animated images give their first frame.
    at_least: the longer side wanted (a thumbnail's): a JPEG is then decoded at 1/2, 1/4 or 1/8 scale
    where that still leaves a picture this large (libjpeg's scaled decoding: a few times faster).
    """
    return _decode(data, _to_rgb, max_pixels, at_least)


def image_for(im: Image.Image, fmt: str) -> Image.Image:
    """`im`, of any mode PIL reads, in a mode the output format `fmt` holds: RGBA where `fmt` keeps alpha
    (PNG, WebP) and `im` has any, else 8-bit RGB as decode_rgb makes it (CMYK through its profile, 16-bit
    and float scaled, alpha laid on white)."""
    alpha = im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info
    if fmt.upper() in _KEEPS_ALPHA and alpha and im.mode[0] not in "IF":
        return im.convert("RGBA")
    return _to_rgb(im)


def encode_as(data: bytes, fmt: str, **options) -> bytes:
    """Image bytes (any format and mode PIL reads) re-encoded as `fmt` ("PNG", "JPEG", "WEBP") in a mode it
    holds (image_for), upright; `options` go to PIL's save. Raises BadImage as decode_rgb does."""
    buf = io.BytesIO()
    _decode(data, lambda im: image_for(im, fmt), 89_478_485, None).save(buf, format=fmt.upper(), **options)
    return buf.getvalue()


def _decode(data: bytes, convert, max_pixels: int, at_least: int | None) -> Image.Image:
    from PIL import ImageOps

    if not data:
        raise BadImage("empty file (0 bytes)")
    webp_size = _webp_size(data)
    if webp_size:  # PIL's WebP reader allocates the whole canvas while opening: check first
        _check_pixels(webp_size, max_pixels)
    im = _open(data)
    try:
        _check_pixels(im.size, max_pixels)
        if at_least and max(im.size) > at_least:
            scale = at_least / max(im.size)  # draft keeps both sides at least this large: the longer one >= at_least
            im.draft(None, (math.ceil(im.width * scale), math.ceil(im.height * scale)))
        _load(im)
        try:
            ImageOps.exif_transpose(im, in_place=True)
        except Exception:  # a broken EXIF block does not make the pixels bad: keep them as stored
            pass
        return convert(im)
    except BadImage:
        raise
    except Exception as err:  # any decoder failure is a property of this file, not of the job
        raise BadImage(f"cannot decode: {_short(err)}") from err
    finally:
        im.close()


def _check_pixels(size: tuple[int, int], max_pixels: int) -> None:
    width, height = size
    if width * height > max_pixels:
        raise BadImage(f"too large: {width}x{height} = {width * height} pixels > --max-pixels {max_pixels}")


def _webp_size(data: bytes) -> tuple[int, int] | None:
    """Canvas size from a WebP header (RIFF container; VP8X, VP8 or VP8L first chunk), else None."""
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = int.from_bytes(data[26:28], "little"), int.from_bytes(data[28:30], "little")
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    return None


def _open(data: bytes) -> ImageFile.ImageFile:
    """Identify the bytes and read the header only.

    PIL's own bomb check (a process-wide limit that warns, then raises with no size in the
    message) would fire before ours; it is lifted for this header read only, under a lock, and
    always restored, so other code keeps PIL's default.
    """
    from PIL import Image, UnidentifiedImageError

    with _PIL_LIMIT_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            return Image.open(io.BytesIO(data), formats=_FORMATS)
        except UnidentifiedImageError:
            raise BadImage("not an image (cannot identify format)" + _sniff(data)) from None
        except Exception as err:
            if _riff_truncated(data):  # PIL reads a whole WebP while opening it
                raise BadImage("truncated file") from err
            raise BadImage(f"unreadable header: {_short(err)}") from err
        finally:
            Image.MAX_IMAGE_PIXELS = saved


def _riff_truncated(data: bytes) -> bool:
    return data[:4] == b"RIFF" and len(data) >= 8 and len(data) < 8 + int.from_bytes(data[4:8], "little")


def _load(im: ImageFile.ImageFile) -> None:
    from PIL import ImageFile

    if ImageFile.LOAD_TRUNCATED_IMAGES:  # another library switched PIL's process-wide leniency on (lmms-eval does)
        with _PIL_LIMIT_LOCK:  # off for this decode only, and restored: a truncated file is still named so
            saved, ImageFile.LOAD_TRUNCATED_IMAGES = ImageFile.LOAD_TRUNCATED_IMAGES, False
            try:
                _load_strict(im)
            finally:
                ImageFile.LOAD_TRUNCATED_IMAGES = saved
    else:
        _load_strict(im)


def _load_strict(im: ImageFile.ImageFile) -> None:
    try:
        im.load()
    except (OSError, SyntaxError, EOFError, ValueError) as err:
        text = str(err).lower()
        # PIL words truncation several ways depending on the format and where the data stops.
        if any(w in text for w in ("truncated", "premature end", "end of file", "broken data", "unexpected end")):
            raise BadImage("truncated file") from err
        if isinstance(err, EOFError):
            raise BadImage("truncated file") from err
        raise BadImage(f"cannot decode: {_short(err)}") from err


def _to_rgb(im: Image.Image) -> Image.Image:
    import numpy as np
    from PIL import Image

    mode = im.mode
    if mode == "RGB" and "transparency" not in im.info:
        return im.copy()
    if mode.startswith("I;16"):
        # PIL's convert("RGB") clips 16-bit values at 255, turning most of the image white.
        arr = np.asarray(im).astype(np.float64) / 257.0
        return _gray_array_to_rgb(arr)
    if mode == "I":
        return _gray_array_to_rgb(_scale_int(np.asarray(im, dtype=np.int64)))
    if mode == "F":
        return _gray_array_to_rgb(_scale_float(np.asarray(im, dtype=np.float64)))
    if mode == "CMYK":
        return _cmyk_to_rgb(im)
    if mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, _WHITE + (255,))
        return Image.alpha_composite(white, rgba).convert("RGB")
    try:
        return im.convert("RGB")
    except ValueError as err:
        raise BadImage(f"unsupported image mode {mode}") from err


def _gray_array_to_rgb(arr: np.ndarray) -> Image.Image:
    import numpy as np
    from PIL import Image

    u8 = np.clip(np.rint(np.nan_to_num(arr)), 0, 255).astype(np.uint8)
    return Image.fromarray(u8, mode="L").convert("RGB")


def _scale_int(arr: np.ndarray) -> np.ndarray:
    """32-bit integer pixels: 8-bit or 16-bit data in a wide container, else stretched to 0..255."""
    import numpy as np

    lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    if lo >= 0 and hi <= 255:
        return arr.astype(np.float64)
    if lo >= 0 and hi <= 65535:  # older PIL versions open 16-bit PNGs as "I"
        return arr / 257.0
    return _stretch(arr.astype(np.float64), lo, hi)


def _scale_float(arr: np.ndarray) -> np.ndarray:
    """Float pixels: 0..1 (the usual convention) or 0..255 as they are, else stretched to 0..255."""
    import numpy as np

    finite = arr[np.isfinite(arr)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if lo >= 0 and hi <= 1:
        return arr * 255.0
    if lo >= 0 and hi <= 255:
        return arr
    return _stretch(arr, lo, hi)


def _stretch(arr: np.ndarray, lo: float, hi: float) -> np.ndarray:
    import numpy as np

    if hi <= lo:
        return np.zeros_like(arr)
    return (arr - lo) * (255.0 / (hi - lo))


def _cmyk_to_rgb(im: Image.Image) -> Image.Image:
    """Through the embedded ICC profile when there is one: PIL's plain formula is far off for print CMYK."""
    from PIL import ImageCms

    icc = im.info.get("icc_profile")
    if icc:
        try:
            src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            return ImageCms.profileToProfile(im, src, ImageCms.createProfile("sRGB"), outputMode="RGB")
        except Exception:  # a broken profile: fall back to the plain formula
            pass
    return im.convert("RGB")


def _sniff(data: bytes) -> str:
    """A hint at what the bytes are instead, for the most common impostors."""
    head = data[:512].lstrip()
    lower = head.lower()
    if lower.startswith(b"version https://git-lfs"):
        return ": a Git LFS pointer, not the image (run `git lfs pull`)"
    if lower.startswith((b"<!doctype html", b"<html", b"<head", b"<?xml")) or b"<html" in lower:
        return ": looks like HTML/XML (a saved web page?)"
    if head and not any(b < 9 or 13 < b < 32 for b in head):  # no control bytes: text
        return ": looks like text"
    return ""


def _short(err: Exception, limit: int = 120) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
