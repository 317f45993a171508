"""`vhmine status`: where a working folder stands and what to run next, as `git status` does.

Reads only, and only small files: `indexes/<name>/manifest.json` (or an unfinished embed's work folder),
`runs/<run>/run.json`, the `manifest.json` of exports and `report.json` of evals found in the working folder
(up to 3 levels down), and the store's counts through vhmine.curate.store_overview, opened with
`migrate=False` (a store that is not there is not created, an older one is not migrated, a SQLite file is
opened read-only). Writes nothing. Needs no extra: without SQLAlchemy (the base install) it shows all but the
store's counts and says what they need. The store's URL is shown through vhmine.files.display_url.
An index whose manifest.json changed since its newest run mined it (an embed that grew it) is said after
that run's line, with the `vhmine mine` command that reruns it (vhmine.outgrown).
Below the store's table of modes it names the modes with fewer ready instances than tell two models apart
(vhmine.rules.sample_size). `collect` gathers a Status; `Status.text()` is what the command prints, `Status.record()`
its --json.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vhmine.outgrown import outgrown, outgrown_line, same_folder
from vhmine.rules import shortfall, shortfall_line

EVALS_SHOWN = 3  # the newest evals the text lists (--json lists every one)
WALK_DEPTH = 3  # how far below the working folder exports, evals and runs are looked for
WALK_DIRS = 3000  # folders looked into at most: a huge tree is not walked whole
_SKIP = {"node_modules", "__pycache__", "site-packages", "work", "shards", "Images", "images"}


@dataclass
class IndexInfo:
    name: str
    folder: str
    finished: bool
    images: int = 0
    skipped: int = 0
    duplicates: int = 0
    clip: str = ""  # the encoders' specs
    dino: str = ""
    shards_done: int = 0  # an unfinished job's finished shards
    manifest_sha256: str = ""  # of a finished index's manifest.json: what a run records as index_manifest_sha256


@dataclass
class RunInfo:
    name: str
    folder: str
    index: str
    clip: float
    dino: float
    pairs: int
    in_box: int
    created: str
    seeded: bool = False
    nearby: dict = field(default_factory=dict)  # a run with 0 pairs: counts at nearby thresholds
    index_folder: str = ""  # run.json's: the index it mined, its manifest's sha256 then, and its images then
    index_manifest_sha256: str = ""
    images: int = 0
    options: dict = field(default_factory=dict)  # max_pairs, max_per_image, engine
    against: str = ""  # a `vhmine mine --against` run: the other index's name
    written: float = 0.0  # run.json's mtime: orders runs created in the same second
    warned: str = ""  # mine's warning about its thresholds (--dino >= --clip): its pairs are not to be seeded


@dataclass
class ExportInfo:
    folder: str
    format: str
    name: str
    version: str
    items: int
    created: str
    manifest_sha256: str = ""  # what an eval of it records (formats.identity), from any folder


@dataclass
class EvalInfo:
    folder: str
    benchmark: str
    source: str  # the benchmark's path as an older eval recorded it
    items: int
    models: dict  # model -> {"accuracy", "n", "failed"}
    written: float  # mtime of report.json
    sha256: str = ""  # the sha256 of the benchmark's manifest.json (formats.identity), when it has one


@dataclass
class Status:
    root: str
    indexes: list[IndexInfo]
    runs: list[RunInfo]
    store: dict | None  # None: no store; else url, problem or the overview's counts
    exports: list[ExportInfo]
    evals: list[EvalInfo]
    next_step: str = ""
    also: list[str] = field(default_factory=list)
    grown: list[dict] = field(default_factory=list)  # indexes changed since their newest run (vhmine.outgrown)

    def record(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        return "\n".join(_lines(self))


# --- reading what is there ---------------------------------------------------------------------


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _index(folder: Path) -> IndexInfo | None:
    from vhmine.embed import unfinished_job
    from vhmine.index import manifest_sha256, read_manifest

    try:
        man = read_manifest(folder)
    except (OSError, ValueError):
        man = {}
    if man.get("producer") == "vhmine embed" or ("format_version" in man and "encoders" in man):
        c, enc = man.get("counts", {}), man.get("encoders", {})
        return IndexInfo(
            folder.name,
            str(folder),
            True,
            c.get("images", 0),
            c.get("skipped", 0),
            c.get("duplicates", 0),
            (enc.get("clip") or {}).get("spec", ""),
            (enc.get("dino") or {}).get("spec", ""),
            manifest_sha256=manifest_sha256(folder),
        )
    unfinished = unfinished_job(folder)
    if unfinished:
        job, done = unfinished
        return IndexInfo(
            folder.name,
            str(folder),
            False,
            clip=str(job.get("clip_model", "")),
            dino=str(job.get("dino_model", "")),
            shards_done=done,
        )
    return None


def _run(folder: Path, meta: dict) -> RunInfo:
    c = meta.get("counts", {})
    return RunInfo(
        folder.name,
        str(folder),
        str(meta.get("index", "")),
        meta.get("clip_threshold"),
        meta.get("dino_threshold"),
        c.get("written", 0),
        c.get("in_box", 0),
        str(meta.get("created", "")),
        nearby=meta.get("nearby") or {},
        index_folder=str(meta.get("index_folder") or ""),
        index_manifest_sha256=str(meta.get("index_manifest_sha256") or ""),
        images=int(c.get("images") or 0),
        options=meta.get("options") if isinstance(meta.get("options"), dict) else {},
        against=str((meta.get("against") or {}).get("index", "")) if isinstance(meta.get("against"), dict) else "",
        written=(folder / "run.json").stat().st_mtime,
        warned=_warned(meta),
    )


def _warned(meta: dict) -> str:
    """mine's warning about the run's thresholds (run.json's `warnings`; an older run's reversed thresholds)."""
    said = [w for w in meta.get("warnings") or [] if isinstance(w, str)]
    clip, dino = meta.get("clip_threshold"), meta.get("dino_threshold")
    if not said and isinstance(clip, (int, float)) and isinstance(dino, (int, float)) and dino >= clip:
        said = [f"--dino {dino:g} >= --clip {clip:g}"]
    return said[0].split(":")[0] if said else ""


def _export(folder: Path, man: dict) -> ExportInfo:
    totals = man.get("totals") or {}
    return ExportInfo(
        str(folder),
        str(man.get("format", "")),
        str(man.get("name", folder.name)),
        str(man.get("version", "")),
        sum(v for v in totals.values() if isinstance(v, int)),
        str(man.get("created_at", "")),
        _sha256(folder / "manifest.json"),
    )


def _sha256(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _eval(folder: Path, rep: dict) -> EvalInfo:
    models = {}
    for name, m in (rep.get("models") or {}).items():
        o = (m.get("metrics") or {}).get("overall") or {}
        models[name] = {"accuracy": o.get("accuracy"), "n": o.get("n", 0), "failed": m.get("failed", 0)}
    b = rep.get("benchmark") or {}
    return EvalInfo(
        str(folder),
        str(b.get("name", "")),
        str(b.get("source", "")),
        int(b.get("items", 0)),
        models,
        (folder / "report.json").stat().st_mtime,
        str(b.get("sha256", "")) if b.get("sha256_of") == "manifest.json" else "",
    )


def _walk(root: Path):
    """(folder, file name, record) of every vhmine record file up to WALK_DEPTH below `root`; a folder that
    holds one is not looked into further (an export's images, a run's files)."""
    todo, seen = [(root, 0)], 0
    while todo and seen < WALK_DIRS:
        folder, depth = todo.pop(0)
        seen += 1
        found = False
        for name in ("manifest.json", "run.json", "report.json"):
            if (folder / name).is_file():
                rec = _json(folder / name)
                if str(rec.get("producer", "")).startswith("vhmine "):
                    found = True
                    yield folder, name, rec
        if found or depth >= WALK_DEPTH:
            continue
        try:
            subs = sorted(
                e.path
                for e in os.scandir(folder)
                if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name not in _SKIP
            )
        except OSError:
            continue
        todo += [(Path(p), depth + 1) for p in subs]


def _store_state(db: str | None) -> dict | None:
    """The store's counts; None when there is none; else {"url", "problem"} (and "corrupt": the one problem that
    makes `vhmine status` exit non-zero). Everything but the counts works without SQLAlchemy (the base install),
    and a SQLite file is opened read-only: see vhmine.store.open_store(migrate=False)."""
    from vhmine.config import resolve_url
    from vhmine.errors import StoreCorruptError, StoreError, StoreExtraMissingError, StoreMissingError
    from vhmine.files import display_url

    url = resolve_url(db)
    file = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    where = _shown(file) if file is not None else display_url(url)
    if file is not None and not file.is_file():
        return None  # nothing to read, and nothing imported to find that out
    try:
        from vhmine.curate import store_overview
        from vhmine.store import open_store

        with open_store(db, migrate=False) as store:
            ov = store_overview(store)
            found = {"url": where, "db_option": store.db_option, **asdict(ov), "tasks": ov.tasks}
        # ready instances per mode against the items that tell two models apart (--json; the text names the short)
        return {**found, "sample_size": shortfall({m["mode"]: m["ready"] for m in found["modes"]})}
    except StoreMissingError as err:  # an empty file says so; a server database without tables too
        return {"url": where, "problem": str(err)}
    except StoreCorruptError as err:
        return {"url": where, "problem": str(err), "corrupt": True}
    except StoreExtraMissingError as err:  # the base install: only the store's counts need the extra
        return {
            "url": where,
            "problem": f"{err} (only the store's counts need it)",
            "needs": "pip install 'vhmine[app]'",
        }
    except StoreError as err:  # older schema, a server that is down: said, not fatal
        return {"url": where, "problem": str(err)}


def collect(root: Path = Path("."), *, indexes: Path | None = None, db: str | None = None) -> Status:
    """Everything `vhmine status` shows, read from `root` (the working folder), the indexes and the store."""
    from vhmine.config import indexes_root, runs_root

    root = Path(root)
    idx_root, run_root = indexes_root(indexes), runs_root()
    index_list, runs, exports, evals, seen = [], [], [], [], set()
    if idx_root.is_dir():
        for folder in sorted(p for p in idx_root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            info = _index(folder)
            if info:
                index_list.append(info)
                seen.add(folder.resolve())
    places = [root] + [r for r in (run_root,) if r.is_dir() and not _inside(r, root)]
    for place in places:
        for folder, name, rec in _walk(place):
            key = (folder.resolve(), name)
            if key in seen:
                continue
            seen.add(key)
            producer = rec.get("producer")
            if name == "run.json" and producer == "vhmine mine":
                runs.append(_run(folder, rec))
            elif name == "manifest.json" and producer == "vhmine export":
                exports.append(_export(folder, rec))
            elif name == "report.json" and producer == "vhmine eval":
                evals.append(_eval(folder, rec))
            elif name == "manifest.json" and producer == "vhmine embed" and folder.resolve() not in seen:
                index_list.append(_index(folder))
    store = _store_state(db)
    seeded = {str(Path(r["pairs"]).resolve()) for r in (store or {}).get("runs", [])}
    for r in runs:
        r.seeded = str((Path(r.folder) / "pairs.parquet").resolve()) in seeded
    runs.sort(key=lambda r: (r.created, r.written))
    exports.sort(key=lambda e: e.created)
    evals.sort(key=lambda e: e.written)
    status = Status(str(root.resolve()), index_list, runs, store, exports, evals, grown=outgrown(index_list, runs))
    status.next_step, status.also = _next(status)
    return status


def _shown(path) -> str:
    from vhmine.files import shown_path

    return shown_path(path)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


# --- what to do next ---------------------------------------------------------------------------


def _relax(run: RunInfo) -> str:
    near = run.nearby or {}
    for d, n in (near.get("dino") or {}).items():
        if n:
            return f"--clip {run.clip:g} --dino {d}"
    for c, n in (near.get("clip") or {}).items():
        if n:
            return f"--clip {c} --dino {run.dino:g}"
    return "--clip LOWER --dino HIGHER"


def _next(st: Status) -> tuple[str, list[str]]:
    from vhmine.files import shown_path

    also = []
    s = st.store or {}
    db = s.get("db_option", "")
    modes = s.get("modes") or []
    waiting = sum(m["drafts_waiting"] for m in modes)
    confirm = sum(m["yes_no_to_confirm"] for m in modes)
    if waiting:
        also.append(f"{waiting} model draft(s) wait on the app's Verify drafts page (vhmine curate{db})")
    if confirm:
        also.append(f"{confirm} drafted yes/no question(s) wait for their author to confirm them on the Annotate page")
    flags = [
        (s.get("errata_open", 0), "erratum flag(s) for an admin on the Errata page"),
        (s.get("blind_flags_open", 0), "blind flag(s) on the Blind flags page"),
        (s.get("near_duplicates_open", 0), "near-duplicate pair(s) on the Blind flags page"),
        (
            s.get("contradictions_open", 0),
            "yes/no question(s) whose open answers now contradict a person's truth, "
            "for an admin on the Errata page (they stay ready until then)",
        ),
    ]
    also += [f"{n} {what}" for n, what in flags if n]
    if s.get("held_kinds"):
        also.append(
            f"{_held_line(s)}: restore the image files (or run `vhmine embed` again where they moved); the tasks "
            "come back to the queues by themselves"
        )

    finished = [i for i in st.indexes if i.finished]
    if not finished:
        if st.indexes:
            i = st.indexes[0]
            return (
                f"finish embedding {i.name!r}: run the same `vhmine embed` command again ({i.shards_done} shard(s) "
                "kept; it resumes)",
                also,
            )
        return "vhmine embed FOLDER --name NAME   (or `vhmine demo` to see every stage run first)", also
    if not st.runs:
        from vhmine.config import mine_command

        return mine_command(Path(finished[-1].folder)), also
    if st.grown:  # said with the run; the next step only once nothing more urgent is left (_unless_grown)
        also.append(f"index '{st.grown[0]['index']}' changed since its last run: {st.grown[0]['command']}")
    with_pairs = [r for r in st.runs if r.pairs]
    if not with_pairs:
        r = st.runs[-1]
        return f"vhmine mine --index {shlex.quote(r.index)} {_relax(r)}   (the last run, {r.name}, found 0 pairs)", also
    if s.get("needs"):  # a store is there, but this install cannot read it: whether the runs were seeded is unknown
        return f"{s['needs']}   (the store's counts need it; then `vhmine status` again)", also
    if not any(r.seeded for r in with_pairs) or not s or s.get("problem"):
        return _seed_next(st, with_pairs, db), also
    if not s.get("workers_active"):
        return f"vhmine workers add NAME{db}   (prints the sign-in token)", also
    ready = sum(m["ready"] for m in modes)
    left = sum(m["open"] for m in modes)
    if not ready:
        return _unless_grown(
            st, f"vhmine curate{db}   ({left} task(s) left to annotate; nothing ready to export yet)", also
        )
    from vhmine.rules import balanced_option

    # an export with the option that balances yes/no, as the export would otherwise stop and ask for it
    per = balanced_option({m: tuple(v) for m, v in (s.get("ready_yes_no") or {}).items()})
    if not st.exports:
        return f"vhmine export --format vhtest --out benchmarks/vh-v1{per}{db}   ({ready} question(s) ready)", also
    last = st.exports[-1]
    where = shown_path(last.folder)
    # an eval names its benchmark by the manifest's checksum (an older one by the path it was given)
    if not any((e.sha256 and e.sha256 == last.manifest_sha256) or same_folder(e.source, last.folder) for e in st.evals):
        return f"vhmine eval --bench {where} --model MODEL   (or --predictions NAME=FILE)", also
    if ready != last.items:
        return (
            f"vhmine export --format {last.format} --out benchmarks/NEW --since {where}{per}{db}   "
            f"({ready} question(s) ready, {last.items} in {where}: a new version with a changelog)",
            also,
        )
    if left:
        return _unless_grown(st, f"vhmine curate{db}   ({left} task(s) left to annotate)", also)
    return _unless_grown(st, "every stage has run; mine more pairs or generate images to grow the benchmark", also)


def _seed_next(st: Status, with_pairs: list[RunInfo], db: str) -> str:
    """Seed the newest run with pairs whose thresholds mine did not warn about; when every such run was warned
    about (reversed thresholds: its pairs are mostly near-duplicates), mine its index again at the defaults."""
    from vhmine.config import mine_command
    from vhmine.files import shown_path

    good = [r for r in with_pairs if not r.warned]
    if good:
        return f"vhmine seed --pairs {shown_path(Path(good[-1].folder) / 'pairs.parquet')}{db}"
    r = with_pairs[-1]
    folder = next((i.folder for i in st.indexes if i.finished and same_folder(i.folder, r.index_folder)), None)
    folder = folder or next((i.folder for i in st.indexes if i.finished and i.name == r.index), None)
    mine = mine_command(Path(folder)) if folder else f"vhmine mine --index {shlex.quote(r.index)}"
    return f"{mine}   (run {r.name} was mined with {r.warned}, which mine warned about: not one to seed)"


def _held_line(s: dict) -> str:
    """How many of the store's tasks are held, and why (curate.work.holds)."""
    n = sum(m.get("held", 0) for m in s.get("modes") or [])
    why = ", ".join(f"{kind}: {k}" for kind, k in sorted(s["held_kinds"].items()))
    return f"{n} task(s) out of the queues while an image is missing or changed ({why})"


def _unless_grown(st: Status, step: str, also: list[str]) -> tuple[str, list[str]]:
    """Annotating on, or nothing left: then rerunning a grown index's run comes first (its new pairs, seeded,
    join the queues), and the step it displaced is said under "also"."""
    if not st.grown:
        return step, also
    g = st.grown[0]
    rest = [a for a in also if not a.startswith(f"index '{g['index']}' changed since")]
    return f"{g['command']}   (index '{g['index']}' changed since run {g['run']} mined it)", rest + [step]


# --- the text --------------------------------------------------------------------------------------


def _lines(st: Status) -> list[str]:
    out = ["indexes:" if st.indexes else "indexes: none (vhmine embed FOLDER --name NAME builds one)"]
    for i in st.indexes:
        if i.finished:
            out.append(
                f"  {i.name}: {i.images} images, {i.skipped} skipped"
                + (f", {i.duplicates} duplicates" if i.duplicates else "")
                + f"; encoders {i.clip} + {i.dino}"
            )
        else:
            out.append(f"  {i.name}: unfinished ({i.shards_done} shard(s) done); encoders {i.clip} + {i.dino}")
    out.append("mining runs:" if st.runs else "mining runs: none")
    for r in st.runs:
        out.append(
            f"  {r.name}: --clip {r.clip:g} --dino {r.dino:g}, {r.pairs} pairs"
            + (f", {r.index} x {r.against}" if r.against else "")
            + (" (seeded)" if r.seeded else "")
            + (f" (mine warned: {r.warned})" if r.warned else "")
            + f"  [{r.folder}]"
        )
        out += [f"    {outgrown_line(g)}" for g in st.grown if g["run_folder"] == r.folder]
    s = st.store
    if s is None:
        out.append("store: none yet (vhmine seed creates it)")
    elif s.get("problem"):
        out.append(f"store: {s['url']}: {s['problem']}")
    else:
        out.append(
            f"store: {s['url']}: {s['tasks']} tasks; workers {s['workers_active']} active "
            f"({s['workers_admin']} admin), {s['workers_inactive']} inactive"
        )
        out.append(
            f"  {'mode':<12} {'open':>6} {'done':>6} {'discarded':>9} {'ready':>6} {'drafts':>7} {'to confirm':>10}"
        )
        for m in s["modes"]:
            out.append(
                f"  {m['mode']:<12} {m['open']:>6} {m['done']:>6} {m['discarded']:>9} {m['ready']:>6} "
                f"{m['drafts_waiting']:>7} {m['yes_no_to_confirm']:>10}"
            )
        out.append(
            "  (drafts: model drafts to verify in the app; to confirm: drafted yes/no questions their author "
            "has not confirmed)"
        )
        if s.get("held_kinds"):
            out.append(f"  held: {_held_line(s)}")
        short = shortfall_line({m["mode"]: m["ready"] for m in s["modes"]}, "ready instances")
        if short:
            out.append(f"  {short}")
        out.append(
            f"  flags open: {s['errata_open']} errata, {s['blind_flags_open']} blind, "
            f"{s['near_duplicates_open']} near duplicates; person-queue: {s.get('contradictions_open', 0)} "
            "contradiction(s)"
        )
    out.append("exports:" if st.exports else "exports: none")
    for e in st.exports:
        out.append(f"  {e.folder}: {e.format}, version {e.version}, {e.items} items ({e.created})")
    shown = st.evals[-EVALS_SHOWN:]
    if len(st.evals) > len(shown):  # say so: a list cut short must not read as all there is
        out.append(f"evals: the last {len(shown)} of {len(st.evals)} (`vhmine status --json` lists all):")
    else:
        out.append("evals:" if st.evals else "evals: none")
    for e in shown:
        scores = ", ".join(
            f"{m} {100 * v['accuracy']:.1f}%" if isinstance(v.get("accuracy"), (int, float)) else f"{m} -"
            for m, v in e.models.items()
        )
        out.append(f"  {e.folder}/report.md: {e.benchmark} ({e.items} items): {scores}")
    out.append(f"next: {st.next_step}")
    out += [f"also: {a}" for a in st.also]
    return out
