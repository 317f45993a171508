"""README.md of an export: a Hugging Face dataset card for `hf`, and the "How it was made" section for every README.

Reads the export folder's data files (their sizes; the hf layout's per-kind parquet files, vhmine.formats.hf),
the benchmark, the manifest's version fields and datasheet (vhmine.export.datasheet) and what the publisher
said (`Publication`); writes README.md into the folder being exported (`write_readme`):

- hf: the dataset card. YAML front matter: `configs` (default: every file; one config per kind with that
  kind's file), `dataset_info` (the features, the image an Image feature, and each split's num_examples,
  which `datasets` checks), license (the publisher's Hugging Face id, `other` with a link for a URL, else
  `unknown`), task_categories, size_categories, pretty_name; then sections: the data, how it was made
  (pipeline, images, models and prompts with their versions, workers and agreement, filters), intended use,
  limitations, licence, citation, version and changelog;
- a format that writes its own README (vlmevalkit): "How it was made" appended to it;
- the others write no README; their croissant.json holds the same facts.

All text from the store (model, run and index names) is escaped for Markdown tables and HTML.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from vhmine.bench import OEQ, YNQ, Benchmark
from vhmine.export.croissant import agreement_lines, annotation_lines, encoder_spec, filter_lines, summary
from vhmine.export.datasheet import Publication, describe_list

README = "README.md"
_LICENSE_ID = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")
# the datasets features of formats.hf's columns, as the card declares them (the image an Image feature)
FEATURES = [
    ("id", "string"),
    ("mode", "string"),
    ("kind", "string"),
    ("question", "string"),
    ("answers", None),
    ("truth", "bool"),
    ("image", "image"),
    ("image_id", "string"),
    ("pair_id", "string"),
    ("meta", "string"),
    ("group_id", "string"),
]


def _md(text) -> str:
    """Store text made safe in Markdown (tables included) and in the HTML a card viewer renders."""
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def _q(text) -> str:
    return json.dumps(str(text), ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def license_yaml(pub: Publication) -> list[str]:
    lic = (pub.license or "").strip()
    if not lic:
        return ["license: unknown"]
    if _LICENSE_ID.match(lic.lower()) and "://" not in lic:
        return [f"license: {lic.lower()}"]
    lines = ["license: other", f"license_name: {_q(lic)}"]
    return lines + ([f"license_link: {_q(lic)}"] if "://" in lic else [])


def front_matter(folder: Path, bench: Benchmark, name: str, sheet: dict | None, pub: Publication) -> str:
    from vhmine.formats import load_module

    DATA = load_module("hf").DATA

    kinds = [k for k in (OEQ, YNQ) if (Path(folder) / DATA[k]).is_file()]
    configs = {"default": kinds, **{k.lower(): [k] for k in kinds}}
    y = ["---", f"pretty_name: {_q(name)}", *license_yaml(pub)]
    if sheet is None or sheet.get("language"):
        y += ["language:", "- en"]
    y += [
        "task_categories:",
        "- visual-question-answering",
        "size_categories:",
        f"- {size_category(len(bench))}",
        "tags:",
        "- hallucination",
        "- vision-language-models",
        "- vhmine",
        "- croissant",
        "configs:",
    ]
    for cfg, ks in configs.items():
        y += (
            [f"- config_name: {cfg}"]
            + (["  default: true"] if cfg == "default" else [])
            + ["  data_files:", "  - split: test", "    path:"]
        )
        y += [f"    - {DATA[k]}" for k in ks]
    y += ["dataset_info:"]
    for cfg, ks in configs.items():
        y += [f"- config_name: {cfg}", "  features:"]
        for f, dtype in FEATURES:
            y += [f"  - name: {f}"] + (["    list: string"] if dtype is None else [f"    dtype: {dtype}"])
        size = sum(
            (Path(folder) / DATA[k]).stat().st_size for k in ks
        )  # the files' size: datasets checks num_examples only
        y += [
            "  splits:",
            "  - name: test",
            f"    num_bytes: {size}",
            f"    num_examples: {sum(1 for it in bench if it.kind in ks)}",
        ]
    return "\n".join(y + ["---", ""])


def _models_table(sheet: dict) -> list[str]:
    rows = []
    for d in sheet["annotation"]["from_model_drafts"]["drafts"]:
        rows.append((d["model"], "drafted items that workers verified", d["prompt"]))
    for s in sheet["blind"]["solvers"]:
        rows.append((s["model"], "blind solver (asked without the image)", s["prompt"]))
    for g in sheet["generated"]:
        rows.append((g["model"], f"generated {g['images']} image(s) ({g['backend']})", ""))
        rows += [(m, "wrote the image prompts", describe_list(g["prompts"])) for m in g["prompt_models"]]
        rows += [(m, "summarised each mode's successes", "") for m in g["description_models"]]
    for m in sheet["manipulated"]:
        rows.append((m["edit_backend"], f"edited {m['images']} image(s) ({m['strategy']})", ""))
    for r in sheet["collection"]["runs"]:
        for k in r["encoders"] or {}:
            rows.append(
                (
                    encoder_spec(r["encoders"], k),
                    f"{'CLIP' if k == 'clip' else 'DINOv2'} encoder that mined run {r['run']}",
                    "",
                )
            )
    if not rows:
        return ["No model drafted, solved, generated or edited any item: workers wrote them all."]
    out = ["| model | role | prompt (name@version#sha256) |", "|---|---|---|"]
    return out + [f"| {_md(m)} | {_md(role)} | {_md(p) or '-'} |" for m, role, p in dict.fromkeys(rows)]


def checks_ran(sheet: dict) -> list[str]:
    """The checks that ran on the exported items, in words (none that did not)."""
    ran = []
    if sum((sheet["annotation"].get("reviewed") or {}).values()):
        ran.append("blind review by a second worker")
    if sheet["blind"]["ran"]:
        ran.append("blind solvers (asked without the image)")
    if sheet["near_duplicates"]["ran"]:
        ran.append(
            "a near-duplicate search"
            + (
                f" (also against {sheet['near_duplicates']['reference']})"
                if sheet["near_duplicates"].get("reference")
                else ""
            )
        )
    return ran


def still_to_state(pub: Publication | None) -> list[str]:
    """What only the publisher knows and has not given (--license, --description, --citation), and the images'
    licence."""
    pub = pub or Publication()
    out = ["the images' licence (that of their source collection; vhmine does not record it)"]
    out += [] if pub.license else ["the benchmark's licence (--license)"]
    out += [] if pub.citation else ["how to cite it (--citation)"]
    return out


def made_section(sheet: dict | None, level: int = 2, pub: Publication | None = None) -> str:
    """The "How it was made" section (Markdown), shared by the dataset card and the formats' READMEs: it names only
    the checks that ran, and what the publisher must still state."""
    h = "#" * level
    if sheet is None:
        return (
            f"{h} How it was made\n\nThis benchmark was written without a curation store: how its items were "
            "collected and annotated is not recorded.\n"
        )
    col = sheet["collection"]
    out = [
        f"{h} How it was made",
        "",
        f"Made with vhmine {_md(sheet['vhmine_version'])}: image pairs mined from a collection (embedded with CLIP and "
        "DINOv2, kept where CLIP sees them alike and DINOv2 apart), seeded into a curation store, annotated by workers "
        "(open questions with a reference answer per image, yes/no variants drafted from them), "
        + (
            f"checked by {describe_list(checks_ran(sheet))}"
            if checks_ran(sheet)
            else "not checked by blind review, blind solvers or a near-duplicate search"
        )
        + " and exported with `vhmine export`. The publisher must still state "
        + describe_list(still_to_state(pub))
        + ".",
        "",
        f"{h}# Images",
        "",
        f"{col['images']} image(s): "
        + (", ".join(f"{n} {_md(s)}" for s, n in col["by_source"].items()) or "none")
        + ".",
    ]
    for r in col["runs"]:
        enc = r["encoders"]
        out.append(
            f"- {r['pairs']} pair(s) from mining run `{_md(r['run'])}` over index `{_md(r['index'])}`: CLIP "
            f"`{_md(encoder_spec(enc, 'clip'))}` cosine >= {r['clip_threshold']}, DINOv2 "
            f"`{_md(encoder_spec(enc, 'dino'))}` cosine <= {r['dino_threshold']}."
        )
    for g in sheet["generated"]:
        out.append(f"- {g['images']} generated by `{_md(g['model'])}` ({_md(g['backend'])}).")
    for m in sheet["manipulated"]:
        out.append(f"- {m['images']} edited ({_md(m['strategy'])}) with `{_md(m['edit_backend'])}`.")
    out += [
        "",
        f"{h}# Models and prompts",
        "",
        *_models_table(sheet),
        "",
        f"{h}# Workers and agreement",
        "",
        *[_md(s) for s in annotation_lines(sheet)],
        "",
    ]
    agree = agreement_lines(sheet)
    out += [f"- {_md(s)}" for s in agree] + ([""] if agree else [])
    out += [f"{h}# Filters", "", *[f"- {_md(s)}" for s in filter_lines(sheet)], ""]
    return "\n".join(out)


def card(folder: Path, bench: Benchmark, info: dict, sheet: dict | None, pub: Publication) -> str:
    """The hf export's README.md (see the module docstring)."""
    from vhmine.formats import load_module

    DATA = load_module("hf").DATA

    name, version = info["name"], str(info.get("version", "1"))
    kinds = [k for k in (OEQ, YNQ) if (Path(folder) / DATA[k]).is_file()]
    limits = (sheet or {}).get("limitations") or [
        "Written without a curation store: how the items were made is not recorded."
    ]
    out = [
        front_matter(folder, bench, name, sheet, pub),
        f"# {_md(name)}",
        "",
        _md(pub.description.strip()) if pub.description else _md(summary(bench, name, version)),
        "",
        "## The data",
        "",
        "Configs: `default` (every item) and "
        + describe_list([f"`{k.lower()}` ({'open-ended' if k == OEQ else 'yes/no'}, `{DATA[k]}`)" for k in kinds])
        + "; one split, `test`.",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        'ds = load_dataset("path/to/this/folder", split="test")  # the image column decodes to PIL images',
        "```",
        "",
        "| field | meaning |",
        "|---|---|",
        "| question | the question asked about the image |",
        "| answers | acceptable reference answers, best first (open questions) |",
        "| truth | the yes/no answer (yes/no questions; null for open ones) |",
        "| mode | the hallucination mode |",
        "| kind | OEQ (open-ended) or YNQ (yes/no) |",
        "| image | the image |",
        "| group_id | pair group: score its questions on both images whole (NaturalBench's group accuracy) |",
        "| image_id, pair_id, meta | the image, the mined pair's question, provenance (JSON) |",
        "",
        (
            "`croissant.json` describes the same files in MLCommons Croissant 1.0 with its Responsible-AI fields "
            "(mlcroissant reads its parquet record sets only with `pip install 'mlcroissant[parquet]'`); "
            "`manifest.json` lists every file's sha256 and each item's provenance. Score answers with "
            "`vhmine eval --bench . --predictions MODEL=answers.jsonl`."
        ),
        "",
        made_section(sheet, pub=pub),
        "## Intended use",
        "",
        (
            "Evaluating vision-language models for visual hallucination, per mode: a test set, not training data. Ask"
            ' each yes/no question with " ONLY answer yes or no." appended, as VHTest does, and report per-mode'
            " accuracy (and group accuracy over the pair groups)."
        ),
        "",
        "## Limitations",
        "",
        *[f"- {_md(s)}" for s in limits],
        "",
        "## Licence",
        "",
        (
            _md(pub.license)
            if pub.license
            else (
                "Unspecified: the publisher gave no licence "
                "(`vhmine export --license`). The images' licence is that of their source collection."
            )
        ),
        "",
        "## Citation",
        "",
    ]
    out += (
        ["```bibtex" if pub.citation.lstrip().startswith("@") else "```", pub.citation.strip(), "```"]
        if pub.citation
        else ["Unspecified: the publisher gave no citation (`vhmine export --citation`)."]
    )
    out += [
        "",
        "## Version and changelog",
        "",
        (
            f"Version {_md(version)}, content hash `{_md(info.get('content_hash', '-'))}`, "
            f"exported {_md(info.get('created_at', '')[:10])}."
        ),
    ]
    since = info.get("since")
    if since:
        out.append(
            f"Since version {_md(since.get('version') or 'the earlier export')}: {since.get('added', 0)} item(s) "
            f"added, {since.get('removed', 0)} removed, {since.get('changed', 0)} changed; see CHANGELOG.md."
        )
    else:
        out.append("No earlier version was compared (`vhmine export --since EARLIER` writes CHANGELOG.md).")
    return "\n".join(out) + "\n"


def write_readme(folder: Path, fmt: str, bench: Benchmark, info: dict, sheet: dict | None, pub: Publication) -> None:
    """README.md for the folder being exported (see the module docstring)."""
    path = Path(folder) / README
    if fmt == "hf":
        path.write_text(card(folder, bench, info, sheet, pub), encoding="utf-8")
    elif path.is_file():  # a format's own README (vlmevalkit): the same section after it
        path.write_text(
            path.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + made_section(sheet, pub=pub), encoding="utf-8"
        )
