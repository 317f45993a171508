"""The `vhmine` command line: one verb per pipeline stage, each a thin wrapper over one library call.

Commands parse their options, call the library (the same calls as vhmine.api) and turn a VhmineError into
a message and exit status 2. Nothing heavy is imported here, so `vhmine --help` is instant. options holds
the Typer app and the shared options; the commands are in collection (embed, mine, demo, data), curation
(seed, workers, curate), models (probe, describe, generate, manipulate, blind, draft), benchmarks
(export, eval) and status. Importing this package registers them all on `app`; `main` is the console entry point.
"""

from __future__ import annotations

# importing the command modules registers their commands on `app`, in the order `vhmine --help` lists them
# (the pipeline's, not the alphabet's: isort off)
# isort: off
from vhmine.cli import collection, curation, models, benchmarks, status  # noqa: F401

# isort: on
from vhmine.cli.options import app

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    app(args=argv, prog_name="vhmine")
