"""vhmine.data.coco: COCO download, resume, verification and unpacking against a local HTTP server.

The server (http.server on 127.0.0.1, in a thread) serves small zips built here in the real
COCO layout, honours Range requests unless told not to, and records every request.
"""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image

import vhmine.data.coco as data
import vhmine.data.download as download
from vhmine.data.coco import CocoDownload, download_coco
from vhmine.errors import DownloadError, InputError

IMAGE_NAMES = ["000000000139.jpg", "000000000285.jpg", "000000000632.jpg"]


def jpeg(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (seed * 40 % 256, 100, 200)).save(buf, "JPEG")
    return buf.getvalue()


def make_zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # stored: a byte flip hits the CRC check
        for name, payload in entries.items():
            zf.writestr(name, payload)
    return buf.getvalue()


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


IMAGES = {f"val2017/{n}": jpeg(i) for i, n in enumerate(IMAGE_NAMES)}
VAL_ZIP = make_zip({"val2017/": b"", **IMAGES})
INSTANCES = json.dumps({"images": [{"id": 139, "file_name": IMAGE_NAMES[0]}], "annotations": [], "categories": []})
ANN_ZIP = make_zip(
    {
        "annotations/instances_val2017.json": INSTANCES.encode(),
        "annotations/instances_train2017.json": b"{}",
        "annotations/captions_val2017.json": b"{}",
    }
)
TEST_ZIP = make_zip({"test2017/000000000001.jpg": jpeg(7)})
TEST_INFO_ZIP = make_zip({"annotations/image_info_test2017.json": b'{"images": []}'})
FILES = {
    "/zips/val2017.zip": VAL_ZIP,
    "/annotations/annotations_trainval2017.zip": ANN_ZIP,
    "/zips/test2017.zip": TEST_ZIP,
    "/annotations/image_info_test2017.zip": TEST_INFO_ZIP,
}
SUMS = {
    "val2017.zip": md5(VAL_ZIP),
    "annotations_trainval2017.zip": md5(ANN_ZIP),
    "test2017.zip": md5(TEST_ZIP),
    "image_info_test2017.zip": md5(TEST_INFO_ZIP),
}


class Server:
    """A tiny COCO mirror. `cut` = {path: n}: the next full answer for path stops after n bytes;
    `fail` = {path: [status, ...]}: answer these statuses first; `ignore_range`: always send 200."""

    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.requests: list[tuple[str, str | None]] = []
        self.cut: dict[str, int] = {}
        self.fail: dict[str, list[int]] = {}
        self.ignore_range = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                rng = self.headers.get("Range")
                server.requests.append((self.path, rng))
                if server.fail.get(self.path):
                    self.send_error(server.fail[self.path].pop(0))
                    return
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                if rng and not server.ignore_range:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                payload = body[start:]
                if self.path in server.cut:
                    payload = payload[: server.cut.pop(self.path)]  # then the connection closes
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    for var in ("VHMINE_COCO_URL", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(download, "RETRY_DELAYS_S", (0.01, 0.01, 0.01))


@pytest.fixture
def server():
    s = Server(FILES)
    yield s
    s.close()


def fetch(server, dest, split="val2017", **kw) -> CocoDownload:
    kw.setdefault("checksums", SUMS)
    return download_coco(split, dest, base_url=server.url, progress=False, **kw)


def leftovers(dest: Path) -> list[str]:
    partial = dest / ".partial"
    return sorted(p.name for p in partial.iterdir()) if partial.exists() else []


def test_full_download_unpack_and_verify(server, tmp_path):
    dest = tmp_path / "coco"
    result = fetch(server, dest)
    assert result.images_dir == dest / "val2017"
    assert result.annotations == dest / "annotations" / "instances_val2017.json"
    assert result.downloaded_bytes == len(VAL_ZIP) + len(ANN_ZIP)
    assert result.image_count == 3
    for name, payload in IMAGES.items():
        assert (dest / name).read_bytes() == payload
    assert json.loads(result.annotations.read_text())["images"][0]["id"] == 139
    assert (dest / "val2017" / ".vhmine-val2017.zip.done").read_text().strip() == SUMS["val2017.zip"]
    assert server.requests == [("/zips/val2017.zip", None), ("/annotations/annotations_trainval2017.zip", None)]
    assert leftovers(dest) == []  # zips deleted once unpacked, no temporary folders
    text = result.summary()
    assert "3 images" in text and str(dest / "val2017") in text and "--coco-annotations" in text


def test_second_run_downloads_nothing(server, tmp_path):
    fetch(server, tmp_path)
    n = len(server.requests)
    again = fetch(server, tmp_path)
    assert len(server.requests) == n
    assert again.downloaded_bytes == 0 and again.image_count == 3
    assert "nothing downloaded" in again.summary()


def test_resume_from_partial_file(server, tmp_path):
    half = len(VAL_ZIP) // 2
    (tmp_path / ".partial").mkdir()
    (tmp_path / ".partial" / "val2017.zip").write_bytes(VAL_ZIP[:half])
    result = fetch(server, tmp_path, annotations=False)
    assert server.requests == [("/zips/val2017.zip", f"bytes={half}-")]
    assert result.downloaded_bytes == len(VAL_ZIP) - half
    assert result.annotations is None
    assert (tmp_path / "val2017" / IMAGE_NAMES[1]).read_bytes() == IMAGES[f"val2017/{IMAGE_NAMES[1]}"]


def test_partial_file_already_whole_or_too_long(server, tmp_path):
    (tmp_path / ".partial").mkdir()
    (tmp_path / ".partial" / "val2017.zip").write_bytes(VAL_ZIP)  # killed after the download
    result = fetch(server, tmp_path, annotations=False)
    assert server.requests == [("/zips/val2017.zip", f"bytes={len(VAL_ZIP)}-")]  # answered 416
    assert result.downloaded_bytes == 0 and result.image_count == 3

    other = tmp_path / "other"
    (other / ".partial").mkdir(parents=True)
    (other / ".partial" / "val2017.zip").write_bytes(VAL_ZIP + b"junk")
    assert fetch(server, other, annotations=False).downloaded_bytes == len(VAL_ZIP)
    assert server.requests[-1] == ("/zips/val2017.zip", None)


def test_server_ignoring_range_gets_a_full_download(server, tmp_path):
    server.ignore_range = True
    (tmp_path / ".partial").mkdir()
    (tmp_path / ".partial" / "val2017.zip").write_bytes(b"x" * 100)  # would corrupt an append
    result = fetch(server, tmp_path, annotations=False)
    assert server.requests == [("/zips/val2017.zip", "bytes=100-")]
    assert result.downloaded_bytes == len(VAL_ZIP)
    assert result.image_count == 3


def test_dropped_connection_resumes_in_the_same_run(server, tmp_path):
    server.cut["/zips/val2017.zip"] = 1000
    result = fetch(server, tmp_path, annotations=False)
    assert server.requests == [("/zips/val2017.zip", None), ("/zips/val2017.zip", "bytes=1000-")]
    assert result.downloaded_bytes == len(VAL_ZIP)
    assert result.image_count == 3


def test_server_errors_are_retried_then_reported(server, tmp_path):
    server.fail["/zips/val2017.zip"] = [503, 502]
    assert fetch(server, tmp_path, annotations=False).image_count == 3
    assert server.paths().count("/zips/val2017.zip") == 3

    server.fail["/zips/test2017.zip"] = [503] * 10
    with pytest.raises(DownloadError, match=r"failed after 4 attempts \(HTTP 503.*--base-url"):
        fetch(server, tmp_path / "t", split="test2017", annotations=False)


def test_checksum_mismatch_leaves_nothing(server, tmp_path):
    with pytest.raises(DownloadError) as info:
        fetch(server, tmp_path, checksums={**SUMS, "val2017.zip": "0" * 32})
    msg = str(info.value)
    assert f"{server.url}/zips/val2017.zip gave a file with md5 {SUMS['val2017.zip']}, expected {'0' * 32}" in msg
    assert str(tmp_path / "val2017.zip") in msg  # where to put a hand-downloaded copy
    assert not (tmp_path / "val2017").exists()
    assert leftovers(tmp_path) == []


def test_corrupt_zip_is_never_half_unpacked(server, tmp_path):
    broken = bytearray(VAL_ZIP)
    at = VAL_ZIP.index(IMAGES[f"val2017/{IMAGE_NAMES[2]}"]) + 50  # inside the last image
    broken[at] ^= 0xFF
    server.files["/zips/val2017.zip"] = bytes(broken)
    with pytest.raises(DownloadError, match="cannot unpack"):
        fetch(server, tmp_path, annotations=False, checksums={"val2017.zip": md5(bytes(broken))})
    assert not (tmp_path / "val2017").exists()
    assert leftovers(tmp_path) == ["val2017.zip"]  # verified bytes are kept; the temp folder is gone


def test_stale_extraction_folder_is_cleaned(server, tmp_path):
    stale = tmp_path / ".partial" / "extract-val2017.zip-abc123" / "val2017"
    stale.mkdir(parents=True)
    (stale / "half.jpg").write_bytes(b"x")
    fetch(server, tmp_path, annotations=False)
    assert leftovers(tmp_path) == []
    assert not (tmp_path / "val2017" / "half.jpg").exists()


def test_closed_port_fails_fast(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(DownloadError) as info:
        download_coco("val2017", tmp_path, base_url=f"http://127.0.0.1:{port}", progress=False)
    assert time.monotonic() - t0 < 3
    msg = str(info.value)
    assert msg.startswith(f"cannot reach http://127.0.0.1:{port}/zips/val2017.zip (")
    assert "--base-url" in msg and str(tmp_path / "val2017.zip") in msg


def test_unknown_host_fails_fast(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "RESOLVE_TIMEOUT_S", 2.0)
    t0 = time.monotonic()
    with pytest.raises(DownloadError, match=r"cannot reach http://vhmine-test\.invalid/zips/val2017\.zip"):
        download_coco("val2017", tmp_path, base_url="http://vhmine-test.invalid", progress=False)
    assert time.monotonic() - t0 < 4


def test_hung_resolver_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(download, "RESOLVE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(download.socket, "getaddrinfo", lambda *a, **k: time.sleep(5))
    t0 = time.monotonic()
    with pytest.raises(DownloadError, match=r"no answer resolving images\.cocodataset\.org within 0\.2 s"):
        download_coco("val2017", tmp_path, progress=False)
    assert time.monotonic() - t0 < 2


def test_missing_file_on_mirror(server, tmp_path):
    del server.files["/zips/val2017.zip"]
    with pytest.raises(DownloadError, match=r"answered HTTP 404 .*check --base-url"):
        fetch(server, tmp_path)
    assert server.paths() == ["/zips/val2017.zip"]  # a 404 is not retried


def test_unknown_split(tmp_path):
    with pytest.raises(
        InputError, match="unknown COCO split 'val2018': use --split with one of train2017, val2017, test2017"
    ):
        download_coco("val2018", tmp_path)


def test_base_url_from_environment(server, tmp_path, monkeypatch):
    monkeypatch.setenv("VHMINE_COCO_URL", server.url + "/")
    result = download_coco("val2017", tmp_path, checksums=SUMS, progress=True)
    assert result.image_count == 3 and len(server.requests) == 2


def test_test_split_uses_image_info(server, tmp_path):
    result = fetch(server, tmp_path, split="test2017")
    assert result.annotations == tmp_path / "annotations" / "image_info_test2017.json"
    assert "--coco-annotations" not in result.summary()
    # Another split's annotations unpack into the same folder without disturbing these.
    fetch(server, tmp_path, split="val2017")
    assert (tmp_path / "annotations" / "image_info_test2017.json").exists()
    assert (tmp_path / "annotations" / "instances_val2017.json").exists()


def test_zip_placed_by_hand_is_used(server, tmp_path):
    (tmp_path / "val2017.zip").write_bytes(VAL_ZIP)
    result = fetch(server, tmp_path)
    assert server.paths() == ["/annotations/annotations_trainval2017.zip"]
    assert result.image_count == 3
    assert (tmp_path / "val2017.zip").exists()  # the user's file is left alone

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "val2017.zip").write_bytes(VAL_ZIP[:-10])
    with pytest.raises(DownloadError, match=r"bad/val2017\.zip has md5 .*incomplete or not the COCO val2017\.zip"):
        fetch(server, tmp_path / "bad")


def test_folder_unpacked_by_hand_is_completed_not_deleted(server, tmp_path):
    (tmp_path / "val2017").mkdir()
    (tmp_path / "val2017" / "mine.txt").write_text("keep me")
    (tmp_path / "val2017" / IMAGE_NAMES[0]).write_bytes(b"half")
    fetch(server, tmp_path, annotations=False)
    assert (tmp_path / "val2017" / "mine.txt").read_text() == "keep me"
    assert (tmp_path / "val2017" / IMAGE_NAMES[0]).read_bytes() == IMAGES[f"val2017/{IMAGE_NAMES[0]}"]
    assert (tmp_path / "val2017" / ".vhmine-val2017.zip.done").exists()


def test_known_checksums_cover_every_file():
    names = {p.rsplit("/", 1)[1] for s in data._SPLITS.values() for p in (s.images, s.annotations)}
    assert names == set(data.KNOWN_MD5)
    assert all(len(v) == 32 and int(v, 16) >= 0 for v in data.KNOWN_MD5.values())


def test_cli_reports_checksum_mismatch(server, tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    # The CLI checks against the published md5s, which these small zips cannot match.
    dest = tmp_path / "coco"
    args = ["data", "coco", "--split", "val2017", "--dest", str(dest), "--base-url", server.url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    want = (
        f"error: {server.url}/zips/val2017.zip gave a file with md5 {SUMS['val2017.zip']}, "
        "expected 442b8da7639aecaf257c1dceb8ba8c80"
    )
    assert want in result.output
    assert not (dest / "val2017").exists()
