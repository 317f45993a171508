"""The `vhmine` Typer app and the options its commands share (imported by every vhmine.cli module).

Holds the app, its `-v` callback, the shared options (store, indexes, model access), `_fail` (a
VhmineError becomes a message and exit status 2) and `_finish` (a partial run exits 3). Nothing heavy
is imported here, so `vhmine --help` is instant. Reads and writes nothing.
"""

from __future__ import annotations

import functools
import logging
import sys

import typer
import typer.core


class PlainUsage(typer.core.TyperCommand):
    """A command whose usage line reads as people write one, `vhmine embed [OPTIONS] IMAGES` (Typer writes a
    required argument as `{images}`); commands that take an argument use it (`@app.command(cls=PlainUsage)`)."""

    def collect_usage_pieces(self, ctx):
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]


app = typer.Typer(
    name="vhmine",
    help="Mine visual-hallucination test cases for multi-modal LLMs and turn them into benchmarks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are plain: rich markup would eat "[default: ...]" and "[env ...]"
)
data_app = typer.Typer(
    help="Download and verify public image collections.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(data_app, name="data")

IndexesOpt = typer.Option(
    None, "--indexes", help="Folder that holds the indexes [env VHMINE_INDEXES; default ./indexes]."
)


def _fail(err: Exception) -> None:
    typer.echo(f"error: {err}", err=True)
    raise typer.Exit(2)


INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


def interruptible(default: str):
    """A command decorator: Ctrl-C prints one line saying what was kept (the stage's vhmine.errors.Interrupted
    message, else `default`) and exits 130, instead of a traceback or click's bare "Aborted!"."""

    def wrap(command):
        @functools.wraps(command)  # Typer reads the options from the wrapped signature
        def run(*args, **kwargs):
            try:
                return command(*args, **kwargs)
            except KeyboardInterrupt as err:
                typer.echo(getattr(err, "message", None) or default, err=True)
                raise typer.Exit(INTERRUPTED_EXIT) from None

        return run

    return wrap


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug details.")) -> None:
    # Other libraries stay at WARNING; vhmine's own progress notes show at INFO.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("vhmine").setLevel(logging.DEBUG if verbose else logging.INFO)


DbOpt = typer.Option(None, "--db", help="Store: SQLAlchemy URL or SQLite file [env VHMINE_DB; default data/vhmine.db].")
PARTIAL_EXIT = 3  # the run finished but some items failed (listed in the summary): rerun to retry them
BaseUrlOpt = typer.Option(
    None,
    "--base-url",
    help=(
        "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 [env OPENAI_BASE_URL; default OpenAI]. The key comes"
        " from OPENAI_API_KEY only."
    ),
)
ConcurrencyOpt = typer.Option(4, "--concurrency", min=1, help="Requests in flight at once.")
TimeoutOpt = typer.Option(
    60.0,
    "--timeout",
    min=0.1,
    help=(
        "Seconds one try of a request may take, whole (slow headers, a trickled body), before it is abandoned and"
        " retried; a request ends within (--max-retries + 1) x --timeout plus its back-off (docs/models.md)."
    ),
)
RetriesOpt = typer.Option(
    4, "--max-retries", min=0, help="Retries per request on 429, 5xx, time-outs and unreadable answers."
)
RetryWaitOpt = typer.Option(
    1.0, "--retry-wait", min=0.0, help="First back-off in seconds; doubled each retry (max 30 s), with jitter."
)
MaxCostOpt = typer.Option(
    None,
    "--max-cost",
    min=0.0,
    help="Stop cleanly before spending more than this many USD (from token usage and the price table).",
)
PricesOpt = typer.Option(
    None,
    "--prices",
    help=(
        'JSON file overriding the price table: {"model": {"input": USD/1M tokens, "output": ..., "image": USD/image}}.'
    ),
)
CacheOpt = typer.Option(
    None,
    "--cache",
    help=(
        "Request cache (SQLite): answers kept so reruns cost nothing [env VHMINE_LLM_CACHE; default data/llm-cache.db]."
    ),
)
MaxTokensOpt = typer.Option(512, "--max-tokens", min=1, help="Most tokens a model may write per answer.")
ModesOpt = typer.Option(None, "--mode", help="Only this mode (repeatable) [default: all 8].")


def _llm_options(
    model: str, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens=512
):
    from vhmine.llm import LLMOptions

    return LLMOptions(
        model=model,
        base_url=base_url,
        concurrency=concurrency,
        timeout_s=timeout,
        max_retries=max_retries,
        retry_wait_s=retry_wait,
        max_cost=max_cost,
        prices=prices,
        cache=cache,
        max_tokens=max_tokens,
    )


def _finish(result, after: str = "") -> None:
    """The run's summary (and `after`, more lines for the console), then exit 3 where the run was partial."""
    typer.echo(result.summary() + (f"\n{after}" if after else ""))
    if result.partial:
        raise typer.Exit(PARTIAL_EXIT)
