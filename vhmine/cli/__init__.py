"""The `vhmine` command line: one verb per pipeline stage, each a thin wrapper over one library call.

Commands parse their options, call the library (the same calls as vhmine.api) and turn a VhmineError into
a message and exit status 2. Nothing heavy is imported here, so `vhmine --help` is instant. options holds
the Typer app and the shared options; the commands are in collection (embed, mine, demo, data), curation
(seed, workers, curate), models (probe, describe, generate, manipulate, blind, draft), benchmarks
(export, eval) and status. Importing this package registers them all on `app`; `main` is the console entry point.

`main` also has the process leave its objects out of the cyclic garbage collector's passes at exit
(exit_without_collecting): a command that imported torch (mine's join) otherwise spends 0.5-0.7 CPU-s after
its work is done, in the collections Python's shutdown runs over torch's some 200,000 objects.
"""

from __future__ import annotations

# importing the command modules registers their commands on `app`, in the order `vhmine --help` lists them
# isort: off
from vhmine.cli import collection, curation, models, benchmarks, status  # noqa: F401

# isort: on
from vhmine.cli.options import app

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    small_pages()
    exit_without_collecting()
    app(args=argv, prog_name="vhmine")


def exit_without_collecting() -> None:
    """At this process's exit (atexit: after the handlers registered later, such as Ray's shutdown, have run),
    move every object into the collector's permanent generation (gc.freeze), so that the collections of the
    interpreter's shutdown walk only what is made after. Nothing is lost: the files were closed by the command
    that wrote them, reference counting still frees what it frees, and the system takes the rest back with
    the process. Registered once a process, however often main runs in it (tests)."""
    import atexit
    import gc

    if not _AT_EXIT:
        atexit.register(gc.freeze)
        _AT_EXIT.append(gc.freeze)


_AT_EXIT: list = []  # the hook exit_without_collecting registered, once


# what small_pages sets where the user has not: numpy's and pyarrow's own switches
SMALL_PAGES = {"NUMPY_MADVISE_HUGEPAGE": "0", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def small_pages() -> None:
    """Have numpy and pyarrow take fresh memory in the kernel's 4 KiB pages, not transparent huge pages:
    numpy advises the kernel to back each large array with 2 MiB pages, and pyarrow's default pool
    (mimalloc) its whole arena; where the kernel zeroes (and first compacts memory for) a 2 MiB page at the
    fault, as defrag=madvise has it, a command paid far more system time for them than for the pages it
    used, and that cost swung with how fragmented the machine's memory was. `vhmine mine` at N = 50,000:
    2.2-3.7 system CPU-s with numpy's advice, 0.8-1.7 without, and 0.9 once pyarrow's pool is the system
    allocator, for the same user time (docs/benchmarks.md). Read when each library loads, so set first; a
    value the user set is kept (NUMPY_MADVISE_HUGEPAGE=1, ARROW_DEFAULT_MEMORY_POOL=mimalloc bring theirs
    back). Ray workers started by this process inherit it."""
    import os

    for key, value in SMALL_PAGES.items():
        os.environ.setdefault(key, value)
