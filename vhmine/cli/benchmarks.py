"""`vhmine export` and `vhmine eval`: benchmarks out of the store and scores back (registered on vhmine.cli.app).

Thin wiring over vhmine.export.job and vhmine.eval.job; reads and writes what those do, nothing itself.
"""

from __future__ import annotations

from pathlib import Path

import typer

from vhmine.cli.options import (
    CacheOpt,
    ConcurrencyOpt,
    DbOpt,
    IndexesOpt,
    MaxCostOpt,
    MaxTokensOpt,
    PricesOpt,
    RetriesOpt,
    RetryWaitOpt,
    TimeoutOpt,
    _fail,
    _finish,
    _llm_options,
    app,
    interruptible,
)
from vhmine.errors import InputError, VhmineError


@app.command()
@interruptible(
    "interrupted: nothing written (an export is published whole, at the end); run the same command to export again"
)
def export(
    out: Path = typer.Option(..., "--out", help="The benchmark folder to write (must not exist unless --replace)."),
    fmt: str = typer.Option(
        "vhtest", "--format", help="vhtest, vlmevalkit, lmms-eval, hf, pope, llava, hallusionbench or mmvp."
    ),
    kind: str | None = typer.Option(
        None,
        "--kind",
        help=(
            "oeq, ynq or both [default: every kind the format holds: both, or ynq for pope, hallusionbench and mmvp,"
            " which hold yes/no questions only, and say how many open ones were left out; mmvp holds question pairs"
            " only and says how many others it left out]."
        ),
    ),
    per_mode: int | None = typer.Option(
        None, "--per-mode", min=1, help="Instances per mode and kind (YNQ: half yes, half no) [default: all]."
    ),
    mode: list[str] | None = typer.Option(None, "--mode", help="Export only this mode (repeatable) [default: all 8]."),
    allow_unbalanced: bool = typer.Option(
        False, "--allow-unbalanced", help="Go on when yes/no questions are not 50/50 within a mode."
    ),
    seed_: int = typer.Option(0, "--seed", help="Seed of --per-mode sampling and of the llava 80/20 split."),
    replace: bool = typer.Option(False, "--replace", help="Replace an existing --out folder."),
    name: str | None = typer.Option(None, "--name", help="Benchmark name [default: the folder's name]."),
    with_provenance: bool = typer.Option(
        False,
        "--with-provenance",
        help="Keep worker names and this machine's paths (internal use) [default: pseudonyms, relative paths].",
    ),
    drop_blind: bool = typer.Option(
        False,
        "--drop-blind",
        help=(
            "Leave out questions a blind solver answered right without the image (`vhmine blind`), unless a worker"
            " overruled the flag."
        ),
    ),
    near_dups: bool | None = typer.Option(
        None,
        "--near-dups/--no-near-dups",
        help=(
            "Check the exported images for near duplicates of each other (and generated ones against their source"
            " collection), with the encoders of the index they were mined from [default: on; when it cannot run the"
            " manifest says why; --near-dups makes that an error]."
        ),
    ),
    against: str | None = typer.Option(
        None,
        "--against",
        help=(
            "Also check them against this reference index from `vhmine embed` (name or folder; e.g. COCO train2017),"
            " with its encoders; implies --near-dups."
        ),
    ),
    dup_clip: float = typer.Option(
        0.95, "--dup-clip", help="Near duplicate: CLIP cosine >= this (and DINOv2 >= --dup-dino)."
    ),
    dup_dino: float = typer.Option(
        0.9, "--dup-dino", help="Near duplicate: DINOv2 cosine >= this (and CLIP >= --dup-clip)."
    ),
    indexes: Path | None = IndexesOpt,
    device: str | None = typer.Option(
        None,
        "--device",
        help="Encoders' device for the near-duplicate check: cpu, cuda ... [default: cuda when present].",
    ),
    version: str | None = typer.Option(
        None,
        "--version",
        help=(
            "This export's version, an integer or semver (1.2.0), later than --since's [default: --since's counted up,"
            " else 1]."
        ),
    ),
    since: Path | None = typer.Option(
        None,
        "--since",
        help=(
            "An earlier export: write CHANGELOG.md and changelog.json (items added, removed, changed, with who and why"
            " from the store's action log)."
        ),
    ),
    license_: str | None = typer.Option(
        None,
        "--license",
        help=(
            "The benchmark's licence, for croissant.json and the dataset card: a Hugging Face licence id (cc-by-4.0) or"
            " a URL [default: unspecified, and said so]."
        ),
    ),
    description: str | None = typer.Option(
        None,
        "--description",
        help=(
            "What the benchmark is, in your words (croissant.json, the dataset card) [default: a summary of its"
            " counts]."
        ),
    ),
    citation: str | None = typer.Option(
        None,
        "--citation",
        help='How to cite it, e.g. BibTeX: --citation "$(cat paper.bib)" [default: unspecified, and said so].',
    ),
    db: str | None = DbOpt,
) -> None:
    """Write the store's ready instances as a benchmark folder (with a manifest, croissant.json, a version and pair
    groups)."""
    try:
        from vhmine import api
        from vhmine.export import DupOptions

        if near_dups is False and against:
            raise InputError(
                "--against checks for near duplicates, --no-near-dups turns the check off: pass one of them"
            )
        dups = (
            None
            if near_dups is False
            else DupOptions(
                against=against,
                indexes=indexes,
                clip_min=dup_clip,
                dino_min=dup_dino,
                device=device,
                required=bool(near_dups or against),
            )
        )  # asked for explicitly: not running is an error
        result = api.export(
            out,
            fmt,
            db=db,
            kind=kind.lower() if kind else None,
            per_mode=per_mode,
            allow_unbalanced=allow_unbalanced,
            seed=seed_,
            replace=replace,
            name=name,
            modes=mode or None,
            with_provenance=with_provenance,
            drop_blind=drop_blind,
            near_dups=dups,
            version=version,
            since=since,
            license=license_,
            description=description,
            citation=citation,
        )
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@app.command("eval")
@interruptible(
    "interrupted: nothing scored; answers received so far are kept in the request cache; run the same command to resume"
)
def eval_(
    bench: Path = typer.Option(
        ...,
        "--bench",
        help=(
            "A benchmark folder from `vhmine export`, or HallusionBench's JSON, POPE's JSON lines or MMVP's folder"
            " (Questions.csv and MMVP Images/)."
        ),
    ),
    model: list[str] | None = typer.Option(
        None, "--model", help="Ask this model (repeatable; OpenAI-compatible endpoint)."
    ),
    predictions: list[str] | None = typer.Option(
        None,
        "--predictions",
        help=(
            "NAME=FILE: score answers already made: vhmine's own (id and answer per item), VLMEvalKit's"
            " <model>_<dataset>.xlsx, lmms-eval's --log_samples JSONL or MMVP's answers file (answer.jsonl)"
            " (repeatable; one NAME over several files merges them)."
        ),
    ),
    out: Path = typer.Option(Path("eval"), "--out", help="Folder for report.md, report.json, answers and the chart."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint [env OPENAI_BASE_URL]."),
    judge: str | None = typer.Option(
        None,
        "--judge",
        help="Judge model for open-ended answers (implies --oeq judge); with --rule mmvp, MMVP's grader.",
    ),
    oeq: str | None = typer.Option(
        None,
        "--oeq",
        help=(
            "Open-ended scoring: match (reference appears in the answer), judge, or labels (the store's verdicts on"
            " this model's responses: workers' majority, else probe's rule or judge) [default: judge with --judge, else"
            " match]."
        ),
    ),
    rule: str = typer.Option(
        "vhtest",
        "--rule",
        help=(
            "Yes/no rule: vhtest (VHTest's classify_response), firstword, pope, strict or vlmevalkit (VLMEvalKit's"
            " YOrN_Extraction, to check a plain VLMEvalKit run's figures); or mmvp: MMVP's gpt_grader.py, a judge"
            " (--judge) grades every answer and a pair counts when both are right."
        ),
    ),
    fmt: str | None = typer.Option(None, "--format", help="The benchmark's format [default: detected]."),
    images: Path | None = typer.Option(
        None,
        "--images",
        help="Folder of a foreign benchmark's images (POPE, HallusionBench, LLaVA); image paths must stay inside it.",
    ),
    partial: bool = typer.Option(False, "--partial", help="Score only the items that have an answer."),
    judge_agreement: bool = typer.Option(
        False,
        "--judge-agreement",
        help=(
            "With --judge: Cohen's kappa between the judge's verdicts and workers' labels in the store (--db), where"
            " both exist."
        ),
    ),
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: str | None = DbOpt,
    compare: tuple[str, str] | None = typer.Option(
        None,
        "--compare",
        metavar="A B",
        help=(
            "Print model A minus model B on every figure (overall and per mode) with its 95% interval (a paired"
            " bootstrap), McNemar's exact p for every share (accuracy, pair and image accuracy...), and whether the"
            " benchmark tells them apart (report.json's"
            " comparisons hold every two models)."
        ),
    ),
) -> None:
    """Score models on a benchmark: accuracy per mode, pair and image accuracy, yes/no bias, every figure with its 95%
    interval (exit 3: partial)."""
    try:
        from vhmine import api

        preds = []
        for p in predictions or []:
            if "=" not in p:
                raise InputError(f"--predictions {p!r} is not NAME=FILE")
            n, f = p.split("=", 1)
            if not n.strip() or not f.strip():
                raise InputError(
                    f"--predictions {p!r} has no {'model name' if not n.strip() else 'file'}: pass NAME=FILE"
                )
            preds.append((n, Path(f)))
        if compare:  # before any model is asked
            _check_compare(compare, [n for n, _ in preds] + list(model or []))
        # the same model-access settings as probe / describe / generate (vhmine.llm.LLMOptions fields)
        # (the template's model is a placeholder: eval replaces it, and base_url, per model and judge)
        llm = _llm_options(
            "", base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens
        )
        result = api.evaluate(
            bench,
            out,
            models=model or [],
            predictions=preds,
            fmt=fmt,
            images=images,
            rule=rule,
            oeq=oeq,
            judge=judge,
            base_url=base_url,
            db=db,
            partial=partial,
            judge_agreement=judge_agreement,
            llm=llm,
        )
    except VhmineError as err:
        _fail(err)
    _finish(result, result.compared(*compare) if compare else "")  # a failed request: exit 3, as probe


def _check_compare(compare: tuple[str, str], names: list[str]) -> None:
    """--compare A B names two different models of this eval (--predictions NAME=..., --model NAME)."""
    for x in compare:
        if x not in names:
            raise InputError(
                f"--compare {x}: no model of that name in this eval ({', '.join(names) or 'none'}): name two of the"
                " models given with --predictions NAME=FILE or --model"
            )
    if compare[0] == compare[1]:
        raise InputError(f"--compare {compare[0]} {compare[1]}: name two different models")
