"""`vhmine probe`, `describe`, `generate`, `manipulate`, `blind`, `draft`: the commands that ask models
(registered on vhmine.cli.app).

Thin wiring over the stage modules; every model call goes through vhmine.llm with the shared options of
vhmine.cli. Reads and writes what those stages do, nothing itself.
"""

from __future__ import annotations

from pathlib import Path

import typer

from vhmine.cli.options import (
    BaseUrlOpt,
    CacheOpt,
    ConcurrencyOpt,
    DbOpt,
    IndexesOpt,
    MaxCostOpt,
    MaxTokensOpt,
    ModesOpt,
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

# what Ctrl-C leaves in the model stages: every answer is cached as it arrives, so a rerun resumes for free
MODEL_INTERRUPTED = (
    "interrupted: the answers received so far are kept in the request cache; run the same command "
    "to resume (they are not asked again)"
)


@app.command()
@interruptible(MODEL_INTERRUPTED)
def probe(
    model: str = typer.Option(..., "--model", help="The victim MLLM, as the endpoint names it (e.g. gpt-4o)."),
    judge: str | None = typer.Option(
        None,
        "--judge",
        help=(
            "Model that judges open-ended answers (correct / incorrect / unclear) [default: none, workers label them in"
            " the app]."
        ),
    ),
    rule: str = typer.Option(
        "vhtest",
        "--rule",
        help=(
            "Yes/no rule for YNQ answers: vhtest (VHTest: the letters yes / no start it), firstword, pope, strict,"
            " vlmevalkit."
        ),
    ),
    mode: list[str] | None = ModesOpt,
    kind: list[str] | None = typer.Option(
        None, "--kind", help="Only OEQ or YNQ instances (repeatable; any case) [default: both]."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Ask at most this many instances."),
    base_url: str | None = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: str | None = DbOpt,
) -> None:
    """Ask a victim MLLM every ready instance, judge the answers, print hallucinations per mode (exit 3: partial)."""
    try:
        from vhmine.models import ProbeOptions, check_kinds, run_probe
        from vhmine.store import open_store

        opts = ProbeOptions(
            llm=_llm_options(
                model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens
            ),
            judge=judge,
            rule=rule,
            modes=mode or None,
            kinds=check_kinds(kind or ["OEQ", "YNQ"]),
            limit=limit,
        )
        with open_store(db, create=False) as store:
            result = run_probe(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
@interruptible(MODEL_INTERRUPTED)
def describe(
    model: str = typer.Option(..., "--model", help="The MLLM that explains the hallucinations (e.g. gpt-4o)."),
    mode: list[str] | None = ModesOpt,
    old_modes: str | None = typer.Option(None, "--modes", hidden=True, help="Replaced by --mode (repeatable)."),
    examples: int = typer.Option(10, "--examples", min=1, help="Successes explained and merged per mode."),
    min_real: int = typer.Option(
        3, "--min-real", min=0, help="With fewer real successes, hypothetical ones fill up to --examples (marked so)."
    ),
    victim: str | None = typer.Option(
        None, "--victim", help="Use only the successes of this probed model [default: any model's]."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Also write <mode>.txt files here to edit before `vhmine generate --descriptions`."
    ),
    base_url: str | None = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: str | None = DbOpt,
) -> None:
    """Write one description per mode of what makes it hallucinate, from the successes (exit 3: partial)."""
    try:
        from vhmine.models import DescribeOptions, run_describe
        from vhmine.store import open_store

        if old_modes is not None:  # the one way to pick modes is --mode, as in every other stage: say how
            given = [m.strip() for m in old_modes.split(",") if m.strip() and m.strip().lower() != "all"]
            raise InputError(
                "--modes was replaced by --mode, as the other stages take it: "
                + (" ".join(f"--mode {m}" for m in given) if given else "leave it out for all 8 modes")
            )

        opts = DescribeOptions(
            llm=_llm_options(
                model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens
            ),
            modes=list(mode) if mode else None,
            examples=examples,
            min_real=min_real,
            victim=victim,
            out=out,
        )
        with open_store(db, create=False) as store:
            result = run_describe(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
@interruptible(MODEL_INTERRUPTED)
def generate(
    backend: str = typer.Option(
        ...,
        "--backend",
        help="openai:<image model> (dall-e-3, gpt-image-1, ...) or diffusers:<hub id or local folder>.",
    ),
    per_mode: int = typer.Option(10, "--per-mode", min=1, help="Images per mode."),
    mode: list[str] | None = ModesOpt,
    prompt_model: str | None = typer.Option(
        None,
        "--prompt-model",
        help="LLM that rewrites descriptions into image prompts (needed by every backend but openai:dall-e-3).",
    ),
    descriptions: Path | None = typer.Option(
        None,
        "--descriptions",
        help="Folder of edited <mode>.txt (from `vhmine describe --out`) [default: the store's newest].",
    ),
    out: Path | None = typer.Option(None, "--out", help="Where images go, as <sha256>.png [default: data/generated]."),
    size: str = typer.Option("1024x1024", "--size", help="Image size for openai backends."),
    device: str | None = typer.Option(None, "--device", help="diffusers: cpu, cuda, ... [default: cuda when present]."),
    dtype: str | None = typer.Option(
        None, "--dtype", help="diffusers: float32, float16, bfloat16 [default: float16 on cuda, else float32]."
    ),
    steps: int = typer.Option(30, "--steps", min=1, help="diffusers: denoising steps."),
    guidance: float = typer.Option(7.5, "--guidance", help="diffusers: classifier-free guidance scale."),
    seed: int = typer.Option(0, "--seed", help="diffusers: image k of a mode uses seed SEED + k."),
    width: int | None = typer.Option(None, "--width", min=8, help="diffusers: image width [default: the pipeline's]."),
    height: int | None = typer.Option(
        None, "--height", min=8, help="diffusers: image height [default: the pipeline's]."
    ),
    base_url: str | None = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    db: str | None = DbOpt,
) -> None:
    """Render images from each mode's description and queue them for curation (exit 3: partial)."""
    try:
        from vhmine.models import GenerateOptions, parse_backend, run_generate
        from vhmine.store import open_store

        if parse_backend(backend).needs_rewrite and not prompt_model:
            raise InputError(
                f"backend {backend} needs --prompt-model: an LLM that rewrites each description into "
                "an image prompt (e.g. --prompt-model gpt-4o); only openai:dall-e-3 takes descriptions as they are"
            )
        opts = GenerateOptions(
            backend=backend,
            per_mode=per_mode,
            modes=mode or None,
            descriptions=descriptions,
            out=out,
            size=size,
            device=device,
            dtype=dtype,
            steps=steps,
            guidance=guidance,
            seed=seed,
            width=width,
            height=height,
            llm=_llm_options(
                prompt_model or backend.partition(":")[2],
                base_url,
                concurrency,
                timeout,
                max_retries,
                retry_wait,
                max_cost,
                prices,
                cache,
            ),
        )
        with open_store(db, create=True) as store:  # may make the first store
            result = run_generate(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
@interruptible(MODEL_INTERRUPTED)
def manipulate(
    model: str = typer.Option(..., "--model", help="The victim MLLM, as the endpoint names it (e.g. gpt-4o)."),
    index: str | None = typer.Option(
        None,
        "--index",
        help="Collection whose images are the scenes [default: VHMINE_INDEX, or the only one there is].",
    ),
    indexes: Path | None = IndexesOpt,
    strategy: list[str] | None = typer.Option(
        None, "--strategy", help="abnormal, paired or removal (repeatable) [default: all three]."
    ),
    per_strategy: int = typer.Option(10, "--per-strategy", min=1, help="Edited images per strategy."),
    prior: str = typer.Option(
        "counts", "--prior", help="What picks the object: counts (co-occurrence over the annotations) or llm."
    ),
    prior_model: str | None = typer.Option(None, "--prior-model", help="Text-only model of --prior llm."),
    coco_annotations: Path | None = typer.Option(
        None, "--coco-annotations", help="COCO instances JSON [default: the one the collection was embedded with]."
    ),
    detector: str | None = typer.Option(
        None, "--detector", help="Owl-ViT / OWLv2 hub id or local folder, for scenes without annotations."
    ),
    vocabulary: str | None = typer.Option(
        None, "--vocabulary", help="Comma-separated object names for --detector [default: the COCO categories]."
    ),
    inpaint: str | None = typer.Option(
        None,
        "--inpaint",
        help=(
            "diffusers:<hub id or local folder> (an inpainting pipeline) or openai:<model> (an image edit); needed by"
            " removal."
        ),
    ),
    judge: str | None = typer.Option(
        None, "--judge", help="Model that judges answers against the edit's truth [default: the yes/no rule]."
    ),
    rule: str = typer.Option("vhtest", "--rule", help="Yes/no rule: vhtest, firstword, pope, strict."),
    out: Path | None = typer.Option(
        None, "--out", help="Where edited images, masks and the report go [default: data/manipulated]."
    ),
    device: str | None = typer.Option(
        None, "--device", help="Detector and inpainting: cpu, cuda ... [default: cuda when present]."
    ),
    steps: int = typer.Option(30, "--steps", min=1, help="Inpainting denoising steps."),
    seed: int = typer.Option(0, "--seed", help="Scene order and inpainting seed."),
    base_url: str | None = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: str | None = DbOpt,
) -> None:
    """Edit scenes against the language prior (AutoHallusion), queue them, report ASR / MASR / CASR (exit 3:
    partial)."""
    try:
        from vhmine.manipulate import ManipulateOptions
        from vhmine.manipulate import manipulate as run_manipulate
        from vhmine.store import open_store

        opts = ManipulateOptions(
            llm=_llm_options(
                model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens
            ),
            index=index,
            indexes=indexes,
            coco_annotations=coco_annotations,
            detector=detector,
            vocabulary=tuple(v.strip() for v in (vocabulary or "").split(",") if v.strip()),
            prior=prior,
            prior_model=prior_model,
            strategies=tuple(strategy or ("abnormal", "paired", "removal")),
            per_strategy=per_strategy,
            inpaint=inpaint,
            judge=judge,
            rule=rule,
            out=out,
            device=device,
            steps=steps,
            seed=seed,
        )
        with open_store(db, create=True) as store:  # may make the first store
            result = run_manipulate(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
@interruptible(MODEL_INTERRUPTED)
def blind(
    model: str = typer.Option(
        ..., "--model", help="The text-only model that answers without the image (e.g. gpt-4o-mini)."
    ),
    judge: str | None = typer.Option(
        None,
        "--judge",
        help=(
            "Model that judges open-ended answers [default: match, a reference answer appears in the answer, as eval"
            " scores]."
        ),
    ),
    rule: str = typer.Option("vhtest", "--rule", help="Yes/no rule for YNQ answers: vhtest, firstword, pope, strict."),
    mode: list[str] | None = ModesOpt,
    kind: list[str] | None = typer.Option(
        None, "--kind", help="Only OEQ or YNQ instances (repeatable; any case) [default: both]."
    ),
    base_url: str | None = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: str | None = DbOpt,
) -> None:
    """Ask a text-only model every ready question without its image; flag those it gets right on every image (exit 3:
    partial)."""
    try:
        from vhmine.models import BlindOptions, check_kinds, run_blind
        from vhmine.store import open_store

        opts = BlindOptions(
            llm=_llm_options(
                model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens
            ),
            judge=judge,
            rule=rule,
            modes=mode or None,
            kinds=check_kinds(kind or ["OEQ", "YNQ"]),
        )
        with open_store(db, create=False) as store:
            result = run_blind(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
@interruptible(MODEL_INTERRUPTED)
def draft(
    model: str | None = typer.Option(
        None, "--model", help="The vision model that drafts each pair task (e.g. gpt-4o)."
    ),
    stats: bool = typer.Option(
        False,
        "--stats",
        help=(
            "Print what verifying drafts saves (time per verified item against per item written from scratch, accept /"
            " edit rates per mode) and ask no model."
        ),
    ),
    mode: list[str] | None = ModesOpt,
    limit: int | None = typer.Option(None, "--limit", min=1, help="Draft at most this many pair tasks."),
    base_url: str | None = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: float | None = MaxCostOpt,
    prices: Path | None = PricesOpt,
    cache: Path | None = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: str | None = DbOpt,
) -> None:
    """Draft each open pair task's question and per-image answers with a vision model, for workers to verify (exit 3:
    partial)."""
    try:
        from vhmine.store import open_store

        if stats:
            from vhmine import curate

            with open_store(db, create=False) as store:
                typer.echo(curate.people.savings_table(curate.people.draft_savings(store)))
            return
        if not model:
            raise InputError("give --model M (the vision model that drafts), or --stats to see what verifying saves")
        from vhmine.models import DraftOptions, run_draft

        opts = DraftOptions(
            llm=_llm_options(
                model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache, max_tokens
            ),
            modes=mode or None,
            limit=limit,
        )
        with open_store(db, create=False) as store:
            result = run_draft(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)
