"""`vhmine status`: where the working folder stands and what to run next (registered on vhmine.cli.app).

Thin wiring over vhmine.status.collect; reads what that reads (indexes, runs, exports, evals, the store's
counts), writes nothing. A damaged store file is the one thing it exits 2 on (after showing the rest).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from vhmine.cli.options import DbOpt, IndexesOpt, _fail, app
from vhmine.errors import VhmineError


@app.command()
def status(
    as_json: bool = typer.Option(False, "--json", help="Print everything as one JSON object (for scripts)."),
    folder: Path = typer.Option(
        Path("."), "--folder", help="The working folder whose runs, exports and evals to look for (3 levels down)."
    ),
    indexes: Path | None = IndexesOpt,
    db: str | None = DbOpt,
) -> None:
    """Show indexes, mining runs, the store's queues, exports and evals, then the next step (reads only; exits 2 on a
    damaged store)."""
    from vhmine.status import collect

    try:
        st = collect(folder, indexes=indexes, db=db)
    except VhmineError as err:
        _fail(err)
    typer.echo(json.dumps(st.record(), indent=1, default=str) if as_json else st.text())
    if (st.store or {}).get("corrupt"):  # shown above with the rest; the exit status says it too
        typer.echo(f"error: {st.store['problem']}", err=True)
        raise typer.Exit(2)
