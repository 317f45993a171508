"""report.html's figures: every figure of each model with its interval, the chart, the tables per mode and kind,
the transfer table and the paired comparisons, as HTML text (vhmine.eval.html_report places them on the page).

Reads the report dict of vhmine.eval.job.evaluate (report.json); writes nothing. Every text that comes from a
benchmark or a model is escaped (html.escape).
"""

from __future__ import annotations

import html

from vhmine.eval.interval_text import ci_bar, ci_title, comparisons_html
from vhmine.eval.metrics import FIGURES, label, unit
from vhmine.eval.report import figure_text, figure_values

COLORS = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0")


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def svg_chart(report: dict) -> str:
    """Per-mode (and overall) accuracy per model: grouped bars, one colour per model, 0-100 %, its legend beside the
    bars inside the chart (a legend below a wide chart lies off screen)."""
    models = list(report["models"])
    groups = list(report["modes"]) + ["overall"]
    bw, gap, left, top, h = 18, 22, 44, 14, 200
    gw = max(1, len(models)) * bw + gap
    plot_w = left + len(groups) * gw + 10
    legend_w = 24 + 7 * max([len(m) for m in models] + [8])
    width = plot_w + legend_w
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{max(top + h + 90, 24 + 18 * len(models))}" '
        'role="img" aria-label="accuracy per mode and model">'
    ]
    for v in (0, 25, 50, 75, 100):
        y = top + h - h * v / 100
        out.append(
            f'<line x1="{left}" x2="{plot_w - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d0d7de"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v}%</text>'
        )
    for g, name in enumerate(groups):
        x0 = left + g * gw + gap / 2
        for k, m in enumerate(models):
            met = report["models"][m]["metrics"]
            s = met["overall"] if name == "overall" else met["modes"].get(name, {})
            acc = s.get("accuracy")
            bh = 0 if acc is None else h * acc
            ci = ((s.get("intervals") or {}).get("accuracy") or {}).get("ci95")
            around = f", 95% interval {_pct(ci[0])} to {_pct(ci[1])}" if ci else ""
            out.append(
                f'<rect x="{x0 + k * bw:.1f}" y="{top + h - bh:.1f}" width="{bw - 2}" height="{bh:.1f}" '
                f'fill="{COLORS[k % len(COLORS)]}"><title>{_e(m)}, {_e(name)}: {_pct(acc)}% of {s.get("n", 0)} '
                f"item(s){around}</title></rect>"
            )
            if ci:  # the interval as a whisker with caps
                cx, y0, y1 = x0 + k * bw + (bw - 2) / 2, top + h - h * ci[1], top + h - h * ci[0]
                out.append(
                    f'<path class="whisker" d="M{cx:.1f} {y0:.1f}V{y1:.1f}M{cx - 3:.1f} {y0:.1f}h6M{cx - 3:.1f} '
                    f'{y1:.1f}h6" stroke="#1f2328" stroke-width="1" fill="none"/>'
                )
            if acc is not None and len(models) <= 5:
                above = top + h - h * (ci[1] if ci else acc) - 3  # above the whisker
                out.append(
                    f'<text x="{x0 + k * bw + (bw - 2) / 2:.1f}" y="{above:.1f}" text-anchor="middle" '
                    f'style="font-size:9px">{100 * acc:.0f}</text>'
                )
        cx = x0 + len(models) * bw / 2
        out.append(
            f'<text x="{cx:.1f}" y="{top + h + 14}" text-anchor="end" transform="rotate(-35 {cx:.1f} '
            f'{top + h + 14})">{_e(name)}</text>'
        )
    out.append(f'<g class="legend" transform="translate({plot_w + 6},{top})">')
    for k, m in enumerate(models):
        out.append(
            f'<rect x="0" y="{18 * k}" width="12" height="12" fill="{COLORS[k % len(COLORS)]}"/>'
            f'<text x="18" y="{18 * k + 11}">{_e(m)}</text>'
        )
    out.append("</g></svg>")
    return "".join(out)


def figure_head(key: str) -> str:
    return (
        f'<th class="fig" data-figure="{_e(key)}" title="{_e(FIGURES[key][1])}">{_e(label(key))}'
        f'<div class="unit">{_e(unit(key))}</div></th>'
    )


def summary_table(report: dict) -> str:
    """Every figure report.json has for each model (report.figure_values), under its metrics.FIGURES name and unit:
    a row per figure and a column per model, so that twenty figures fit a window as two models or ten do (a column
    per figure made the table 1,600 px wide, its source column cut off); long names and sources wrap."""
    values = {m: figure_values(e) for m, e in report["models"].items()}
    records = {m: interval_records(e) for m, e in report["models"].items()}
    keys = [k for k in dict.fromkeys(k for v in values.values() for k in v)]
    models = report["models"]
    rows = ['<table class="small figures"><tr><th>figure</th>' + "".join(f"<th>{_e(m)}</th>" for m in models) + "</tr>"]
    for k in keys:
        rows.append(
            "<tr>"
            + figure_head(k)
            + "".join(
                f'<td class="num" title="{_e(ci_title(k, records[m].get(k)))}" data-model="{_e(m)}" '
                f'data-figure="{_e(k)}">{_e(figure_text(k, values[m].get(k)))}'
                f"{_bar(k, values[m].get(k), records[m].get(k))}</td>"
                for m in models
            )
            + "</tr>"
        )
    for head, cell in (
        ("items scored", lambda e: f'<td class="num">{e["metrics"]["overall"].get("n", 0)}</td>'),
        ("no answer (not scored)", lambda e: f'<td class="num">{e.get("failed", 0)}</td>'),
        ("source", lambda e: f'<td class="source">{_e(e.get("source"))}</td>'),
    ):
        rows.append(f"<tr><th>{head}</th>" + "".join(cell(e) for e in models.values()) + "</tr>")
    return "".join(rows) + "</table>" + figures_legend(keys)


def interval_records(entry: dict) -> dict:
    """Every figure's interval record (`n`, `ci95`, `ci_method`) of one model's report.json entry, by figure key."""
    return {
        **(entry["metrics"]["overall"].get("intervals") or {}),
        **((entry.get("hallusionbench") or {}).get("intervals") or {}),
    }


def _bar(key: str, value, record: dict | None) -> str:
    """The interval as a bar under a share's figure (shares in [0, 1] only: not a count or a signed share)."""
    return ci_bar(value, record, width=70) if unit(key) in ("%", "share") else ""


def figures_legend(keys) -> str:
    rows = "".join(
        f"<tr><td>{_e(FIGURES[k][0])}</td><td><code>{_e(k)}</code></td><td>{_e(unit(k))}</td>"
        f"<td>{_e(FIGURES[k][1])}</td></tr>"
        for k in keys
    )
    return (
        '<details class="legend"><summary>what each figure counts</summary><table class="small"><tr><th>name</th>'
        "<th>report.json key</th><th>unit</th><th>counts</th></tr>" + rows + '</table><p class="note">Pairs, images, '
        'groups, question pairs and figures count only when every item of theirs was scored; "-": there was none '
        "to count.</p></details>"
    )


def by_table(report: dict, part: str, names) -> str:
    """Accuracy (%) per mode or per kind (`part`: report.json's "modes" or "kinds") and model."""
    names = [n for n in names if any(n in e["metrics"].get(part, {}) for e in report["models"].values())]
    if len(names) < 2:
        return ""
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = [f'<table class="small"><tr><th>{_e(label("accuracy"))} (%) per {part[:-1]}</th>{head}</tr>']
    for m, e in report["models"].items():
        per = e["metrics"].get(part, {})
        cells = []
        for n in names:
            acc, rec = per.get(n, {}).get("accuracy"), (per.get(n, {}).get("intervals") or {}).get("accuracy")
            tip = _e(ci_title("accuracy", rec))
            cells.append(f'<td class="num" title="{tip}">{_pct(acc)}{_bar("accuracy", acc, rec)}</td>')
        rows.append(f"<tr><td>{_e(m)}</td>" + "".join(cells) + "</tr>")
    return "".join(rows) + "</table>"


def comparisons_section(report: dict) -> str:
    table = comparisons_html(report.get("comparisons") or [])
    return f"<h2>Paired comparisons</h2>{table}" if table else ""


def transfer_table(across: dict) -> str:
    models = across["models"]
    if len(models) < 2:
        return '<p class="note">One model: nothing to compare.</p>'
    head = "".join(f"<th>{_e(b)}</th>" for b in models)
    rows = [f'<table class="small"><tr><th>A \\ B</th>{head}</tr>']
    for a in models:
        cells = []
        for b in models:
            t = across["transfer"][a].get(b)
            cells.append(
                '<td class="num">-</td>'
                if t is None or t["share"] is None
                else f'<td class="num" title="{t["both"]} of {t["of"]}">{_pct(t["share"])}%</td>'
            )
        rows.append(f"<tr><th>{_e(a)}</th>{''.join(cells)}</tr>")
    return (
        '<p class="note">Of the items model A (row) got wrong that model B (column) answered, the share B got wrong '
        "too: near 100% means failures transfer.</p>" + "".join(rows) + "</table>"
    )
