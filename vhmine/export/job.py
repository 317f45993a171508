"""Stage 8, export: the store's ready instances become a benchmark folder in one format.

Reads the curation store (vhmine.curate.ready_instances) and the image files it records; writes one
folder, `--out DIR`, in the chosen format (vhmine.formats) plus `manifest.json`: counts per mode and
kind (yes/no too), the sha256 of every file, and where each instance came from. The folder is built
under a temporary name beside DIR and renamed into place, so a failed export leaves no half folder.

An instance whose image is missing, or changed since it was curated (its file no longer hashes to the recorded
sha256, and no index lists a copy), is left out: the summary and the manifest's `left_out_images` say how many
and why. YNQ must be 50/50 yes/no within each mode: `--per-mode N` samples N per mode (N/2 of each for YNQ);
where the store cannot give a balance the export stops and says by how much (`--allow-unbalanced`
goes on). Sampling follows a hash of (seed, pair or instance id): not row order, and the two
questions of a pair sort next to each other (a per-mode cut, or the yes/no halves of YNQ, can still
part them).

Nothing private leaves by default: worker names become stable pseudonyms ("w-" and 8 hex digits of an
HMAC keyed by the store's own secret, so one worker gets one pseudonym in every export of a store, for
agreement studies), and the machine's paths become the same from any working folder: a source image relative
to the collection root its index records (the store's runs name the index), anything else (a SQLite store, an
encoder's folder, an image under no index) just the file's name. `--with-provenance` keeps names and paths, for
internal use.

`--drop-blind` leaves out the instances a blind solver flagged (vhmine blind; not those a worker
overruled); the manifest's `blind` holds blind accuracy per mode whenever blind answers exist.
The images are checked for near duplicates (vhmine.export.neardup; on by default, `--no-near-dups` turns it
off, `--against INDEX` adds a reference): listed in the manifest and shown in `near_duplicates.html`;
a check that did not run is listed with its reason.

Pair groups (vhmine.bench.assign_groups): questions asked of both images of a pair whose answers differ
carry a `group_id` in every format (vhtest and vlmevalkit: a column; hf and lmms-eval: a parquet column;
pope: a field; llava and hallusionbench: the `vhmine` record); the manifest counts them per mode.

Versions (vhmine.export.changelog): the manifest holds `version` (`--version`, or counted up from `--since`'s)
and `content_hash`; `--since DIR` also writes `CHANGELOG.md` and `changelog.json`: the items added,
removed and changed against the earlier export DIR, with who and why from the store's action log.

Publishing (vhmine.export.datasheet, croissant, card): every export writes `croissant.json` (Croissant 1.0 with
its Responsible-AI fields, filled from the store's facts) and the manifest's `datasheet`; the hf export's
README.md is a Hugging Face dataset card, and a format's own README gets the same "How it was made" section.
What only the publisher knows comes from `--license`, `--description`, `--citation`, or is said to be unspecified.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import __version__
from vhmine import formats as F
from vhmine.bench import OEQ, YNQ, Benchmark, assign_groups, from_records
from vhmine.errors import ExportError, VhmineError
from vhmine.export.datasheet import Publication
from vhmine.export.neardup import DupOptions, home_indexes, not_run
from vhmine.export.privacy import collection_roots, private_removed, pseudonym_key, public_store
from vhmine.export.sampling import balance, counts, group_counts, sample, unbalanced_message
from vhmine.files import check_owned, check_writable, replace_dir
from vhmine.images import image_sha256, sha256_file
from vhmine.rules import shortfall, shortfall_line

log = logging.getLogger(__name__)

KIND_CHOICES = {"oeq": (OEQ,), "ynq": (YNQ,), "both": (OEQ, YNQ)}


@dataclass(frozen=True)
class ExportOptions:
    out: Path
    format: str
    kind: str | None = None  # oeq, ynq or both; None: every kind the format holds (pope, hallusionbench: ynq)
    per_mode: int | None = None  # instances per mode and kind; None: all
    allow_unbalanced: bool = False
    seed: int = 0  # sampling (--per-mode) and the llava train/test split
    replace: bool = False
    name: str | None = None  # the benchmark's name [default: the folder's name]
    modes: Sequence[str] | None = None  # only these modes
    with_provenance: bool = False  # keep worker names and this machine's paths (internal use only)
    drop_blind: bool = False  # leave out instances a blind solver flagged (vhmine blind), unless a worker overruled it
    near_dups: DupOptions | None = DupOptions()  # check the images for near duplicates; None: turned off
    version: str | None = None  # integer or semver; None: counted up from --since's, or 1
    since: Path | None = None  # an earlier export: write CHANGELOG.md / changelog.json against it
    license: str | None = None  # the publisher's licence (a Hugging Face id or a URL); None: unspecified
    description: str | None = None  # the publisher's description of the benchmark
    citation: str | None = None  # how to cite it (e.g. BibTeX); None: unspecified


@dataclass
class ExportResult:
    out: Path
    format: str
    counts: dict
    files: int
    notes: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)  # the closing lines: eval, and the harness's own run

    def summary(self) -> str:
        n = sum(c.get(OEQ, 0) + c.get(YNQ, 0) for c in self.counts.values())
        lines = [
            f"exported {n} instance(s) in {len(self.counts)} mode(s) as {self.format} to {self.out} ({self.files}"
            " files)"
        ]
        for m, c in self.counts.items():
            y = f" (yes {c.get('yes', 0)} / no {c.get('no', 0)})" if c.get(YNQ) else ""
            lines.append(f"  {m}: OEQ {c.get(OEQ, 0)}, YNQ {c.get(YNQ, 0)}{y}")
        return "\n".join(lines + self.notes + self.next_steps)


def next_steps(fmt: str, out: Path, bench: Benchmark) -> list[str]:
    """What to run on the export: `vhmine eval --bench OUT`, and for a harness format its own run first."""
    from vhmine.files import shown_path

    where = shown_path(out)
    harness = F.next_steps(fmt, where, bench)
    ask = (
        f"vhmine eval --bench {where} --model MODEL   (asks MODEL through an OpenAI-compatible endpoint; "
        "--predictions NAME=FILE scores answers made elsewhere)"
    )
    return harness + [("or ask a model from here: " if harness else "next: ") + ask]


def unavailable_images(recs) -> dict[str, str]:
    """instance id -> "missing" or "changed" for each record whose image no file holds as it was curated (each
    image hashed once): such instances are left out of the export, and the summary says how many and why."""
    state: dict[tuple[str, str], str | None] = {}
    out = {}
    for r in recs:
        key = (r.image_sha256, r.image_path)
        if key not in state:
            found = image_sha256(r.image_path)  # a file, or a WebDataset tar member
            state[key] = "missing" if found is None else ("changed" if found != r.image_sha256 else None)
        if state[key]:
            out[r.id] = state[key]
    return out


def _check_images(bench: Benchmark) -> None:
    """Every recorded image is there and unchanged, before anything is written."""
    from tqdm import tqdm

    for it in tqdm(bench.items, desc="checking images", unit="item", leave=False, disable=len(bench.items) < 500):
        sha = it.meta.get("image_sha256")
        p = bench.image_path(it)
        if p is None:
            continue
        found = image_sha256(p)  # a file, or a WebDataset tar member
        if found is None:
            raise ExportError(
                f"image {p} of instance {it.id} ({it.mode}) is missing: restore it, or discard the instance in the app"
            )
        if sha and found != sha:
            raise ExportError(
                f"image {p} of instance {it.id} ({it.mode}) no longer matches its recorded sha256: restore the file"
            )


def _check_out(out, replace: bool) -> None:
    """Refuse an output folder that exists (unless --replace) or that is not an earlier export:
    --replace replaces only an earlier export, never a user's folder. The message names `out` as given."""
    if Path(out).exists() and not replace:
        raise ExportError(f"{out} already exists: choose another --out, or pass --replace")
    check_owned(Path(out), "vhmine export")
    # the export is built beside `out` and renamed into place: a folder that cannot be written there is
    # said in one line now, not after the work as a disk failure
    check_writable(Path(out).parent if Path(out).exists() else Path(out), flag="--out")


def write_benchmark(
    bench: Benchmark,
    out: Path,
    fmt: str,
    *,
    replace: bool = False,
    info: dict | None = None,
    extra_files: dict | None = None,
    datasheet: dict | None = None,
    publication: Publication = Publication(),
    **fmt_options,
) -> ExportResult:
    """Write `bench` as format `fmt` into folder `out` with croissant.json, a README where the format has one (hf:
    a dataset card) and a manifest, atomically. `datasheet`: the store's facts (vhmine.export.datasheet.gather)."""
    from vhmine.export import card, croissant

    spec = F.get_format(fmt)
    wrong = sorted({it.kind for it in bench} - set(spec.kinds))
    if wrong:
        raise ExportError(
            f"format {spec.name} holds {' and '.join(spec.kinds)} only, and the benchmark has {wrong[0]} "
            f"instances: pass --kind {spec.kinds[0].lower()}"
        )
    if not len(bench):
        raise ExportError(
            "nothing to export: no ready instances match (mark instances ready in the app, or widen --kind/--mode)"
        )
    out = Path(out)
    _check_out(out, replace)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    created_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    head = {"name": bench.name, "created_at": created_at, **(info or {})}
    try:
        F.write(spec.name, bench, tmp, **fmt_options)
        for fname, text in (extra_files or {}).items():  # e.g. near_duplicates.html: listed in files like the rest
            (tmp / fname).write_text(text, encoding="utf-8")
        card.write_readme(tmp, spec.name, bench, head, datasheet, publication)
        meta = croissant.build(
            tmp,
            spec.name,
            bench,
            name=bench.name,
            version=str(head.get("version") or "1"),
            created_at=created_at,
            sheet=datasheet,
            pub=publication,
        )
        (tmp / croissant.FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")
        files = {}
        for p in sorted(q for q in tmp.rglob("*") if q.is_file()):
            files[p.relative_to(tmp).as_posix()] = {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        c = counts(bench)
        manifest = {
            "producer": "vhmine export",
            "vhmine_version": __version__,
            "format": spec.name,
            "layout": spec.writes,
            "name": bench.name,
            "created_at": created_at,
            **(info or {}),
            "publication": {
                "license": publication.license,
                "description": publication.description,
                "citation": publication.citation,
            },
            **({"datasheet": datasheet} if datasheet is not None else {}),
            "counts": c,
            "totals": {OEQ: sum(v[OEQ] for v in c.values()), YNQ: sum(v[YNQ] for v in c.values())},
            "files": files,
            "instances": {
                it.id: {
                    "mode": it.mode,
                    "kind": it.kind,
                    **it.meta,
                    **({"group_id": it.group_id} if it.group_id else {}),
                }
                for it in bench
            },
        }
        (tmp / "manifest.json").write_text(
            json.dumps(manifest, indent=1, ensure_ascii=False, default=str), encoding="utf-8"
        )
        replace_dir(tmp, out, producer="vhmine export")  # a failed swap leaves the previous export where it was
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(out, spec.name, c, len(files) + 1)


def _versioning(
    store, opts: ExportOptions, bench: Benchmark, left_out: list, key: str
) -> tuple[dict, dict, str | None]:
    """The manifest's version fields, the changelog files (with --since) and a note for the summary;
    `key` is pseudonym_key(store)."""
    from vhmine.export import changelog as CL

    earlier = CL.read_earlier(opts.since) if opts.since else None
    log = None
    if earlier is not None:
        d = CL.diff(earlier, bench)
        version = CL.next_version(opts.version, earlier.version, bool(d["added"] or d["removed"]), opts.since)
        log, md = CL.build(
            store,
            earlier,
            bench,
            version=version,
            key=key,
            with_provenance=opts.with_provenance,
            left_out={r.id for r in left_out},
            changes=d,
        )
    else:
        version = CL.next_version(opts.version, None, False, None)
    info = {
        "version": version,
        "content_hash": CL.content_hash(bench),
        "store_fingerprint": CL.store_fingerprint(key),
        **CL.store_state(store),
    }
    if log is None:
        return info, {}, None
    info["since"] = {**log["since"], **log["counts"]}
    files = {"CHANGELOG.md": md, "changelog.json": json.dumps(log, indent=1, ensure_ascii=False, default=str)}
    c = log["counts"]
    return (
        info,
        files,
        (
            f"version {version}: {c['added']} added, {c['removed']} removed, {c['changed']} changed since "
            f"{earlier.version or 'the earlier export'} (CHANGELOG.md)"
        ),
    )


def export_benchmark(store, opts: ExportOptions) -> ExportResult:
    """Ready instances of the store -> `opts.out` in `opts.format` (see the module docstring)."""
    try:
        return _export(store, opts)
    except KeyboardInterrupt:  # the folder is built under a temporary name and removed: nothing half-written
        from vhmine.errors import Interrupted

        raise Interrupted(
            f"interrupted: nothing written to {opts.out} (an export is published whole, at the end; an "
            "earlier export there is as it was); run the same command to export again"
        ) from None


def _export(store, opts: ExportOptions) -> ExportResult:
    from vhmine import curate
    from vhmine import rules as R
    from vhmine.curate import ready_instances

    spec = F.get_format(opts.format)
    if opts.kind is None:  # every kind the format holds: a yes/no-only format exports the yes/no questions
        opts = dataclasses.replace(opts, kind=next(k for k, v in KIND_CHOICES.items() if set(v) == set(spec.kinds)))
        implied = True
    else:
        implied = False
    if opts.kind not in KIND_CHOICES:
        raise ExportError(f"--kind {opts.kind!r} is not one of {', '.join(KIND_CHOICES)}")
    kinds = KIND_CHOICES[opts.kind]
    missing = [k for k in kinds if k not in spec.kinds]
    if missing:
        raise ExportError(
            f"format {spec.name} holds {' and '.join(spec.kinds)} only: pass --kind {spec.kinds[0].lower()}"
        )
    if opts.per_mode is not None and opts.per_mode < 1:
        raise ExportError("--per-mode must be at least 1")
    _check_out(opts.out, opts.replace)  # first: a refused export must not have recorded anything in the store
    wanted = {R.get_mode(m).name for m in opts.modes} if opts.modes else None
    ready = [r for r in ready_instances(store) if wanted is None or r.mode in wanted]
    recs = [r for r in ready if r.kind in kinds]
    other_kinds = sum(1 for r in ready if r.kind not in kinds) if implied else 0  # said in the summary
    unavailable = unavailable_images(recs)  # missing or changed since curated: left out, said below, not a stop
    no_image = [r for r in recs if r.id in unavailable]
    recs = [r for r in recs if r.id not in unavailable]
    flagged = curate.work.blind_dropped(store) if opts.drop_blind else set()
    left_out = [r for r in recs if r.id in flagged]  # answerable without the image (vhmine blind)
    recs = [r for r in recs if r.id not in flagged]
    bench = from_records(recs, opts.name or Path(opts.out).name)
    unpaired = 0
    if spec.name == "mmvp":  # MMVP's layout holds pairs only (rows 2k-1 and 2k): the rest is left out, and said
        from vhmine.formats import load_module

        pairs_only = load_module("mmvp").pairs_only

        bench, unpaired = pairs_only(bench)
        if unpaired and not len(bench):
            raise ExportError(
                f"none of the {unpaired} instance(s) to export is one of a pair (one question asked of both images "
                "of a mined pair): MMVP's layout holds pairs only; write the question "
                "for both images of a pair in the app"
            )
    bench = sample(bench, opts.per_mode, opts.seed, opts.allow_unbalanced)
    if spec.name == "mmvp" and opts.per_mode is not None:  # a per-mode cut may part a pair: then the balance again
        bench, split = pairs_only(bench)
        bench, unpaired = sample(bench, None, allow_unbalanced=opts.allow_unbalanced), unpaired + split
    bench = assign_groups(bench)  # groups of what is exported
    _check_images(bench)
    key = pseudonym_key(store)
    version_info, log_files, log_note = _versioning(store, opts, bench, left_out + no_image, key)
    if opts.near_dups is not None:
        from vhmine.export.neardup import check_near_duplicates

        dups = check_near_duplicates(store, bench, opts.near_dups, public=not opts.with_provenance)
    else:
        dups = not_run("turned off (--no-near-dups)")
    if not opts.with_provenance:
        bench = private_removed(bench, key, collection_roots(home_indexes(store, load=False)[0]))
    fmt_options = {"seed": opts.seed} if spec.name == "llava" else {}
    groups = group_counts(bench)
    info = {
        "kind": opts.kind,
        "store": store.display_url if opts.with_provenance else public_store(store.url),
        "provenance": (
            "full (worker names, this machine's paths)"
            if opts.with_provenance
            else "worker names pseudonymized, paths relative"
        ),
        "options": {
            "per_mode": opts.per_mode,
            "seed": opts.seed,
            "allow_unbalanced": opts.allow_unbalanced,
            "modes": sorted(wanted) if wanted else None,
        },
        "balance": {m: {"yes": y, "no": n} for m, (y, n) in balance(bench).items()},
        "pair_groups": groups,
        # how far each mode is from the items that tell two models apart (vhmine.rules.sample_size)
        "sample_size": shortfall({m: c[OEQ] + c[YNQ] for m, c in counts(bench).items()}),
        **version_info,
    }
    blind = curate.work.blind_summary(store, bench, dropped=left_out, with_endpoint=opts.with_provenance)
    if blind or opts.drop_blind:  # blind accuracy per mode whenever blind answers exist
        info["blind"] = {"drop_blind": opts.drop_blind, "left_out": len(left_out), "solvers": blind}
    info["near_duplicates"] = dups.manifest
    if unavailable:
        info["left_out_images"] = {
            why: sum(1 for w in unavailable.values() if w == why) for why in ("changed", "missing")
        }
    from vhmine.export.datasheet import gather

    sheet = gather(
        store, bench, key=key, with_provenance=opts.with_provenance, near_dups=dups.manifest, blind=info.get("blind")
    )
    pub = Publication(opts.license, opts.description, opts.citation)
    try:
        res = write_benchmark(
            bench,
            opts.out,
            spec.name,
            replace=opts.replace,
            info=info,
            extra_files={**dups.files, **log_files},
            datasheet=sheet,
            publication=pub,
            **fmt_options,
        )
    except VhmineError:
        raise
    except OSError as err:
        from vhmine.files import write_failed

        raise write_failed(
            opts.out, err, "nothing was left behind", "check the disk and try again", ExportError
        ) from None
    if other_kinds:
        res.notes.append(
            f"left out {other_kinds} open question(s): the {spec.name} format holds yes/no questions only "
            f"(--format {' / '.join(n for n in F.format_names() if OEQ in F.get_format(n).kinds)} holds them)"
        )
    if unpaired:
        res.notes.append(
            f"left out {unpaired} instance(s) that are not one of a pair (one question asked of both images of a "
            "mined pair): MMVP's layout holds pairs only, in rows 2k-1 and 2k"
        )
    short = shortfall_line({m: c[OEQ] + c[YNQ] for m, c in res.counts.items()}, "instances")
    if short:
        res.notes.append(f"note: {short}")
    res.notes.append(
        f"version {version_info['version']}, content hash {version_info['content_hash'][:12]}; "
        f"{sum(sum(k.values()) for k in groups.values())} pair group(s)"
    )
    if log_note:
        res.notes.append(log_note)
    if opts.drop_blind:
        res.notes.append(
            f"left out {len(left_out)} instance(s) a blind solver answered right without the image (--drop-blind)"
        )
    if unavailable:
        n = {why: sum(1 for w in unavailable.values() if w == why) for why in ("missing", "changed")}
        res.notes.append(
            f"left out {len(unavailable)} instance(s) whose image is missing ({n['missing']}) or changed "
            f"since it was curated ({n['changed']}): restore the files and export again to include them"
        )
    res.notes.append(dups.note)
    if opts.allow_unbalanced and unbalanced_message(balance(bench)):
        res.notes.append(
            "note: " + unbalanced_message(balance(bench)).split(". Write more")[0] + " (--allow-unbalanced)"
        )
    res.next_steps = next_steps(spec.name, opts.out, bench)
    return res
