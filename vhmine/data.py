"""Download, verify and unpack COCO 2017 (`vhmine data coco`).

Reads the COCO zips over HTTP (standard library only) and writes, under `dest`:
`<split>/` (the images), `annotations/` (the JSON files), and `.partial/` (downloads in
progress and temporary extraction folders). A download resumes with an HTTP Range request;
each zip is checked against its md5 before it is unpacked; unpacking goes into a temporary
folder that is then renamed, so an interrupted run never leaves a half-filled `<split>/`.
A marker file inside each unpacked folder (`.vhmine-<zip>.done`, holding the zip's md5)
lets a later run skip the work.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tqdm import tqdm

from . import __version__
from .errors import DownloadError, InputError

log = logging.getLogger(__name__)

COCO_BASE_URL = "http://images.cocodataset.org"

# Published md5s of the official files, as shipped by several dataset loaders (DeepMind's
# dm_nevis COCO handler, PaddleDetection's COCO reader test, pytorchcocotools' CocoDownloader)
# and matching the single-part S3 ETags of images.cocodataset.org.
KNOWN_MD5 = {
    "train2017.zip": "cced6f7f71b7629ddf16f17bbcfab6b2",
    "val2017.zip": "442b8da7639aecaf257c1dceb8ba8c80",
    "test2017.zip": "77ad2c53ac5d0aea611d422c0938fb35",
    "annotations_trainval2017.zip": "f4bbac642086de4f52a3fdda2de5fa2c",
    "image_info_test2017.zip": "85da7065e5e600ebfee8af1edb634eb5",
}


@dataclass(frozen=True)
class _Split:
    images: str  # zip, relative to the base URL; unpacks to <split>/
    annotations: str  # zip, relative to the base URL; unpacks to annotations/
    annotations_json: str  # the file `CocoDownload.annotations` points at, relative to dest


_SPLITS = {
    "train2017": _Split("zips/train2017.zip", "annotations/annotations_trainval2017.zip",
                        "annotations/instances_train2017.json"),
    "val2017": _Split("zips/val2017.zip", "annotations/annotations_trainval2017.zip",
                      "annotations/instances_val2017.json"),
    "test2017": _Split("zips/test2017.zip", "annotations/image_info_test2017.zip",
                       "annotations/image_info_test2017.json"),
}

# Every socket operation (connect, each read) gives up after this long: a dead link fails
# instead of hanging. Name resolution has no socket timeout, so it gets its own bound.
SOCKET_TIMEOUT_S = 20.0
RESOLVE_TIMEOUT_S = 5.0
# Waits before each retry of a timed-out, reset or 5xx-answered request; a refused connection
# or an unknown host is not retried.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0)
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_CHUNK = 1 << 20


@dataclass
class CocoDownload:
    images_dir: Path
    annotations: Path | None
    downloaded_bytes: int
    image_count: int = 0

    def summary(self) -> str:
        fetched = (f"downloaded {_human(self.downloaded_bytes)}" if self.downloaded_bytes
                   else "already complete, nothing downloaded")
        lines = [f"COCO: {self.image_count} images in {self.images_dir} ({fetched})"]
        if self.annotations:
            lines.append(f"annotations: {self.annotations}")
        embed = f"vhmine embed {self.images_dir}"
        if self.annotations and self.annotations.name.startswith("instances_"):
            embed += f" --coco-annotations {self.annotations}"
        lines.append(f"next: {embed}")
        return "\n".join(lines)


def download_coco(
    split: str,
    dest: Path,
    *,
    annotations: bool = True,
    base_url: str | None = None,
    checksums: dict[str, str] | None = None,
    progress: bool = True,
) -> CocoDownload:
    """Make `dest/<split>/` (and the split's annotations) complete and verified.

    `base_url` defaults to env VHMINE_COCO_URL, then COCO_BASE_URL. `checksums` maps zip names
    to md5s over KNOWN_MD5 (None: check the size the server announced only). A zip placed by
    hand at `dest/<zip name>` is verified and used instead of downloading it.
    """
    spec = _SPLITS.get(split)
    if spec is None:
        raise InputError(f"unknown COCO split {split!r}: use --split with one of {', '.join(_SPLITS)}")
    base = (base_url or os.environ.get("VHMINE_COCO_URL") or COCO_BASE_URL).rstrip("/")
    md5s = {**KNOWN_MD5, **(checksums or {})}
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    _remove_stale_extractions(dest)

    jobs = [(spec.images, split)]
    if annotations:
        jobs.append((spec.annotations, "annotations"))
    fetched = 0
    for url_path, folder in jobs:
        name = url_path.rsplit("/", 1)[1]
        fetched += _fetch_and_unpack(f"{base}/{url_path}", dest, folder, md5s.get(name), progress)

    images_dir = dest / split
    ann_path = dest / spec.annotations_json if annotations else None
    if ann_path is not None and not ann_path.is_file():
        raise DownloadError(
            f"{ann_path} is missing after unpacking {spec.annotations}: the archive is not the COCO one; "
            f"delete {ann_path.parent} and run again, or check --base-url"
        )
    count = sum(1 for e in os.scandir(images_dir) if e.name.lower().endswith(".jpg"))
    return CocoDownload(images_dir=images_dir, annotations=ann_path, downloaded_bytes=fetched, image_count=count)


# --- one archive: skip, or get the zip, verify it, unpack it ---------------------------------


def _placed(part: Path) -> Path:
    """Where a user may put a hand-downloaded zip: dest/<zip>, next to dest/.partial/<zip>."""
    return part.parent.parent / part.name


def _marker(dest: Path, folder: str, name: str) -> Path:
    return dest / folder / f".vhmine-{name}.done"


def _fetch_and_unpack(url: str, dest: Path, folder: str, md5: str | None, progress: bool) -> int:
    """Returns the bytes fetched over the network (0 when the folder was already complete)."""
    name = url.rsplit("/", 1)[1]
    marker = _marker(dest, folder, name)
    if marker.is_file() and (md5 is None or marker.read_text().strip() == md5):
        log.info("%s/ already unpacked from %s; skipping", dest / folder, name)
        return 0

    placed = dest / name
    if placed.is_file():  # put there by hand, e.g. on a machine with no internet
        got = _file_md5(placed)
        if md5 and got != md5:
            raise DownloadError(
                f"{placed} has md5 {got}, expected {md5}: it is incomplete or not the COCO {name}; "
                f"replace it with the right file, or delete it to let vhmine download {url}"
            )
        _unpack(placed, dest, folder, got)
        return 0

    part = dest / ".partial" / name
    fetched, got = _download(url, part, progress)
    if md5 and got != md5:
        part.unlink(missing_ok=True)  # resuming a wrong file would only stay wrong
        raise DownloadError(
            f"{url} gave a file with md5 {got}, expected {md5} (deleted). If --base-url or "
            f"VHMINE_COCO_URL points at a mirror, it serves a different file; otherwise run again, "
            f"or download it by hand and place it at {placed}"
        )
    try:
        _unpack(part, dest, folder, got)
    except DownloadError:
        if not md5:  # unverified bytes that do not unpack: fetch them again next time
            part.unlink(missing_ok=True)
        raise
    part.unlink()
    return fetched


def _unpack(zip_path: Path, dest: Path, folder: str, md5: str) -> None:
    """Unpack the `folder/` entries of a zip into a temporary folder, then publish them."""
    staging = dest / ".partial"
    staging.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"extract-{zip_path.name}-", dir=staging))
    try:
        try:
            with zipfile.ZipFile(zip_path) as zf:
                members = [m for m in zf.infolist() if m.filename.split("/", 1)[0] == folder]
                if not members:
                    raise DownloadError(
                        f"{zip_path} has no {folder}/ folder: it is not the COCO archive; "
                        f"delete it and run again, or check --base-url"
                    )
                for member in members:
                    zf.extract(member, tmp)  # zipfile drops '..' and leading '/' from names
            _publish(tmp / folder, dest / folder, _marker(dest, folder, zip_path.name).name, md5)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as err:
            raise DownloadError(f"cannot unpack {zip_path} ({err}): delete it and run again") from err
        except OSError as err:
            raise DownloadError(
                f"cannot unpack {zip_path} into {dest} ({err}); check free disk space and permissions, "
                f"then run again"
            ) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(src: Path, dst: Path, marker_name: str, md5: str) -> None:
    if not dst.exists():
        # One rename: dst appears complete, marker included, or not at all.
        (src / marker_name).write_text(md5 + "\n")
        os.rename(src, dst)
        return
    # dst already holds files (another zip's annotations, or an earlier unpack without a
    # marker): move ours in one by one, then write the marker last.
    for path in sorted(src.rglob("*")):
        if path.is_file():
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    tmp_marker = dst / (marker_name + ".tmp")
    tmp_marker.write_text(md5 + "\n")
    os.replace(tmp_marker, dst / marker_name)


def _remove_stale_extractions(dest: Path) -> None:
    """Temporary folders left by a run that was killed while unpacking."""
    staging = dest / ".partial"
    if staging.is_dir():
        for path in staging.glob("extract-*"):
            shutil.rmtree(path, ignore_errors=True)


# --- HTTP ------------------------------------------------------------------------------------


class _Retry(Exception):
    """A failure worth another attempt (timeout, reset, short read, 5xx)."""


def _download(url: str, part: Path, progress: bool) -> tuple[int, str]:
    """Fetch `url` into `part`, resuming what is there; returns (bytes fetched, md5 of the file)."""
    _check_resolves(url, _placed(part))
    part.parent.mkdir(parents=True, exist_ok=True)
    hasher = _Hasher(part)
    failures = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        before = hasher.received
        try:
            _attempt(url, part, have, hasher, progress)
            return hasher.received, hasher.hexdigest()
        except OSError as err:  # local: writing the partial file
            raise DownloadError(
                f"cannot write {part} ({err}); check free disk space and permissions under "
                f"{part.parent.parent}, then run again to resume"
            ) from err
        except _Retry as err:
            if hasher.received > before:
                failures = 0  # progress was made: the link works, it just dropped
            if failures >= len(RETRY_DELAYS_S):
                raise DownloadError(
                    f"downloading {url} failed after {failures + 1} attempts ({err}); run the same "
                    f"command again to resume from {part}, or pass --base-url for a mirror"
                ) from None
            log.warning("%s: %s; retrying in %.0f s", url, err, RETRY_DELAYS_S[failures])
            time.sleep(RETRY_DELAYS_S[failures])
            failures += 1


def _attempt(url: str, part: Path, have: int, hasher: _Hasher, progress: bool) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": f"vhmine/{__version__}"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=SOCKET_TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # nothing after `have`: the partial file may be whole already
            total = _range_total(err.headers.get("Content-Range"))
            if total == have:
                hasher.catch_up(have)
                return
            part.unlink()
            raise _Retry(f"server refused to resume at byte {have} of {total}") from None
        if err.code in _RETRY_STATUS:
            raise _Retry(f"HTTP {err.code} {err.reason}") from None
        raise DownloadError(
            f"{url} answered HTTP {err.code} {err.reason}: the server does not offer this file; "
            f"check --base-url / VHMINE_COCO_URL (a mirror needs the zips/ and annotations/ layout "
            f"of {COCO_BASE_URL})"
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        _raise_if_unreachable(url, err, _placed(part))
        raise _Retry(_why(err)) from None

    with response:
        if response.status == 206:
            start, _, total = _content_range(response.headers.get("Content-Range"))
            if start not in (0, have):  # not the range we asked for: start over without one
                part.unlink(missing_ok=True)
                raise _Retry(f"server sent a range starting at byte {start}, not {have}")
            if total is None and (length := _int(response.headers.get("Content-Length"))) is not None:
                total = start + length
        else:
            start, total = 0, _int(response.headers.get("Content-Length"))
            if have:
                log.info("%s: the server ignored the resume request; downloading from the start", url)
        if start:
            log.info("%s: resuming at byte %d", url, start)
        _check_space(part, (total or 0) - start, total or 0)
        hasher.catch_up(start)
        got = 0
        with open(part, "r+b" if start else "wb") as out, tqdm(
            total=total, initial=start, unit="B", unit_scale=True, unit_divisor=1024,
            desc=part.name, disable=not progress, leave=False,
        ) as bar:
            out.seek(start)
            out.truncate()
            while True:
                try:
                    chunk = response.read(_CHUNK)
                except (OSError, http.client.HTTPException) as err:
                    raise _Retry(f"connection lost after {start + got} bytes ({_why(err)})") from None
                if not chunk:
                    break
                out.write(chunk)  # a write error (disk full) is not retried: see _download
                hasher.update(chunk)
                bar.update(len(chunk))
                got += len(chunk)
        if total is not None and start + got < total:
            raise _Retry(f"connection closed after {start + got} of {total} bytes")


class _Hasher:
    """md5 of `path` as it grows; re-reads the file only for bytes it has not seen.

    `received` counts the bytes that came over the network (fed through `update`).
    """

    def __init__(self, path: Path):
        self.path = path
        self.md5 = hashlib.md5()
        self.seen = 0
        self.received = 0

    def catch_up(self, upto: int) -> None:
        if upto < self.seen:  # the file restarts below what we hashed: start over
            self.md5, self.seen = hashlib.md5(), 0
        if upto > self.seen:
            with open(self.path, "rb") as f:
                f.seek(self.seen)
                left = upto - self.seen
                while left and (block := f.read(min(_CHUNK, left))):
                    self.md5.update(block)
                    left -= len(block)
            self.seen = upto

    def update(self, chunk: bytes) -> None:
        self.md5.update(chunk)
        self.seen += len(chunk)
        self.received += len(chunk)

    def hexdigest(self) -> str:
        return self.md5.hexdigest()


def _check_resolves(url: str, placed: Path) -> None:
    """Fail in seconds, not minutes, when the host (or the proxy) has no address: offline machines."""
    target = urlsplit(url)
    proxy = urllib.request.getproxies().get(target.scheme)
    host = target.hostname
    if proxy and not urllib.request.proxy_bypass(host or ""):
        host = urlsplit(proxy if "//" in proxy else "//" + proxy).hostname
    if not host:
        raise InputError(f"bad download URL {url!r}: --base-url must look like http://host[:port]")
    result: dict[str, BaseException | None] = {}

    def resolve() -> None:
        try:
            socket.getaddrinfo(host, None)
            result["error"] = None
        except BaseException as err:  # noqa: BLE001 - reported to the caller's thread below
            result["error"] = err

    worker = threading.Thread(target=resolve, daemon=True)  # a hung resolver must not block exit
    worker.start()
    worker.join(RESOLVE_TIMEOUT_S)
    if "error" not in result:
        raise DownloadError(_unreachable(url, f"no answer resolving {host} within {RESOLVE_TIMEOUT_S:g} s", placed))
    if result["error"] is not None:
        raise DownloadError(_unreachable(url, f"cannot resolve {host}: {_why(result['error'])}", placed))


def _raise_if_unreachable(url: str, err: BaseException, placed: Path) -> None:
    reason = getattr(err, "reason", err)
    if isinstance(reason, (socket.gaierror, ConnectionRefusedError)):
        raise DownloadError(_unreachable(url, _why(reason), placed)) from None


def _unreachable(url: str, why: str, placed: Path) -> str:
    return (
        f"cannot reach {url} ({why}). Check the network, pass --base-url (or set VHMINE_COCO_URL) "
        f"for a mirror, or download the file elsewhere and place it at {placed}"
    )


def _check_space(part: Path, remaining: int, total: int) -> None:
    # The zip and its unpacked copy (JPEGs barely compress) sit side by side until the zip goes.
    need = remaining + total
    free = shutil.disk_usage(part.parent).free
    if remaining > 0 and free < need:
        raise DownloadError(
            f"not enough disk space under {part.parent.parent}: {part.name} needs about "
            f"{_human(need)} (download and unpacked copy), {_human(free)} free; free some space "
            f"or pass --dest on a larger disk"
        )


def _content_range(value: str | None) -> tuple[int, int | None, int | None]:
    """'bytes 100-199/200' -> (100, 199, 200); unknown parts are None."""
    try:
        span, _, total = value.split(" ", 1)[1].partition("/")
        start, _, end = span.partition("-")
        return int(start), _int(end), _int(total)
    except (AttributeError, IndexError, ValueError):
        return -1, None, None  # unusable: treated as "not the range we asked for"


def _range_total(value: str | None) -> int | None:
    return _int(value.rpartition("/")[2]) if value else None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _file_md5(path: Path) -> str:
    from .images import file_digest

    return file_digest(path, "md5")


def _why(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    if isinstance(reason, BaseException):
        err = reason
    if isinstance(err, (TimeoutError, socket.timeout)):
        return f"no data for {SOCKET_TIMEOUT_S:g} s"
    return str(err) or type(err).__name__


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
