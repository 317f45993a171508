"""`vhmine seed`, `workers ...`, `curate`: the curation store's commands (registered on vhmine.cli.app).

Thin wiring over vhmine.seed and vhmine.curate; reads and writes what those do, nothing itself.
"""

from __future__ import annotations

from pathlib import Path

import typer

from vhmine.cli.options import (
    DbOpt,
    PlainUsage,
    _fail,
    app,
)
from vhmine.errors import VhmineError

workers_app = typer.Typer(help="Workers who annotate in the curation app.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(workers_app, name="workers")


@app.command()
def seed(
    pairs: Path = typer.Option(..., "--pairs", help="runs/<run>/pairs.parquet written by `vhmine mine`."),
    per_mode: int = typer.Option(100, "--per-mode", min=1, help="Pairs queued for each of the 8 modes."),
    mode: list[str] | None = typer.Option(None, "--mode", help="Queue only this mode (repeatable) [default: all 8]."),
    db: str | None = DbOpt,
) -> None:
    """Load mined pairs into the store and queue initial-instance tasks per mode."""
    try:
        from vhmine import api

        result = api.seed(pairs, db=db, per_mode=per_mode, modes=mode or None)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@workers_app.command("add", cls=PlainUsage)
def workers_add(
    name: str = typer.Argument(..., metavar="NAME", help="Worker name (letters, digits, '.', '_', '-')."),
    admin: bool = typer.Option(False, "--admin", help="May see the agreement page."),
    db: str | None = DbOpt,
) -> None:
    """Add a worker and print their sign-in token (shown once; only its hash is stored)."""
    try:
        from vhmine.curate import add_worker
        from vhmine.store import open_store

        with open_store(db, create=True) as store:  # the first worker may come before the first seed
            token = add_worker(store, name, admin=admin)
            db_option = store.db_option
    except VhmineError as err:
        _fail(err)
    typer.echo(
        f"worker {name} added{' (admin)' if admin else ''}; sign-in token (shown only now, keep it secret):", err=True
    )
    typer.echo(token)
    typer.echo(f"next: vhmine curate{db_option}   (then sign in with the token above)", err=True)


@workers_app.command("list")
def workers_list(db: str | None = DbOpt) -> None:
    """List workers (names and roles; tokens are never shown)."""
    try:
        from vhmine.curate import list_workers
        from vhmine.store import open_store

        with open_store(db, create=False) as store:
            workers = list_workers(store)
    except VhmineError as err:
        _fail(err)
    for w in workers:
        typer.echo(f"{w.name}\t{'admin' if w.is_admin else 'worker'}\t{'active' if w.active else 'inactive'}")


def _on_store(db: str | None, action: str, *args):
    """`vhmine.curate.people.<action>(store, *args)` on the opened store; a VhmineError ends the command with its
    message."""
    try:
        from vhmine import curate
        from vhmine.store import open_store

        with open_store(db, create=False) as store:
            return getattr(curate.people, action)(store, *args)
    except VhmineError as err:
        _fail(err)


WorkerArg = typer.Argument(..., metavar="NAME", help="Worker name (as `vhmine workers list` shows it).")


@workers_app.command("rotate", cls=PlainUsage)
def workers_rotate(name: str = WorkerArg, db: str | None = DbOpt) -> None:
    """Give a worker a new token and print it (shown once); the old one, and every browser signed in with it, stop
    working now."""
    token = _on_store(db, "rotate_token", name)
    typer.echo(
        f"worker {name}: new sign-in token (shown only now, keep it secret); the old one no longer works:", err=True
    )
    typer.echo(token)


@workers_app.command("deactivate", cls=PlainUsage)
def workers_deactivate(name: str = WorkerArg, db: str | None = DbOpt) -> None:
    """Stop a worker: their token no longer signs in, and a browser signed in is signed out at its next action."""
    _on_store(db, "deactivate_worker", name)
    typer.echo(f"worker {name} deactivated; what they saved stays (`vhmine workers activate {name}` lets them back in)")


@workers_app.command("activate", cls=PlainUsage)
def workers_activate(name: str = WorkerArg, db: str | None = DbOpt) -> None:
    """Let a deactivated worker sign in again with their token."""
    _on_store(db, "activate_worker", name)
    typer.echo(f"worker {name} active")


@app.command()
def curate(
    db: str | None = DbOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on (0.0.0.0 to let other machines in)."),
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to serve on."),
    app_path: Path | None = typer.Option(
        None, "--app", help="The Streamlit script [default: the app inside the vhmine package]."
    ),
) -> None:
    """Start the curation app (Streamlit) on the store."""
    try:
        from vhmine.curate import run_app

        rc = run_app(db=db, host=host, port=port, app_path=app_path)
    except VhmineError as err:
        _fail(err)
    raise typer.Exit(rc)
