"""Resumable HTTP downloads for `vhmine data coco` (vhmine.data.coco): one URL into one partial file, with retries.

Reads the URL over HTTP (standard library only) and writes the partial file given (`dest/.partial/<zip>`),
resuming what is there with an HTTP Range request; returns the bytes fetched and the md5 of the whole file
(hashed as it arrives). Fails fast, with what to do, when the host cannot be resolved or refuses the
connection or the disk is too small; retries timeouts, resets, short reads and 5xx answers.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from tqdm import tqdm

from vhmine import __version__
from vhmine.config import COCO_BASE_URL  # the layout a mirror must copy
from vhmine.errors import DownloadError, InputError
from vhmine.files import display_url

log = logging.getLogger(__name__)

# Every socket operation (connect, each read) gives up after this long: a dead link fails
# instead of hanging. Name resolution has no socket timeout, so it gets its own bound.
SOCKET_TIMEOUT_S = 20.0
RESOLVE_TIMEOUT_S = 5.0
# Waits before each retry of a timed-out, reset or 5xx-answered request; a refused connection
# or an unknown host is not retried.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0)
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_CHUNK = 1 << 20


class _Retry(Exception):
    """A failure worth another attempt (timeout, reset, short read, 5xx)."""


def download(url: str, part: Path, placed: Path, progress: bool) -> tuple[int, str]:
    """Fetch `url` into `part`, resuming what is there; returns (bytes fetched, md5 of the file).
    `placed` is where error messages tell the user to put a file downloaded by hand."""
    _check_resolves(url, placed)
    part.parent.mkdir(parents=True, exist_ok=True)
    hasher = _Hasher(part)
    failures = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        before = hasher.received
        try:
            _attempt(url, part, placed, have, hasher, progress)
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
                    f"downloading {display_url(url)} failed after {failures + 1} attempts ({err}); run the same "
                    f"command again to resume from {part}, or pass --base-url for a mirror"
                ) from None
            log.warning("%s: %s; retrying in %.0f s", display_url(url), err, RETRY_DELAYS_S[failures])
            time.sleep(RETRY_DELAYS_S[failures])
            failures += 1


def _attempt(url: str, part: Path, placed: Path, have: int, hasher: _Hasher, progress: bool) -> None:
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
            f"{display_url(url)} answered HTTP {err.code} {err.reason}: the server does not offer this file; "
            f"check --base-url / VHMINE_COCO_URL (a mirror needs the zips/ and annotations/ layout "
            f"of {COCO_BASE_URL})"
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        _raise_if_unreachable(url, err, placed)
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
                log.info("%s: the server ignored the resume request; downloading from the start", display_url(url))
        if start:
            log.info("%s: resuming at byte %d", display_url(url), start)
        _check_space(part, (total or 0) - start, total or 0)
        hasher.catch_up(start)
        got = 0
        with (
            open(part, "r+b" if start else "wb") as out,
            tqdm(
                total=total,
                initial=start,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=part.name,
                disable=not progress,
                leave=False,
            ) as bar,
        ):
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
        raise InputError(f"bad download URL {display_url(url)!r}: --base-url must look like http://host[:port]")
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
        f"cannot reach {display_url(url)} ({why}). Check the network, pass --base-url (or set VHMINE_COCO_URL) "
        f"for a mirror, or download the file elsewhere and place it at {placed}"
    )


def _check_space(part: Path, remaining: int, total: int) -> None:
    # The zip and its unpacked copy (JPEGs barely compress) sit side by side until the zip goes.
    need = remaining + total
    free = shutil.disk_usage(part.parent).free
    if remaining > 0 and free < need:
        raise DownloadError(
            f"not enough disk space under {part.parent.parent}: {part.name} needs about "
            f"{human_bytes(need)} (download and unpacked copy), {human_bytes(free)} free; free some space "
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


def _why(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    if isinstance(reason, BaseException):
        err = reason
    if isinstance(err, (TimeoutError, socket.timeout)):
        return f"no data for {SOCKET_TIMEOUT_S:g} s"
    return str(err) or type(err).__name__


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
