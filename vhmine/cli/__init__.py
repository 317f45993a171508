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
