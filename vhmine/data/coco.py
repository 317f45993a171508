"""Download, verify and unpack COCO 2017 (`vhmine data coco`).

Reads the COCO zips over HTTP (standard library only) and writes, under `dest`:
`<split>/` (the images), `annotations/` (the JSON files), and `.partial/` (downloads in
progress and temporary extraction folders). A download resumes with an HTTP Range request
(vhmine.data.download: retries, timeouts, disk space); each zip is checked against its md5 before it is unpacked;
unpacking goes into a temporary
folder that is then renamed, so an interrupted run never leaves a half-filled `<split>/`.
A marker file inside each unpacked folder (`.vhmine-<zip>.done`, holding the zip's md5)
lets a later run skip the work.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from vhmine.config import COCO_BASE_URL
from vhmine.data.download import download, human_bytes
from vhmine.errors import DownloadError, InputError
from vhmine.files import display_url

log = logging.getLogger(__name__)


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
    "train2017": _Split(
        "zips/train2017.zip", "annotations/annotations_trainval2017.zip", "annotations/instances_train2017.json"
    ),
    "val2017": _Split(
        "zips/val2017.zip", "annotations/annotations_trainval2017.zip", "annotations/instances_val2017.json"
    ),
    "test2017": _Split(
        "zips/test2017.zip", "annotations/image_info_test2017.zip", "annotations/image_info_test2017.json"
    ),
}


@dataclass
class CocoDownload:
    images_dir: Path
    annotations: Path | None
    downloaded_bytes: int
    image_count: int = 0

    def summary(self) -> str:
        fetched = (
            f"downloaded {human_bytes(self.downloaded_bytes)}"
            if self.downloaded_bytes
            else "already complete, nothing downloaded"
        )
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
                f"replace it with the right file, or delete it to let vhmine download {display_url(url)}"
            )
        _unpack(placed, dest, folder, got)
        return 0

    part = dest / ".partial" / name
    fetched, got = download(url, part, placed, progress)
    if md5 and got != md5:
        part.unlink(missing_ok=True)  # resuming a wrong file would only stay wrong
        raise DownloadError(
            f"{display_url(url)} gave a file with md5 {got}, expected {md5} (deleted). If --base-url or "
            "VHMINE_COCO_URL points at a mirror, it serves a different file; otherwise run again, "
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
                        "delete it and run again, or check --base-url"
                    )
                for member in members:
                    zf.extract(member, tmp)  # zipfile drops '..' and leading '/' from names
            _publish(tmp / folder, dest / folder, _marker(dest, folder, zip_path.name).name, md5)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as err:
            raise DownloadError(f"cannot unpack {zip_path} ({err}): delete it and run again") from err
        except OSError as err:
            raise DownloadError(
                f"cannot unpack {zip_path} into {dest} ({err}); check free disk space and permissions, then run again"
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


def _file_md5(path: Path) -> str:
    from vhmine.images import file_digest

    return file_digest(path, "md5")
