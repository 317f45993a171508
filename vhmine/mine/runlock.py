"""One `vhmine mine` at a time per run folder: a second mine into the same --out would delete the first's
temporary folder under it (and the first would then fail, saying to free some space). Both engines' runs
hold this lock from before their search until the run folder is swapped in (mine.run). A mine checks first
that --out's folder can be written (files.check_writable: one line, before the search) and, holding the
lock, that the folder is empty or an earlier run (files.check_owned), since it replaces it whole.

Writes, beside the run folder, runs/.<run>.lock (the holder's process id) while a mine holds it, and
removes it after; reads it when it is held, to say who holds it. Like embed's job lock (vhmine.embed.job),
an flock: the system releases it when the process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from vhmine.errors import InputError
from vhmine.files import check_owned, check_writable, flock_nowait, note_holder, shown_path


def lock_path(run_dir: Path) -> Path:
    return Path(run_dir).parent / f".{Path(run_dir).name}.lock"


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold the run folder's lock (InputError, one line, when another mine holds it)."""
    import fcntl

    path = lock_path(run_dir)
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]  # removed again when left empty
    check_writable(Path(run_dir).parent, flag="--out")  # its files go beside it first: said in one line
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        f, who = flock_nowait(path)
        if f is None:
            raise InputError(
                f"another `vhmine mine`{who} is writing {shown_path(run_dir)}; nothing was written: wait for it to "
                "finish, or choose another --out"
            )
        try:  # the lock of a file its last holder removed meanwhile locks nothing: open the new one
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()
    else:  # (a hundred holders in a row, each gone as this one looked)
        raise InputError(f"{shown_path(run_dir)}: its lock keeps changing; run the command again")
    try:
        note_holder(f)
        check_owned(run_dir, "vhmine mine")  # a run replaces its folder as a whole: only an earlier run
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # before the unlock: a mine waiting on this file then sees it gone and opens anew
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()
        for p in made:  # folders this lock made and no run went into
            with contextlib.suppress(OSError):
                p.rmdir()
