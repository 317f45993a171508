"""The file-system rules every stage shares: publish a file or a folder whole, never half.

`shown_path` writes a path as the next command line wants it (relative to the working folder);
`display_url` is the one form in which vhmine prints a URL (a store, an endpoint, a download, a tar shard):
its credentials masked, whatever message, log, record file or --json it goes into.
`atomic_write` and `replace_dir` publish a file or a folder by rename after flushing it to disk
(fsync); `check_owned` refuses to replace or write into a folder that vhmine did not write (it reads
the folder's listing and the producer's record file, e.g. run.json or manifest.json); `check_writable`
says in one line that a stage cannot write where it was told to, before it starts, and `write_failed` when
the system refuses a write on the way (a full disk: one line, no traceback). `read_entries` and
`write_entries` keep a measurement cache ({"entries": {entry_key(identity): ...}}: rates measured once per
machine, vhmine.config.cache_file), best effort: an unreadable one reads as empty, one that cannot be written is
skipped. Writes only the files its callers name, through temporary files beside them (and check_writable's
probe, removed at once).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path


def shown_path(path) -> str:
    """A path as a user types it on the next command line: relative to the working folder when it lies
    inside it, else absolute; shell-quoted when it holds spaces or the like."""
    import shlex

    p = Path(path)
    try:
        text = p.resolve().relative_to(Path.cwd().resolve()).as_posix() or "."
    except (ValueError, OSError):
        text = str(p.resolve()) if not str(path).startswith(("s3://", "gs://", "http://", "https://")) else str(path)
    return shlex.quote(text)


# query parameters whose names say they carry a credential (`password=`, `api_key=`, Azure's `code`, signed
# URLs' `sig`); llm.redact drops the same ones from the endpoint it records
SECRET_PARAM = re.compile(r"key|token|secret|sig|pass|pwd|auth|code|session|credential", re.I)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)(.*)", re.S)


def _url_secrets(url: str) -> tuple[str, list[str]]:
    """(the URL masked, the secrets it held as typed). The password runs from the first `:` of the user
    info to the LAST `@` (a password typed with `@`, `/`, `?` or `#` in it stays hidden whole; an `@` later in
    the query may hide more than needed, never less)."""
    m = _SCHEME.match(url)
    if not m:  # a path, not a URL: nothing in it is a credential
        return url, []
    scheme, rest = m.groups()
    secrets = []
    at = rest.rfind("@")
    if at >= 0 and ":" in rest[:at]:
        colon = rest.index(":")
        secrets.append(rest[colon + 1 : at])
        rest = rest[:colon] + ":***" + rest[at:]
    q = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)  # a fragment may carry one too
    if q >= 0:
        parts = []
        for part in re.split(r"([&;#])", rest[q + 1 :]):
            key, eq, value = part.partition("=")
            if eq and value and SECRET_PARAM.search(key):
                secrets.append(value)
                part = f"{key}=***"
            parts.append(part)
        rest = rest[: q + 1] + "".join(parts)
    return scheme + rest, [s for s in secrets if s and s != "***"]


def display_url(url) -> str:
    """`url` as vhmine prints it: the password and the values of credential query parameters (SECRET_PARAM)
    shown as `***`, the rest as typed. A path is returned as it is."""
    return _url_secrets(str(url))[0]


def without_secrets(text: str, url) -> str:
    """`text` (a library's message, which may echo the URL or its parts) with every secret of `url` masked,
    as typed and percent-decoded."""
    from urllib.parse import unquote

    for secret in _url_secrets(str(url))[1]:
        for form in {secret, unquote(secret)}:
            if len(form) >= 2:  # a 1-character "secret" would mask every such letter of the message
                text = text.replace(form, "***")
    return text


def fsync_path(path: Path) -> None:
    """Flush a file's (or a folder's entries') data to disk, so a crash after the rename loses nothing."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    """Every file of a folder, then every folder bottom-up, before the folder is published."""
    for dirpath, _dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            fsync_path(Path(dirpath, name))
        fsync_path(Path(dirpath))


def current_umask() -> int:
    """The process's umask, read without changing it where Linux tells it (/proc), else set and put back."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write) -> None:
    """Run `write(tmp_path)` and move the result into place, so readers never see half a file.

    The file is flushed to disk before the rename and the folder after it: once this returns, a
    crash or power loss leaves the new file, never an empty or half one under the final name. Its mode is
    what the umask gives a new file (0644 under umask 022), as for any file written in place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes it 0600: give it the mode any new file gets here
        fsync_path(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def replace_dir(tmp: Path, final: Path, *, producer: str, flag: str = "--out") -> None:
    """Swap a finished folder into place. An older folder of that name goes only once the new one is
    there, and only if `producer` wrote it (check_owned); if the swap fails, the older one is put back.
    The new folder's files are flushed to disk before the swap, its parent after it."""
    import shutil
    import uuid

    final = Path(final)
    check_owned(final, producer, flag=flag)
    _fsync_tree(Path(tmp))
    if not final.exists():
        os.rename(tmp, final)
        fsync_path(final.parent)
        return
    old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(final, old)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(old, final)
        raise
    fsync_path(final.parent)
    shutil.rmtree(old, ignore_errors=True)


# What marks a folder as written by a stage: the file that records its producer (and its files).
_MARKS = {
    "vhmine mine": ("run", "run.json"),
    "vhmine export": ("export", "manifest.json"),
    "vhmine embed": ("index", "manifest.json"),
    "vhmine eval": ("report", "report.json"),
}
_SQLITE_MAGIC = b"SQLite format 3\0"


def check_owned(folder: Path, producer: str, *, flag: str = "--out", whole: bool = True) -> None:
    """Refuse to replace (`whole`) or write into `folder` unless it is absent, empty, or `producer` wrote it.

    For a whole-folder swap every file in it must be one the producer's record lists, so a file a
    user added later is never deleted with it. The error says what the folder holds and what to do.
    """
    from vhmine.errors import InputError

    folder = Path(folder)
    noun, mark = _MARKS[producer]
    if folder.name in ("", ".", ".."):
        raise InputError(
            f"{flag} {folder}: name the {noun}'s own folder (e.g. {flag} {noun}s/my-{noun}), not . or .. or /"
        )
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InputError(f"{flag} {folder}: a file of that name exists; give a folder path for the {noun}")
    entries = sorted(p.name for p in folder.iterdir())
    if not entries:
        return
    record = _read_record(folder / mark)
    if producer == "vhmine embed" and any((folder / "work" / f).is_file() for f in ("job.json", "lock")):
        record = record or {"producer": producer}  # an embed job that has not finished yet
    if record.get("producer") == producer:
        if not whole:
            return
        listed = set(record.get("files") or {}) | {mark}
        extra = sorted(
            p.relative_to(folder).as_posix()
            for p in folder.rglob("*")
            if not p.is_dir() and p.relative_to(folder).as_posix() not in listed
        )
        if not extra:
            return
        raise InputError(
            f"{flag} {folder}: this {noun} from `{producer}` also holds files that {producer} did not write there "
            f"({_few(extra)}); replacing it would delete them. Move them out first, or choose another {flag}"
        )
    stores = [e for e in entries if _is_sqlite(folder / e)]
    others = [e for e in entries if e not in stores and not e.startswith(tuple(f"{st}-" for st in stores))]
    holds = _few(others)
    if stores:  # e.g. data/ with data/vhmine.db (and its -wal, -shm files)
        holds = f"the curation store ({', '.join(stores)})" + (f" and {holds}" if others else "")
    action = "replaces its folder with everything in it" if whole else "writes its files into that folder"
    article = "an" if noun[0] in "aeiou" else "a"
    raise InputError(
        f"{flag} {folder}: the folder exists and is not {article} {noun} that `{producer}` wrote (no {mark} from it);"
        f" it holds {holds}. `{producer}` {action}, so give a new or empty folder (choose another {flag}), or remove"
        " that folder yourself if you really mean to replace it"
    )


def flock_nowait(path: Path):
    """An flock on `path` taken without waiting (the system releases it when its holder ends, however it ends):
    (the open file, now holding it, ""), or (None, " (process N)" naming the holder as it wrote itself in the
    file, or "") when another process holds it. The holder writes itself with `note_holder`."""
    import fcntl

    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip()
        f.close()
        return None, f" (process {holder})" if holder.isdigit() else ""
    return f, ""


def note_holder(f) -> None:
    """Write this process's id into a lock file it holds (flock_nowait), for the message a second one gets."""
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()


def check_writable(folder: Path, *, flag: str) -> None:
    """InputError, naming the folder and the reason, when this user cannot write `folder` (no permission, a
    read-only file system, a file in the way). Creates nothing: the probe file goes into `folder`'s nearest
    existing ancestor (where the job's own mkdir will write) and is removed at once, so a job that stops
    later for another reason leaves no empty folder behind."""
    from vhmine.errors import InputError

    folder = Path(folder)
    there = folder
    while not there.exists() and there != there.parent:
        there = there.parent
    try:
        if not there.is_dir():
            raise FileExistsError(f"{there} is a file")
        fd, probe = tempfile.mkstemp(prefix=".vhmine-write-probe-", dir=there)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        why = "a file of that name is in the way" if isinstance(err, FileExistsError) else err.strerror or str(err)
        raise InputError(
            f"{flag}: cannot write in {folder} ({why}): choose a folder you can write, or fix its permissions"
        ) from None


def _read_record(path: Path) -> dict:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _few(names: list[str], n: int = 5) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def write_failed(where: Path, err: OSError, kept: str, then: str, error=None):
    """The one line (an OutputError, or the stage's own `error` class) a stage says when the system refuses a
    write into `where` (a full disk or quota, a read-only or lost mount): the system's reason in words, without
    an errno, a library's wording or a traceback, the file when it lies elsewhere (a read that failed
    meanwhile), what was kept, what to do."""
    from vhmine.errors import OutputError

    error = error or OutputError
    reason = os.strerror(err.errno) if err.errno else (err.strerror or str(err) or type(err).__name__)
    if err.filename:
        try:
            Path(os.fspath(err.filename)).resolve().relative_to(Path(where).resolve().parent)
        except (ValueError, TypeError, OSError):
            reason += f": {shown_path(err.filename)}"
    return error(f"writing {shown_path(where)} failed ({reason}): {kept}; {then}")


def entry_key(identity: dict) -> str:
    """A measurement cache's key for what its rates depend on (the machine, the shapes)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def read_entries(path: Path) -> dict:
    """A measurement cache's contents, {"entries": {...}} at least (a missing or unreadable file: none)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("entries"), dict) else {"entries": {}}
    except (OSError, ValueError):
        return {"entries": {}}


def write_entries(path: Path, data: dict) -> None:
    """A measurement cache, by rename (workers of one node may measure at once); skipped if it cannot be written."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
