"""Near duplicates and contamination: the exported images checked against each other and a reference.

Reads the export's image files, finished indexes written by `vhmine embed` (vhmine.index: their
manifests name the encoders, their FAISS files hold the vectors) and the store's runs (run.json of
`vhmine mine`: the index each mined pair came from). Writes nothing itself: `check_near_duplicates`
returns the manifest's `near_duplicates` section and the page `near_duplicates.html`, which
vhmine.export.job puts in the benchmark folder.

Encoders: those recorded in the `--against` index's manifest, else those of the index the images were
mined from. An exported image that such an index holds (the same bytes, in an index with the same encoders
and precision) takes its vectors from it; only the others (generated images, say) are embedded, in that
precision, so their vectors compare with the index's, and the encoders load only then (export.dupvectors).
A near duplicate is a pair whose CLIP cosine AND DINOv2 cosine both reach their thresholds (`--dup-clip`,
`--dup-dino`, both inclusive). Three checks, each listed with its similarities:

- within the export: every pair of exported images, exactly (vhmine.mine.join: a float64 brute force for up to
  SMALL_WITHIN images, find_pairs past that);
- against the reference (`--against INDEX`, e.g. COCO train2017): every exported image's neighbours in
  the index (faiss range search on CLIP, on GPUs where faiss has them, then DINOv2), an image with the same
  bytes marked `exact`;
- generated images (store source "generated") against the collection they came from: the indexes the
  store's mining runs were made from, whose encoders match.

Every decision is recorded with the encoders that made it and the thresholds it used, in the manifest and
in the store's `near_duplicates` table (vhmine.curate.work.neardups: a worker can overrule a pair with a reason;
the manifest then lists it as overruled, by whom: a pseudonym unless --with-provenance). Nothing is
dropped: the list is for the maintainer to read (and the page shows each pair side by side).

The check is on by default (`vhmine export`; `--no-near-dups` turns it off). When it cannot run (no
mining run names an index, e.g. a store seeded from a hand-written pairs table; the index or its encoder
files are gone), `not_run` makes the manifest say so and why, and the export goes on; with an explicit
`--near-dups` or `--against` (`DupOptions.required`) that is an error instead.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.errors import EncoderError, InputError
from vhmine.export.dupvectors import encoder_specs, exported_vectors
from vhmine.index import open_named_index

log = logging.getLogger(__name__)

DEFAULT_DUP_CLIP = 0.95
DEFAULT_DUP_DINO = 0.90
PAGE = "near_duplicates.html"


@dataclass(frozen=True)
class DupOptions:
    against: str | None = None  # a reference index: its name under `indexes`, or its folder
    indexes: Path | None = None  # [default: VHMINE_INDEXES or ./indexes]
    clip_min: float = DEFAULT_DUP_CLIP
    dino_min: float = DEFAULT_DUP_DINO
    device: str | None = None
    batch_size: int = 32
    progress: bool = True  # progress bars on stderr (embedding the images, the searches)
    required: bool = False  # asked for explicitly: a check that cannot run is an error, not a note


@dataclass
class DupReport:
    manifest: dict
    files: dict = field(default_factory=dict)  # file name -> text, written into the export folder
    note: str = ""


def not_run(reason: str) -> DupReport:
    """The manifest section of a check that did not run, saying why (never silently)."""
    return DupReport({"ran": False, "reason": reason}, {}, f"near duplicates: NOT checked ({reason})")


def home_indexes(store, load: bool = True) -> tuple[list, list[str]]:
    """The finished indexes the store's mining runs came from (run.json's index_folder), and notes on
    those that cannot be opened. `load` False: their manifests only (checked), not their vectors and tables."""
    from sqlalchemy import select

    from vhmine.errors import IndexCorruptError, IndexMissingError
    from vhmine.store import Run

    with store.session(write=False) as s:
        metas = [(name, meta) for name, meta in s.execute(select(Run.name, Run.meta).order_by(Run.seeded_at, Run.name))]
    out, notes, seen = [], [], set()
    for run, meta in metas:
        folder = (meta or {}).get("index_folder") if isinstance(meta, dict) else None
        if not folder or folder in seen:
            continue
        seen.add(folder)
        try:
            out.append(open_named_index(folder, None, load=load))
        except (IndexMissingError, IndexCorruptError) as err:
            notes.append(f"run {run}: its index cannot be read ({err}); generated images not checked against it")
    return out, notes


def _encoder_record(idx, public: bool) -> dict:
    from vhmine.export.privacy import public_spec

    enc = idx.manifest["encoders"]
    # `model` is open_clip's model name, which for `local-dir:` specs is the folder itself: public too
    return {
        k: {
            "spec": public_spec(enc[k]["spec"], public),
            "model": public_spec(enc[k]["model"], public) if enc[k].get("model") else enc[k].get("model"),
            "dim": enc[k].get("dim"),
        }
        for k in ("clip", "dino")
    }


# An export with at most this many images is checked within itself in numpy float64 (brute_force_pairs, the
# join's own definition), without the torch import find_pairs needs: that import takes longer than the check.
SMALL_WITHIN = 512


def _within(clip, dino, o: DupOptions) -> list[tuple[int, int, float, float]]:
    from vhmine.mine import brute_force_pairs, find_pairs

    if len(clip) < 2:
        return []
    if len(clip) <= SMALL_WITHIN:
        found = brute_force_pairs(clip, dino, o.clip_min)
    else:
        st: dict = {}
        found = find_pairs(
            clip, dino, o.clip_min, device=o.device, progress=o.progress, desc="near duplicates: within", stats=st
        )
        if st.get("kernel_line"):
            log.info("near duplicates: %s", st["kernel_line"])  # (once: the join itself says it only at DEBUG)
    return [
        (int(i), int(j), float(c), float(d))
        for i, j, c, d in zip(found.i, found.j, found.clip_sim, found.dino_sim)
        if d >= o.dino_min
    ]


def _against(clip, dino, idx, o: DupOptions, rows: list[int]) -> list[tuple[int, int, float, float]]:
    """(exported row, index row, clip, dino) for every neighbour in `idx` past both thresholds (the search
    runs on the GPUs where the installed faiss has them: embed.search)."""
    import numpy as np

    from vhmine.embed import range_search

    if not rows or not len(idx.clip):
        return []
    from tqdm import tqdm

    # a little below the threshold: faiss's float32 sums (CPU or GPU) are re-checked in float64 below
    lims, _, found = range_search(idx.clip, clip[rows], float(o.clip_min) - 1e-4)
    out = []
    for q, row in enumerate(
        tqdm(rows, desc=f"near duplicates: against {idx.name}", unit="img", disable=not o.progress or len(rows) < 1000)
    ):
        for k in found[lims[q] : lims[q + 1]]:
            c = float(np.dot(clip[row].astype(np.float64), idx.clip[k].astype(np.float64)))
            d = float(np.dot(dino[row].astype(np.float64), idx.dino[k].astype(np.float64)))
            if c >= o.clip_min and d >= o.dino_min:
                out.append((row, int(k), c, d))
    return out


def check_near_duplicates(store, bench, o: DupOptions, *, public: bool = True) -> DupReport:
    """The `near_duplicates` manifest section and page for the images of `bench` (see the module docstring)."""
    from vhmine.embed import kept
    from vhmine.export.privacy import collection_roots, public_path
    from vhmine.images import image_sha256, sha256_file
    from vhmine.index import manifest_sha256

    if not (0 < o.clip_min <= 1 and 0 < o.dino_min <= 1):
        raise InputError(f"--dup-clip {o.clip_min:g} / --dup-dino {o.dino_min:g}: thresholds are cosines in (0, 1]")
    ref = open_named_index(o.against, o.indexes) if o.against else None
    homes, notes = home_indexes(store)
    roots = collection_roots(homes)  # paths shown as everywhere in an export
    basis = ref or (homes[0] if homes else None)
    if basis is None:
        why = (
            "the store's mining runs name no index (e.g. seeded from a hand-written pairs table)"
            if not notes
            else "; ".join(notes)
        )
        if not o.required:
            return not_run(
                f"no encoders to embed the images with: {why}; pass --against INDEX to check "
                "against a `vhmine embed` index"
            )
        raise InputError(
            f"{why}: the near-duplicate check needs the encoders of an index: pass --against INDEX (a "
            "`vhmine embed` index; its encoders are used), or export a store seeded from a `vhmine mine` "
            "run whose index is still there"
        )
    try:
        clip_spec, dino_spec = encoder_specs(basis)
    except InputError as err:
        if o.required:
            raise
        return not_run(str(err))
    same = [h for h in homes if encoder_specs(h) == (clip_spec, dino_spec)]
    notes += [
        f"index {h.name!r} has other encoders than {basis.name!r}: generated images not checked against it"
        for h in homes
        if h not in same
    ]

    images: dict[str, dict] = {}  # image id -> what the manifest says of it, plus its file
    for it in bench:
        iid = it.meta.get("image_id") or it.image_id
        e = images.setdefault(
            iid,
            {
                "image_id": iid,
                "sha256": it.meta.get("image_sha256"),
                "source": it.meta.get("image_source"),
                "instances": [],
                "_file": str(bench.image_path(it)),
            },
        )
        e["instances"].append(it.id)
    ids = sorted(images)
    files = [images[i]["_file"] for i in ids]
    for i in ids:
        # a file or a tar member; one that cannot be read: sha256_file raises the OSError that says why
        images[i]["sha256"] = (
            images[i]["sha256"] or image_sha256(images[i]["_file"]) or sha256_file(Path(images[i]["_file"]))
        )
        images[i]["path"] = public_path(images[i]["_file"], roots) if public else images[i]["_file"]
    if not files:
        return not_run("no images exported")
    try:
        shas = [images[i]["sha256"] for i in ids]
        indexes = [x for x in (ref, *homes) if x is not None]
        clip, dino, reused = exported_vectors(
            files, shas, basis, indexes, device=o.device, batch_size=o.batch_size, progress=o.progress
        )
    except EncoderError as err:  # the index is there, its encoders' files are not
        if o.required:
            raise
        return not_run(f"the encoders of index {basis.name!r} cannot be loaded ({err})")

    def mine(k: int) -> dict:
        return dict(images[ids[k]])

    def theirs(idx, k: int) -> dict:
        r = idx.images.iloc[k]
        return {
            "index": idx.name,
            "image_id": str(r["image_id"]),
            "sha256": str(r["sha256"]),
            "path": str(r["path"]),
            "_file": str(idx.root / r["path"]),
        }

    def entry(a: dict, b: dict, c: float, d: float) -> dict:
        return {"a": a, "b": b, "clip": round(c, 6), "dino": round(d, 6), "exact": a["sha256"] == b["sha256"]}

    within = [entry(mine(i), mine(j), c, d) for i, j, c, d in _within(clip, dino, o)]
    against = (
        [entry(mine(i), theirs(ref, k), c, d) for i, k, c, d in _against(clip, dino, ref, o, list(range(len(ids))))]
        if ref is not None
        else []
    )
    generated_rows = [k for k, i in enumerate(ids) if images[i]["source"] == "generated"]
    generated = []
    for h in same:
        if ref is not None and h.folder == ref.folder:  # already searched: the reference is their source
            generated += [e for e in against if e["a"]["source"] == "generated"]
        else:
            generated += [
                entry(mine(i), theirs(h, k), c, d) for i, k, c, d in _against(clip, dino, h, o, generated_rows)
            ]
    for lst in (within, against, generated):
        lst.sort(key=lambda e: (-e["clip"], -e["dino"], e["a"]["image_id"], e["b"]["image_id"]))

    decided_by = {
        "encoders": _encoder_record(basis, public),
        "encoders_from_index": basis.name,
        "precision": kept(basis.manifest),
        "vectors": {"from_indexes": reused, "embedded": len(ids) - reused},
        "thresholds": {
            "clip": o.clip_min,
            "dino": o.dino_min,
            "inclusive": True,
            "rule": "CLIP cosine >= clip AND DINOv2 cosine >= dino",
        },
    }
    _record(store, {"within": within, "reference": against, "generated": generated}, basis, decided_by, public)

    def strip(lst: list[dict]) -> list[dict]:  # the files' own paths stay out of the manifest
        return [{**e, **{s: {k: v for k, v in e[s].items() if not k.startswith("_")} for s in ("a", "b")}} for e in lst]

    section = {
        "ran": True,
        "decided_by": decided_by,
        "images_checked": len(ids),
        "reference": (
            {"index": ref.name, "images": int(len(ref.images)), "manifest_sha256": manifest_sha256(ref.folder)}
            if ref is not None
            else None
        ),
        "generated_checked_against": [h.name for h in same] if generated_rows else [],
        "overruled": sum(1 for lst in (within, against, generated) for e in lst if e["overruled"]),
        "within_export": strip(within),
        "against_reference": strip(against),
        "generated_against_source": strip(generated),
        "page": PAGE,
        "notes": notes,
    }
    page = _page(section, within, against, generated)
    note = (
        f"near duplicates: {len(within)} pair(s) within the export, {len(against)} against "
        f"{ref.name if ref is not None else 'no reference'}, {len(generated)} generated image(s) near their source "
        f"collection (CLIP >= {o.clip_min:g}, DINOv2 >= {o.dino_min:g}; see {PAGE})"
    )
    return DupReport(section, {PAGE: page}, note)


def _record(store, found: dict[str, list[dict]], basis, decided_by: dict, public: bool) -> None:
    """Store every pair (vhmine.curate.work.neardups, with this machine's encoder specs) and mark each entry with
    its stored id and any worker's overrule (who: a pseudonym when `public`)."""
    from vhmine import curate
    from vhmine.export.privacy import pseudonym, pseudonym_key

    rows = [
        {
            "scope": scope,
            "a_image": e["a"]["image_id"],
            "a_sha256": e["a"]["sha256"],
            "b_index": e["b"].get("index"),
            "b_image": e["b"]["image_id"],
            "b_sha256": e["b"]["sha256"],
            "b_path": e["b"].get("_file") if "index" in e["b"] else None,
            "clip": e["clip"],
            "dino": e["dino"],
            "exact": e["exact"],
        }
        for scope, lst in found.items()
        for e in lst
    ]
    overrules = curate.work.record_near_duplicates(
        store, rows, encoders=_encoder_record(basis, False), thresholds=decided_by["thresholds"]
    )
    key = pseudonym_key(store) if public and any(overrules.values()) else None
    for scope, lst in found.items():
        for e in lst:
            e["id"] = curate.work.near_duplicate_id(scope, e["a"]["image_id"], e["b"].get("index"), e["b"]["image_id"])
            o = overrules.get(e["id"])
            e["overruled"] = (
                None
                if o is None
                else {
                    "by": pseudonym(o.by, key) if key else o.by,
                    "at": o.at.isoformat(timespec="seconds") + "Z",
                    "reason": o.reason,
                }
            )


def _cell(e: dict) -> str:
    """One image: a thumbnail (gallery.thumbnail_data_url, so the page is self-contained) and what it is."""
    from vhmine.mine import thumbnail_data_url

    url = thumbnail_data_url(e["_file"]) if e.get("_file") else None
    img = f'<img src="{url}" alt="{html.escape(e["image_id"])}">' if url else "<em>(image unreadable)</em>"
    where = f"index {e['index']}: " if "index" in e else ""
    inst = f"<br>instances: {html.escape(', '.join(e['instances']))}" if e.get("instances") else ""
    return (
        f"<td>{img}<div class=meta>{html.escape(where + e['image_id'])}<br>{html.escape(e.get('path') or '')}"
        f"{inst}</div></td>"
    )


def _overrule_text(o: dict | None) -> str:
    return f"by {o['by']}: {o['reason']}" if o else "no"


def _page(section: dict, *lists: list[dict]) -> str:
    from vhmine.mine import PAGE_HEAD

    enc = section["decided_by"]["encoders"]
    th = section["decided_by"]["thresholds"]
    ref = section["reference"]
    titles = (
        "Within the export",
        f"Against the reference {ref['index']}" if ref else "Against a reference (none given)",
        "Generated images against the collection they came from",
    )
    parts = [
        PAGE_HEAD.format(
            title="Near duplicates",
            subtitle=html.escape(
                f"{section['images_checked']} exported images; CLIP >= {th['clip']:g} and DINOv2 >= {th['dino']:g} "
                f"(CLIP {enc['clip']['spec']}, DINOv2 {enc['dino']['spec']})"
            ),
        )
    ]
    for title, rows in zip(titles, lists):
        parts.append(f"<h2>{html.escape(title)}: {len(rows)}</h2>")
        if not rows:
            parts.append("<p>None.</p>")
            continue
        parts.append(
            "<table><tr><th>exported image</th><th>near duplicate</th><th>CLIP</th><th>DINOv2</th>"
            "<th>same bytes</th><th>overruled</th></tr>"
        )
        for e in rows:
            parts.append(
                f"<tr>{_cell(e['a'])}{_cell(e['b'])}<td class=num>{e['clip']:.4f}</td>"
                f"<td class=num>{e['dino']:.4f}</td><td>{'yes' if e['exact'] else 'no'}</td>"
                f"<td>{html.escape(_overrule_text(e.get('overruled')))}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
