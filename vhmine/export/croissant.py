"""`croissant.json`: MLCommons Croissant 1.0 metadata, with its Responsible-AI fields, for an export folder.

Reads the export folder's files (each file's sha256 and size) and what the export job knows: the benchmark,
its version, the datasheet facts from the store (vhmine.export.datasheet) and what only the publisher can
say (`Publication`: --license, --description, --citation); writes nothing itself (`build` returns the
JSON-LD, vhmine.export.job writes it before the manifest, which then checksums it too).

- distribution: every file of the folder except croissant.json and manifest.json, as a FileObject with its
  sha256 (and a FileSet over the images the record sets read, vhmine.export.croissant_records);
- record sets with typed fields (question, answers, truth, mode, kind, group, the image as sc:ImageObject),
  per format as croissant_records says;
- the RAI fields that apply, from the datasheet: how the images were collected (collection, mining encoders
  and thresholds, generators, edits), how the items were annotated (pseudonymous workers, model drafts that
  workers verified, agreement per mode), the blind-solver and near-duplicate filters, known limitations.
  What vhmine cannot know (licence, social impact, demographics) is the publisher's word or says
  plainly that it is unspecified. Two RAI properties are written in both the vocabulary's spelling and
  mlcroissant 1.1's (dataCollectionTimeframe / TimeFrame, dataManipulationProtocol / dataDataManipulationProtocol).
"""

from __future__ import annotations

from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.export.datasheet import Publication, describe_list

FILE = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
SKIP = (FILE, "manifest.json")  # croissant.json cannot hold its own checksum; the manifest holds croissant.json's
UNSPECIFIED = "unspecified"

# the standard Croissant 1.0 context (mlcroissant's make_context()) and the RAI namespace
CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
ENCODINGS = {
    ".parquet": "application/x-parquet",
    ".jsonl": "application/jsonlines",
    ".json": "application/json",
    ".tsv": "text/tab-separated-values",
    ".csv": "text/csv",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".webp": "image/webp",
    ".md": "text/markdown",
    ".html": "text/html",
    ".yaml": "application/yaml",
    ".py": "text/x-python",
}


def encoder_spec(encoders: dict | None, kind: str) -> str:
    """An encoder's spec from a run's or a check's record, or 'unrecorded'."""
    e = (encoders or {}).get(kind)
    return str((e.get("spec") if isinstance(e, dict) else e) or "unrecorded")


def file_id(rel: str) -> str:
    """A file's `@id`: its path, whitespace as `_` (mlcroissant takes no `@id` with a space, even URL-escaped; MMVP's
    images live in `MMVP Images/`); `contentUrl` keeps the path as it is."""
    return "_".join(rel.split(" "))


def file_objects(folder: Path) -> list[dict]:
    from vhmine.images import sha256_file

    out = []
    for p in sorted(q for q in Path(folder).rglob("*") if q.is_file()):
        rel = p.relative_to(folder).as_posix()
        if rel in SKIP:
            continue
        out.append(
            {
                "@type": "cr:FileObject",
                "@id": file_id(rel),
                "name": rel,
                "contentUrl": rel,
                "contentSize": f"{p.stat().st_size} B",
                "encodingFormat": ENCODINGS.get(p.suffix.lower(), "application/octet-stream"),
                "sha256": sha256_file(p),
            }
        )
    return out


def summary(bench: Benchmark, name: str, version: str) -> str:
    """One factual paragraph: what the benchmark holds and how it was made."""
    kinds = {k: sum(1 for it in bench if it.kind == k) for k in ("OEQ", "YNQ")}
    modes = bench.modes()
    return (
        f"{name} (version {version}): a visual-hallucination benchmark for vision-language models, {len(bench)} "
        f"question(s) ({kinds['OEQ']} open-ended, {kinds['YNQ']} yes/no) about images in {len(modes)} mode(s) "
        f"({describe_list(modes)}), curated with vhmine."
    )


def _collection(sheet: dict) -> tuple[str, list[str]]:
    """(rai:dataCollection, rai:dataCollectionType) from the datasheet."""
    col = sheet["collection"]
    parts = [f"{col['images']} image(s) ({', '.join(f'{n} {s}' for s, n in col['by_source'].items()) or 'none'})."]
    types = []
    for r in col["runs"]:
        enc = r["encoders"]
        parts.append(
            f"{r['pairs']} mined pair(s) from run {r['run']} over index {r['index'] or UNSPECIFIED}: pairs that "
            f"CLIP ({encoder_spec(enc, 'clip')}) embeds alike, cosine >= "
            f"{r['clip_threshold']}, and DINOv2 ({encoder_spec(enc, 'dino')}) apart, "
            f"cosine <= {r['dino_threshold']}."
        )
    if col["runs"]:
        types.append("Mined image pairs (CLIP-alike, DINOv2-apart) from an image collection")
    if col["pairs_without_run"]:
        parts.append(f"{col['pairs_without_run']} pair(s) seeded with no mining run recorded.")
    for g in sheet["generated"]:
        parts.append(
            f"{g['images']} image(s) generated by {g['model']} ({g['backend']})"
            + (
                f" from prompts written by {describe_list(g['prompt_models'])} with {describe_list(g['prompts'])}"
                if g["prompt_models"]
                else ""
            )
            + (
                f", describing each mode's successes as summarised by {describe_list(g['description_models'])}"
                if g["description_models"]
                else ""
            )
            + "."
        )
    if sheet["generated"]:
        types.append("Generated images (text-to-image models)")
    if sheet["manipulated"]:
        types.append("Edited images (objects inserted or removed)")
    parts.append("Questions and reference answers were written in the curation app (see the annotation protocol).")
    types.append("Manual Human Curation")
    return " ".join(parts), types


def _manipulation(sheet: dict) -> str:
    if not sheet["manipulated"]:
        return "No image was edited."
    return " ".join(
        f"{m['images']} image(s) edited by {m['strategy']} with {m['edit_backend']}"
        + (f", targets chosen by {describe_list(m['priors'])}" if m["priors"] else "")
        + (f", against {describe_list(m['victims'])}" if m["victims"] else "")
        + "."
        for m in sheet["manipulated"]
    )


def annotation_lines(sheet: dict) -> list[str]:
    """How the items were annotated, one sentence each (also the dataset card's)."""
    a = sheet["annotation"]
    out = [
        f"{a['workers']} worker(s), named by pseudonyms (w-…) in manifest.json, wrote every item in"
        f" {sheet['platform']}: for each image of a mined pair, an open question from the mode's templates and a"
        " reference answer; yes/no variants were drafted from those answers by rule and confirmed or rejected by the"
        " same worker."
    ]
    if a["from_model_drafts"]["items"]:
        out.append(
            f"{a['from_model_drafts']['items']} item(s) started as model drafts ("
            + "; ".join(
                f"{d['model']} with prompt {d['prompt']}: {d['accepted']} accepted, {d['edited']} edited"
                for d in a["from_model_drafts"]["drafts"]
            )
            + ") that a worker verified in the same form."
        )
    if a["own_questions"]:
        out.append(f"{a['own_questions']} question(s) were written freely rather than from a template.")
    n = sum(a["reviewed"].values())
    out.append(
        f"{n} item(s) were answered blind (without the reference) by a second worker, to measure agreement."
        if n
        else "No item was reviewed blind by a second worker."
    )
    return out


def agreement_lines(sheet: dict) -> list[str]:
    out = []
    for m, g in sheet["annotation"]["agreement"].items():
        if not g["items"]:
            out.append(f"{m}: no blind reviews, agreement not measured.")
        else:
            stat = {"cohen": "Cohen's kappa", "fleiss": "Fleiss' kappa"}.get(g["statistic"], "kappa")
            k = "undefined (one category only)" if g["kappa"] is None else f"{g['kappa']:.3f}"
            out.append(
                f"{m}: {stat} {k} over {g['items']} item(s), {g['raters']} worker(s), {g['disagreements']}"
                " disagreement(s)."
            )
    return out


def filter_lines(sheet: dict) -> list[str]:
    """The blind-solver and near-duplicate filters, as they ran (also the dataset card's)."""
    b, d = sheet["blind"], sheet["near_duplicates"]
    if b["ran"]:
        out = [
            "Blind solvers (asked without the image): "
            + "; ".join(f"{s['model']} with {s['prompt']}" for s in b["solvers"])
            + (
                f". Items every blind answer got right were left out (--drop-blind): {b['left_out']}."
                if b["drop_blind"]
                else ". Items they answered right were kept (exported without --drop-blind)."
            )
        ]
    else:
        out = ["No blind-solver check ran."]
    if d["ran"]:
        t = d.get("thresholds") or {}
        enc = d.get("encoders") or {}
        out.append(
            f"Near duplicates (CLIP {encoder_spec(enc, 'clip')} cosine >= {t.get('clip')} and DINOv2 "
            f"{encoder_spec(enc, 'dino')} cosine >= {t.get('dino')}): {d['within_export']} pair(s) within "
            "the benchmark, "
            + (f"{d['against_reference']} against reference {d['reference']}, " if d["reference"] else "")
            + f"{d['generated_against_source']} generated image(s) near their source; listed in "
            "near_duplicates.html, none removed."
            + (
                ""
                if d["reference"]
                else " The images were not checked against a reference collection (export --against)."
            )
        )
    else:
        out.append(f"The near-duplicate check did not run: {d['reason']}.")
    return out


def rai_fields(bench: Benchmark, fmt: str, sheet: dict | None, pub: Publication, version: str) -> dict:
    """The RAI properties that apply (see the module docstring)."""
    dates = sorted(it.meta["created_at"][:10] for it in bench if isinstance(it.meta.get("created_at"), str))
    licence = pub.license or f"{UNSPECIFIED} (vhmine records no licence; the publisher gives it with --license)"
    out = {
        "rai:dataUseCases": [
            "Evaluating vision-language models for visual hallucination: "
            + (
                "the test split evaluates, the train split fine-tunes (image groups never cross splits)."
                if fmt == "llava"
                else "a test set, not for training."
            )
        ],
        "rai:dataImputationProtocol": "None: no value is imputed; an answer a worker could not give is kept as such.",
        "rai:dataSocialImpact": f"{UNSPECIFIED} by the publisher.",
        "rai:dataReleaseMaintenancePlan": (
            f"Version {version}. A later version is exported with `vhmine export --since` "
            "against this one and lists every item added, removed or changed in "
            "CHANGELOG.md; errata flagged by workers are decided in the curation app."
        ),
    }
    if sheet is None:
        out["rai:dataLimitations"] = [
            "Written without a curation store: how the items were collected and annotated is not recorded.",
            f"Licence: {licence}.",
        ]
        out["rai:dataCollection"] = f"{UNSPECIFIED}: not recorded (no curation store)."
        return out
    collection, types = _collection(sheet)
    lines = annotation_lines(sheet)
    runs = sheet["collection"]["runs"]
    out.update(
        {
            "rai:dataCollection": collection,
            "rai:dataCollectionType": types,
            # the benchmark's --license is the publisher's for the questions and annotations: the images keep their own
            "rai:dataCollectionRawData": (
                "The images of the source collection(s)"
                f" ({describe_list(sorted({r['index'] for r in runs if r['index']})) or UNSPECIFIED});"
                f" their licence is that of their source collection, which vhmine does not record: {UNSPECIFIED} by the"
                " publisher."
            ),
            "rai:dataCollectionMissingData": (
                "None: the export refuses an item whose image is missing or no longer matches its recorded sha256."
            ),
            "rai:dataPreprocessingProtocol": [
                (
                    "VHTest's layout: images converted to PNG."
                    if fmt == "vhtest"
                    else "MMVP's layout: images as JPEG (JPEG kept byte for byte, others converted at quality 95 with"
                    " no chroma subsampling)."
                    if fmt == "mmvp"
                    else "Images exported byte for byte as the store holds them (sha256 checked at export)."
                ),
                (
                    "Yes/no questions are balanced 50/50 within each mode unless the manifest's options say"
                    " --allow-unbalanced."
                ),
                *filter_lines(sheet),
            ],
            "rai:dataManipulationProtocol": _manipulation(sheet),
            "rai:dataAnnotationProtocol": lines,
            "rai:dataAnnotationPlatform": [sheet["platform"]],
            "rai:dataAnnotationAnalysis": agreement_lines(sheet) or ["No agreement measured."],
            "rai:annotationsPerItem": (
                f"1 author per item; {sum(sheet['annotation']['reviewed'].values())} of {len(bench)} "
                "item(s) also answered blind by a second worker."
            ),
            "rai:annotatorDemographics": [
                f"{UNSPECIFIED}: vhmine records no demographics of its {sheet['annotation']['workers']} worker(s)."
            ],
            "rai:machineAnnotationTools": (
                [
                    f"{d['model']} (prompt {d['prompt']}): drafted {d['accepted'] + d['edited']} item(s) "
                    "that workers verified"
                    for d in sheet["annotation"]["from_model_drafts"]["drafts"]
                ]
                + [f"{s['model']} (prompt {s['prompt']}): blind solver" for s in sheet["blind"]["solvers"]]
                or ["None: every item was written by a worker."]
            ),
            "rai:dataBiases": [
                (
                    "Modes and templates are VHTest's eight (counting, shape, color, orientation, size, position, "
                    "OCR, existence), in English; the items reflect what the source collection shows."
                ),
                *(
                    [
                        "Images were selected where CLIP and DINOv2 disagree, which favours the failure modes of "
                        "CLIP-style vision encoders."
                    ]
                    if sheet["collection"]["runs"]
                    else []
                ),
            ],
            "rai:dataLimitations": sheet["limitations"] + ([f"Licence: {licence}."] if not pub.license else []),
            "rai:personalSensitiveInformation": [
                (
                    "Worker names are replaced by pseudonyms."
                    if not sheet.get("with_provenance")
                    else "Worker names and paths are included (exported --with-provenance, for internal use)."
                ),
                f"Images: {UNSPECIFIED}; vhmine does not screen them for people or personal data.",
            ],
        }
    )
    if dates:
        out["rai:dataCollectionTimeframe"] = out["rai:dataCollectionTimeFrame"] = [dates[0], dates[-1]]
    out["rai:dataDataManipulationProtocol"] = out["rai:dataManipulationProtocol"]  # mlcroissant 1.1's spelling
    return out


def build(
    folder: Path,
    fmt: str,
    bench: Benchmark,
    *,
    name: str,
    version: str,
    created_at: str,
    sheet: dict | None = None,
    pub: Publication = Publication(),
) -> dict:
    """The Croissant JSON-LD of export folder `folder` (every file but croissant.json and the manifest written)."""
    from vhmine.export.croissant_records import describe

    file_sets, record_sets, note = describe(fmt, Path(folder), bench)
    text = summary(bench, name, version)
    description = (
        (pub.description.strip() + "\n\n" + text)
        if pub.description
        else (text + " The publisher gave no further description (vhmine export --description).")
    )
    if note:
        description += " " + note
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": name,
        "description": description,
        "license": pub.license or f"{UNSPECIFIED}: the publisher gave no licence (vhmine export --license)",
        "citeAs": pub.citation or f"{UNSPECIFIED}: the publisher gave no citation (vhmine export --citation)",
        "version": version,
        "datePublished": created_at[:10],
        "isLiveDataset": False,
        "keywords": ["visual question answering", "hallucination", "vision-language models", "benchmark", "vhmine"],
        **rai_fields(bench, fmt, sheet, pub, version),
        "distribution": file_objects(folder) + file_sets,
        "recordSet": record_sets,
    }
