"""WebDataset tar shards, as an embed source and as the place later stages read an image from: what img2dataset writes,
from a local path or any fsspec URL.

A shard `NNNNN.tar` holds, per sample, `{key}.jpg` (or .jpeg/.png/.webp) beside `{key}.json` (img2dataset's
record: url, caption, ...) and optionally `{key}.txt` (the caption). Listing reads the tars' member
headers only; a record is one image member with where its bytes lie in the tar (and its json and txt),
so a reader fetches exactly those bytes (a range request on object stores). A record's size and time
are its member's size and its tar's time: a tar written again has its members hashed anew. Its path in the index is
`<tar>/<member>`; images.parquet keeps `key`, `tar`, `url` and `caption`. A tar cut short keeps the
members before the cut; the member that was cut is skipped with its reason, as for folders.
Later stages read one member's bytes with `read_member` (through images.read_image_bytes), which lists
a tar's members once per process while the tar is unchanged. Reads the tars; writes nothing.
"""

from __future__ import annotations

import json
import logging
import tarfile
import threading
from collections import OrderedDict
from pathlib import Path

from vhmine.errors import BadImage, InputError
from vhmine.files import display_url

log = logging.getLogger(__name__)

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp")


def is_tar_input(folder: Path) -> bool:
    """A local folder of WebDataset shards: .tar files and no image files at its top level."""
    names = [p.name.lower() for p in Path(folder).iterdir() if p.is_file()]
    return any(n.endswith(".tar") for n in names) and not any(n.endswith(IMAGE_EXTS) for n in names)


def _split_member(name: str) -> tuple[str, str]:
    """WebDataset's rule: the key is the member's path up to the first dot of its file name."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (dot + ext).lower()


class TarSource:
    """WebDataset tars: a .tar, or a folder (local or fsspec URL) whose .tar files are read, sorted."""

    kind = "webdataset"
    extra_columns: tuple[str, ...] = ("key", "tar", "url", "caption")

    def __init__(self, url: str):
        url = str(url).rstrip("/")
        if "://" not in url:
            url = str(Path(url).expanduser().resolve())
        self.url = url
        self._fs = None
        self._files: dict[str, object] = {}  # open tar files of this process, by tar name

    def __getstate__(self) -> dict:  # open files and the filesystem stay in the process that opened them
        return {"url": self.url, "_fs": None, "_files": {}, **({"_base": self._base} if hasattr(self, "_base") else {})}

    @property
    def location(self) -> str:
        return self.url

    def _filesystem(self):
        if self._fs is None:
            import fsspec

            try:
                self._fs, self._path = fsspec.core.url_to_fs(self.url)
            except (ImportError, ValueError) as err:
                raise InputError(
                    f"{display_url(self.url)}: cannot open this URL ({err}); install the fsspec package for "
                    "its protocol (e.g. s3fs, gcsfs) or give a local path"
                ) from None
        return self._fs

    def _tars(self) -> tuple[str, list[str]]:
        """(folder the tar names are relative to, the tar names)."""
        fs = self._filesystem()
        try:
            if self._path.endswith(".tar"):
                if not fs.isfile(self._path):
                    raise FileNotFoundError(self._path)
                base, _, name = self._path.rpartition("/")
                return base, [name]
            names = sorted(p[len(self._path) :].lstrip("/") for p in fs.find(self._path) if p.endswith(".tar"))
        except FileNotFoundError:
            raise InputError(
                f"{display_url(self.url)}: not found; give a WebDataset .tar file or the folder that holds them"
            ) from None
        if not names:
            raise InputError(
                f"{display_url(self.url)}: no .tar files found; give a WebDataset .tar file or the folder that holds"
                " them"
            )
        return self._path, names

    def check(self) -> None:
        self._tars()

    def list(self) -> dict[str, dict]:
        base, names = self._tars()
        self._base = base
        out: dict[str, dict] = {}
        for tar in names:
            out.update(self._list_tar(tar))
        return out

    def _list_tar(self, tar: str) -> dict[str, dict]:
        """One record per image member of one tar, with the offsets of its json and txt beside it."""
        images, sides = {}, {}
        tar_mtime = self._mtime_ns(f"{self._base}/{tar}")
        try:
            with self._filesystem().open(f"{self._base}/{tar}", "rb") as f, tarfile.open(fileobj=f, mode="r:") as tf:
                for m in tf:
                    if not m.isfile():
                        continue
                    key, ext = _split_member(m.name)
                    where = {"offset": m.offset_data, "size": m.size, "mtime_ns": tar_mtime, "member": m.name}
                    if ext in IMAGE_EXTS:
                        images.setdefault(key, where)
                    elif ext in (".json", ".txt"):
                        sides[(key, ext)] = [m.offset_data, m.size]
        except (tarfile.TarError, EOFError, OSError) as err:
            # a tar cut short: keep what came before the cut (the cut member fails its read, with a reason)
            log.warning(
                "%s/%s: %s; embedding the %d images listed before it", display_url(self.url), tar, err, len(images)
            )
        return {
            f"{tar}/{w['member']}": {
                "path": f"{tar}/{w['member']}",
                "tar": tar,
                "key": key,
                "offset": w["offset"],
                "size": w["size"],
                "mtime_ns": w["mtime_ns"],
                "json": sides.get((key, ".json")),
                "txt": sides.get((key, ".txt")),
            }
            for key, w in sorted(images.items())
        }

    def _mtime_ns(self, path: str) -> int:
        """The tar's modification time: a tar written again (downloaded again) has its members hashed anew,
        and only those whose bytes changed are embedded again. 0 where the filesystem does not say."""
        fs = self._filesystem()
        try:
            return int(fs.modified(path).timestamp() * 1e9)
        except (NotImplementedError, OSError, AttributeError, ValueError):
            info = fs.info(path)
            mtime = info.get("mtime") or info.get("LastModified") or 0
            return int(mtime.timestamp() * 1e9) if hasattr(mtime, "timestamp") else int(float(mtime) * 1e9)

    def _read_range(self, tar: str, offset: int, size: int) -> bytes:
        f = self._files.get(tar)
        if f is None:
            if len(self._files) > 4:  # a reader moves through the tars in order: keep only a few open
                for old in list(self._files.values()):
                    old.close()
                self._files.clear()
            base = getattr(self, "_base", None) or self._tars()[0]
            self._base = base
            f = self._files[tar] = self._filesystem().open(f"{base}/{tar}", "rb")
        f.seek(offset)
        return f.read(size)

    def stat(self, rec: dict) -> tuple[int, int]:
        return rec["size"], rec["mtime_ns"]

    def read(self, rec: dict) -> bytes:
        data = self._read_range(rec["tar"], rec["offset"], rec["size"])
        if len(data) < rec["size"]:
            raise BadImage(f"truncated tar member ({len(data)} of {rec['size']} bytes in {rec['tar']})")
        return data

    def extras(self, rec: dict) -> dict:
        """key, tar, and the url and caption of img2dataset's json (the caption from the .txt if the json has none)."""
        out = {"key": rec["key"], "tar": rec["tar"], "url": None, "caption": None}
        meta = {}
        if rec.get("json"):
            try:
                meta = json.loads(self._read_range(rec["tar"], *rec["json"]).decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                meta = {}  # a broken side file loses its fields, not the image
            meta = meta if isinstance(meta, dict) else {}
        out["url"] = meta.get("url")
        out["caption"] = meta.get("caption")
        if out["caption"] is None and rec.get("txt"):
            out["caption"] = self._read_range(rec["tar"], *rec["txt"]).decode("utf-8", "replace").strip()
        return out


# A few tars with their member tables, for the stages after embed that read one image at a time:
# (tar URL, mtime, size) -> (source, records by member name). A tar written again is listed again.
_MEMBER_TABLES: OrderedDict = OrderedDict()
_MEMBER_LOCK = threading.Lock()  # a source's open file is shared: one seek-and-read at a time


def read_member(tar: str, member: str) -> bytes:
    """The bytes of image member `member` of the tar at `tar` (a local path or an fsspec URL): its
    headers are listed once (as `vhmine embed` lists them), then exactly the member's bytes are read.
    FileNotFoundError when the tar has no such image member; OSError when it is cut short."""
    import errno

    with _MEMBER_LOCK:
        source = TarSource(tar)
        fs = source._filesystem()
        key = (source.url, source._mtime_ns(source._path), fs.size(source._path))
        if key not in _MEMBER_TABLES:
            listed = source.list()
            _MEMBER_TABLES[key] = (source, {rec["path"].split("/", 1)[1]: rec for rec in listed.values()})
            while len(_MEMBER_TABLES) > 8:
                old, _ = _MEMBER_TABLES.popitem(last=False)[1]
                for f in old._files.values():
                    f.close()
        _MEMBER_TABLES.move_to_end(key)
        source, members = _MEMBER_TABLES[key]
        rec = members.get(member)
        if rec is None:
            raise FileNotFoundError(errno.ENOENT, f"no image member {member!r} in this tar", tar)
        try:
            return source.read(rec)
        except BadImage as err:
            raise OSError(errno.EIO, err.reason, tar) from None
