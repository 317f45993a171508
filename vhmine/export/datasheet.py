"""What an export's datasheet says about how the benchmark was made: facts the curation store records.

Reads the store (images and their sources, mining runs with their encoders and thresholds, generations and
manipulations, the instances' authors and the actions that made them, model drafts workers verified, blind
reviews and their agreement per mode) for the exported items, plus the blind-solver and near-duplicate
sections the export job computed; writes nothing. `gather` returns the manifest's `datasheet` section, from
which vhmine.export.croissant fills the Responsible-AI fields and vhmine.export.card the dataset card's
"How it was made". Workers appear as their export pseudonyms (export.privacy) unless `with_provenance`;
endpoints and machine paths never do. `limitations` lists what the facts imply a reader should know
(small modes, single authors, checks that did not run); nothing here is a guess about what the store
does not record (licences, demographics): those stay unspecified.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from vhmine.bench import OEQ, YNQ, Benchmark


@dataclass(frozen=True)
class Publication:
    """What only the publisher can say (vhmine export --license, --description, --citation); None: unspecified."""

    license: str | None = None  # a Hugging Face licence id (cc-by-4.0) or a URL
    description: str | None = None
    citation: str | None = None  # e.g. BibTeX


PLATFORM = "vhmine's curation app (Streamlit, self-hosted; workers sign in with a personal token)"


def margin_pp(n: int) -> float:
    """The 95% margin, in percentage points, of an accuracy measured on n items (at 50%, its widest)."""
    return 100 * 1.96 * math.sqrt(0.25 / n) if n else math.inf


def _public_name(name: str | None, public: bool) -> str | None:
    """A model name as an export may show it: a local folder becomes its public path (export.privacy)."""
    from vhmine.export.privacy import public_spec

    return public_spec(name, public) if name else name


def _in_chunks(s, stmt_of, ids: list):
    out = []
    for k in range(0, len(ids), 500):  # SQLite caps the parameters of one statement
        out += s.execute(stmt_of(ids[k : k + 500])).all()
    return out


def _store_rows(store, bench: Benchmark) -> dict:
    """The store's rows behind the exported items: instances, images, pairs, runs, generations, actions, reviews."""
    from sqlalchemy import select

    from vhmine.store import Action, Description, Generation, Image, Instance, Pair, Review, Run

    ids = [it.meta.get("instance_id") or it.id for it in bench]
    image_ids = sorted({it.image_id for it in bench if it.image_id})
    pair_ids = sorted({it.meta["pair_id"] for it in bench if it.meta.get("pair_id")})
    with store.session(write=False) as s:
        inst = [r[0] for r in _in_chunks(s, lambda c: select(Instance).where(Instance.id.in_(c)), ids)]
        images = [r[0] for r in _in_chunks(s, lambda c: select(Image).where(Image.id.in_(c)), image_ids)]
        gens = [r[0] for r in _in_chunks(s, lambda c: select(Generation).where(Generation.image_id.in_(c)), image_ids)]
        pairs = [r[0] for r in _in_chunks(s, lambda c: select(Pair).where(Pair.id.in_(c)), pair_ids)]
        runs = {r.name: r for r in s.scalars(select(Run).where(Run.name.in_(sorted({p.run for p in pairs if p.run}))))}
        action_ids = sorted({i.action_id for i in inst if i.action_id is not None})
        actions = {a.id: a for (a,) in _in_chunks(s, lambda c: select(Action).where(Action.id.in_(c)), action_ids)}
        reviewed = {
            r[0] for r in _in_chunks(s, lambda c: select(Review.instance_id).where(Review.instance_id.in_(c)), ids)
        }
        desc_ids = sorted({g.description_id for g in gens if g.description_id})
        descs = {
            d.id: d for (d,) in _in_chunks(s, lambda c: select(Description).where(Description.id.in_(c)), desc_ids)
        }
        s.expunge_all()  # plain rows: read after the session closes
    return {
        "instances": inst,
        "images": images,
        "generations": gens,
        "pairs": pairs,
        "runs": runs,
        "actions": actions,
        "reviewed": reviewed,
        "descriptions": descs,
    }


def _encoder(rec, public: bool) -> dict:
    """An encoder as a run records it (embed's description: kind, spec, dim, model...; or a bare spec)."""
    from vhmine.export.privacy import public_spec

    rec = rec if isinstance(rec, dict) else {"spec": rec}
    spec = rec.get("spec")
    model = rec.get("model")  # a local model folder is a machine path too
    return {
        "spec": public_spec(str(spec), public) if spec else None,
        "model": public_spec(str(model), public) if model else model,
        "dim": rec.get("dim"),
    }


def _collection(rows: dict, public: bool) -> dict:
    per_run = Counter(p.run for p in rows["pairs"] if p.run)
    runs = []
    for name in sorted(per_run):
        meta = rows["runs"][name].meta if name in rows["runs"] else None
        meta = meta if isinstance(meta, dict) else {}
        enc = meta.get("encoders") if isinstance(meta.get("encoders"), dict) else {}
        runs.append(
            {
                "run": name,
                "index": meta.get("index"),
                "pairs": per_run[name],
                "encoders": {k: _encoder(v, public) for k, v in enc.items()},
                "clip_threshold": meta.get("clip_threshold"),
                "dino_threshold": meta.get("dino_threshold"),
            }
        )
    return {
        "images": len(rows["images"]),
        "by_source": dict(sorted(Counter(i.source for i in rows["images"]).items())),
        "pairs": len(rows["pairs"]),
        "pairs_without_run": sum(1 for p in rows["pairs"] if not p.run),
        "runs": runs,
    }


def _generators(rows: dict, public: bool) -> tuple[list, list]:
    """(generated images per backend and model, manipulated images per strategy and edit backend)."""
    gen: dict[tuple, dict] = {}
    man: dict[tuple, dict] = {}
    for g in rows["generations"]:
        p = g.params if isinstance(g.params, dict) else {}
        model = _public_name(g.model, public)
        if g.backend == "manipulate":
            e = man.setdefault(
                (p.get("strategy"), model),
                {"strategy": p.get("strategy"), "edit_backend": model, "images": 0, "victims": set(), "priors": set()},
            )
            e["images"] += 1
            e["victims"].update([p["victim"]] if p.get("victim") else [])
            e["priors"].update([p["prior"]] if p.get("prior") else [])
            continue
        e = gen.setdefault(
            (g.backend, model),
            {
                "backend": g.backend,
                "model": model,
                "images": 0,
                "prompt_models": set(),
                "prompts": set(),
                "description_models": set(),
                "descriptions_edited": 0,
            },
        )
        e["images"] += 1
        e["prompt_models"].update([p["rewrite_model"]] if p.get("rewrite_model") else [])
        e["prompts"].update([p["rewrite_prompt"]] if p.get("rewrite_prompt") else [])
        e["descriptions_edited"] += bool(p.get("description_edited"))
        d = rows["descriptions"].get(g.description_id)
        e["description_models"].update([d.model] if d is not None and d.model else [])
    listed = lambda e: {k: sorted(v) if isinstance(v, set) else v for k, v in e.items()}  # noqa: E731
    return [listed(e) for _, e in sorted(gen.items(), key=lambda kv: str(kv[0]))], [
        listed(e) for _, e in sorted(man.items(), key=lambda kv: str(kv[0]))
    ]


def _annotation(store, bench: Benchmark, rows: dict, key: str, public: bool) -> dict:
    from vhmine import curate
    from vhmine import rules as R
    from vhmine.export.privacy import pseudonym

    who = (lambda n: pseudonym(n, key)) if public else (lambda n: n)  # noqa: E731
    inst = rows["instances"]
    drafts: dict[tuple, dict] = {}
    by_model = set()
    for i in inst:
        a = rows["actions"].get(i.action_id)
        if a is not None and a.kind == "verify" and isinstance(a.payload, dict):
            p = a.payload
            d = drafts.setdefault(
                (p.get("model"), p.get("prompt")),
                {"model": p.get("model"), "prompt": p.get("prompt"), "accepted": 0, "edited": 0},
            )
            d["edited" if p.get("decision") == "edit" else "accepted"] += 1
            by_model.add(i.id)
    own = {R.own_template_id(R.get_mode(m)) for m in R.mode_names()}
    ids = {i.id for i in inst}
    modes = bench.modes()
    agree = [a for a in curate.people.mode_agreement(store, "instances", instance_ids=ids) if a.mode in modes]
    reviewed = Counter(i.mode for i in inst if i.id in rows["reviewed"])
    return {
        "workers": len({i.created_by for i in inst}),
        "items_by_worker": dict(sorted(Counter(who(i.created_by) for i in inst).items())),
        "from_model_drafts": {
            "items": len(by_model),
            "drafts": sorted(drafts.values(), key=lambda d: (str(d["model"]), str(d["prompt"]))),
        },
        "written_by_workers": len(ids - by_model),
        "ynq_drafted_from_oeq": sum(1 for i in inst if i.kind == YNQ and i.derived_from and i.id not in by_model),
        "own_questions": sum(1 for i in inst if i.template_id in own),
        "reviewed": {m: reviewed.get(m, 0) for m in modes},
        "agreement": {
            a.mode: {
                "statistic": a.statistic,
                "kappa": None if a.kappa is None else round(a.kappa, 4),
                "items": a.items,
                "raters": a.raters,
                "disagreements": a.disagreements,
            }
            for a in agree
        },
    }


def _near_dups(section: dict | None) -> dict:
    if not section or not section.get("ran"):
        return {"ran": False, "reason": (section or {}).get("reason", "not run")}
    d = section.get("decided_by") or {}
    ref = section.get("reference") or {}
    return {
        "ran": True,
        "encoders": d.get("encoders"),
        "thresholds": d.get("thresholds"),
        "within_export": len(section.get("within_export") or []),
        "reference": ref.get("index"),
        "against_reference": len(section.get("against_reference") or []),
        "generated_against_source": len(section.get("generated_against_source") or []),
        "overruled": section.get("overruled", 0),
        "removed": 0,
    }


def _blind(blind: dict | None) -> dict:
    if not blind or not blind.get("solvers"):
        return {"ran": False, "drop_blind": bool(blind and blind.get("drop_blind")), "left_out": 0, "solvers": []}
    solvers = [
        {
            "model": s["model"],
            "prompt": s["prompt"],
            "scorers": s.get("scorers", []),
            "flagged_kept": sum(c.get("flagged_kept", 0) for c in s["per_mode"].values()),
            "accuracy": {m: c.get("accuracy") for m, c in s["per_mode"].items()},
        }
        for s in blind["solvers"]
    ]
    return {"ran": True, "drop_blind": blind["drop_blind"], "left_out": blind["left_out"], "solvers": solvers}


def limitations(bench: Benchmark, sheet: dict) -> list[str]:
    """What a reader of the results should know, from the facts (see the module docstring)."""
    out = []
    per_mode = Counter(it.mode for it in bench)
    small = [m for m, n in per_mode.items() if margin_pp(n) > 10]
    if small:
        out.append(
            "Small modes: "
            + ", ".join(
                f"{m} has {per_mode[m]} item(s) (95% margin of an accuracy about ±{margin_pp(per_mode[m]):.0f} points)"
                for m in small
            )
            + "; compare models on them with care."
        )
    ynq = Counter((it.mode, bool(it.truth)) for it in bench if it.kind == YNQ)
    uneven = sorted({m for (m, _) in ynq if ynq[(m, True)] != ynq[(m, False)]})
    if uneven:
        out.append(
            f"Yes/no questions are not 50/50 in {', '.join(uneven)} (exported with --allow-unbalanced): a "
            "model that always says yes or no scores above chance there."
        )
    ann = sheet.get("annotation")
    if ann:
        if ann["workers"] == 1:
            out.append("Every item was written by one worker.")
        unreviewed = [m for m, n in ann["reviewed"].items() if n == 0]
        if unreviewed:
            out.append(
                f"No item of {', '.join(unreviewed)} was reviewed blind by a second worker: those reference "
                "answers are their author's alone, with no measured agreement."
            )
        low = [
            f"{m} (kappa {a['kappa']:.2f})"
            for m, a in ann["agreement"].items()
            if a["kappa"] is not None and a["kappa"] < 0.6
        ]
        if low:
            out.append("Workers agreed only moderately or less in " + ", ".join(low) + ".")
        if ann["own_questions"]:
            out.append(
                f"{ann['own_questions']} question(s) were written freely by workers rather than from vhmine's "
                "English templates; their language is not recorded."
            )
    else:
        out.append("Written without a curation store: how the items were collected and annotated is not recorded.")
    blind = sheet.get("blind")
    if blind and not blind["ran"]:
        out.append("No blind-solver check ran (vhmine blind): some questions may be answerable without the image.")
    elif blind and not blind["drop_blind"] and any(s["flagged_kept"] for s in blind["solvers"]):
        out.append(
            f"{max(s['flagged_kept'] for s in blind['solvers'])} item(s) a blind solver answered right without "
            "the image are included (not exported with --drop-blind)."
        )
    dups = sheet.get("near_duplicates")
    if dups and not dups["ran"]:
        out.append(
            f"The near-duplicate check did not run, so duplicates among the images, or of a training set, "
            f"were not looked for: {dups['reason']}."
        )
    elif dups and dups["ran"] and dups.get("reference") is None:
        out.append(
            "Images were not checked against a reference collection (export --against): overlap with models' "
            "training data is unknown."
        )
    if dups and dups["ran"] and dups["within_export"]:
        out.append(
            f"{dups['within_export']} near-duplicate image pair(s) within the benchmark are listed in "
            "near_duplicates.html and kept."
        )
    col = sheet.get("collection") or {}
    if col.get("runs"):
        out.append(
            "Image pairs were mined because CLIP embeds them alike and DINOv2 apart: the benchmark aims at "
            "CLIP-style vision encoders' blind spots, and results may differ for models with other encoders."
        )
    synthetic = (col.get("by_source") or {}).get("generated", 0)
    if synthetic:
        out.append(
            f"{synthetic} image(s) are generated or edited by models: artefacts of generation may give away "
            "answers, or hide objects."
        )
    out.append(
        "The licence and consent status of the images are those of their source collection; vhmine records "
        "neither, and does not screen images for people or personal data."
    )
    return out


def gather(
    store,
    bench: Benchmark,
    *,
    key: str,
    with_provenance: bool = False,
    near_dups: dict | None = None,
    blind: dict | None = None,
) -> dict:
    """The manifest's `datasheet` section for `bench` (items from the store, before names are pseudonymized)."""
    from vhmine import __version__

    public = not with_provenance
    rows = _store_rows(store, bench)
    generated, manipulated = _generators(rows, public)
    sheet = {
        "vhmine_version": __version__,
        "platform": PLATFORM,
        "with_provenance": with_provenance,
        "collection": _collection(rows, public),
        "generated": generated,
        "manipulated": manipulated,
        "annotation": _annotation(store, bench, rows, key, public),
        "blind": _blind(blind),
        "near_duplicates": _near_dups(near_dups),
        "kinds": {k: sum(1 for it in bench if it.kind == k) for k in (OEQ, YNQ)},
        "modes": dict(Counter(it.mode for it in bench)),
    }
    sheet["models"] = models_named(sheet)
    sheet["prompts"] = prompts_named(sheet)
    sheet["language"] = "en" if not sheet["annotation"]["own_questions"] else None
    sheet["limitations"] = limitations(bench, sheet)
    return sheet


def models_named(sheet: dict) -> list[str]:
    """Every model the datasheet names (drafts, blind solvers, generators, edits), once."""
    names: list[str | None] = [d["model"] for d in sheet["annotation"]["from_model_drafts"]["drafts"]]
    names += [s["model"] for s in sheet["blind"]["solvers"]]
    for g in sheet["generated"]:
        names += [g["model"], *g["prompt_models"], *g["description_models"]]
    for m in sheet["manipulated"]:
        names += [m["edit_backend"], *m["victims"]]
    return sorted({n for n in names if n})


def prompts_named(sheet: dict) -> list[str]:
    """Every versioned prompt id (`name@vN#sha8`) the datasheet names, once."""
    ids: list[str | None] = [d["prompt"] for d in sheet["annotation"]["from_model_drafts"]["drafts"]]
    ids += [s["prompt"] for s in sheet["blind"]["solvers"]]
    for g in sheet["generated"]:
        ids += list(g["prompts"])
    for m in sheet["manipulated"]:
        ids += [p.split(" ", 1)[1] for p in m["priors"] if p.startswith("llm:") and " " in p]
    return sorted({p for p in ids if p})


def describe_list(values: Iterable[str]) -> str:
    values = list(values)
    return ", ".join(values[:-1]) + (" and " if len(values) > 1 else "") + (values[-1] if values else "")
