"""Failures across models: which items fool how many models, and whether one model's failures transfer to another.

Reads the per-item detail records of each model (vhmine.eval.score: `correct` is None for an item whose request
failed, which is not scored); writes nothing. `across_models` returns report.json's `across_models` section:

- `items`: item id -> `failed_by` (models that answered it wrong) and `scored_by` (models whose answer was scored);
- `transfer`: for models A and B, of the items A failed that B also answered, the share B failed too
  (`share` = `both` / `of`; None when A failed none that B answered). A share near 1 means B fails where A does:
  an item mined against A is adversarial for B as well;
- `fool_all`: per mode, the items every model answered and every model got wrong;
- `order`: the item ids failures first (failed by every model, then by most), then mode order and pair group,
  as the HTML report lists them.

These are what a team reads to pick robust adversarial items for a next release.
"""

from __future__ import annotations

from collections.abc import Sequence


def across_models(details: dict[str, list[dict]], modes: Sequence[str]) -> dict:
    """`details`: model name -> its detail records (one per item, as score() gives them)."""
    models = list(details)
    verdict: dict[str, dict[str, bool | None]] = {
        m: {d["id"]: d["correct"] for d in rows} for m, rows in details.items()
    }
    info: dict[str, dict] = {}
    for rows in details.values():
        for d in rows:
            info.setdefault(d["id"], {"mode": d["mode"], "group": d.get("group_id")})
    items = {}
    for iid in info:
        said = [verdict[m].get(iid) for m in models]
        items[iid] = {"failed_by": sum(v is False for v in said), "scored_by": sum(v is not None for v in said)}
    transfer: dict[str, dict[str, dict]] = {}
    for a in models:
        failed_a = {i for i, v in verdict[a].items() if v is False}
        transfer[a] = {}
        for b in models:
            if a == b:
                continue
            of = [i for i in failed_a if verdict[b].get(i) is not None]
            both = sum(verdict[b][i] is False for i in of)
            transfer[a][b] = {"share": round(both / len(of), 4) if of else None, "both": both, "of": len(of)}
    n = len(models)
    fool_all = {
        md: sorted(i for i, c in items.items() if info[i]["mode"] == md and n and c["failed_by"] == n) for md in modes
    }
    rank = {md: k for k, md in enumerate(modes)}
    order = sorted(
        items,
        key=lambda i: (
            -items[i]["failed_by"],
            -(items[i]["failed_by"] / max(1, items[i]["scored_by"])),
            rank.get(info[i]["mode"], len(rank)),
            info[i]["group"] or "",
            i,
        ),
    )
    return {"models": models, "items": items, "transfer": transfer, "fool_all": fool_all, "order": order}


def markdown_lines(section: dict) -> list[str]:
    """report.md's section: the transfer table and the count per mode of items that fool every model."""
    models = section["models"]
    if len(models) < 2:
        return []
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}"  # noqa: E731
    out = [
        "",
        "## Across models",
        "",
        "Of the items model A (row) got wrong that B (column) answered, the share (%) B got wrong too:",
        "",
        "| A \\ B | " + " | ".join(models) + " |",
        "|---|" + "---|" * len(models),
    ]
    for a in models:
        out.append(
            f"| {a} | " + " | ".join("-" if a == b else pct(section["transfer"][a][b]["share"]) for b in models) + " |"
        )
    out += [
        "",
        "Items every model got wrong: "
        + ", ".join(f"{md} {len(ids)}" for md, ids in section["fool_all"].items())
        + " (their ids: report.json, `across_models.fool_all`; browse them in report.html).",
    ]
    return out
