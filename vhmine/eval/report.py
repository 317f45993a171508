"""eval's report files: `report.md` (tables, several models side by side) and `accuracy_by_mode.png`.

Reads the report dict that vhmine.eval.job.evaluate builds (also written as report.json); writes the two
files' contents (`markdown`) and the chart (`bar_chart`, matplotlib). Where the benchmark has pair
groups, `markdown` adds their question, image and group accuracy per mode (NaturalBench's Q-Acc, I-Acc,
G-Acc, vhmine.eval.metrics.pair_groups) beside the per-item accuracy VHTest reports. Items whose request failed are
not in any figure; `markdown` lists how many per model and why. Every figure is printed under its one label
(vhmine.eval.metrics.FIGURES), here, in the console summary (`model_lines`) and as report.json's key.
"""

from __future__ import annotations

from pathlib import Path

from vhmine.eval.metrics import FIGURES, label, unit


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _kappa(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.3f}"


def figure_values(entry: dict) -> dict:
    """Every figure of one model's report.json entry, by its FIGURES key, in FIGURES order: its overall summary,
    its pair groups' Q-/I-/G-Acc and its HallusionBench figures (the keys each report shows under one name)."""
    o = entry["metrics"]["overall"]
    found = {
        **{k: v for k, v in o.items() if k in FIGURES},
        **{k: v for k, v in (o.get("pair_groups") or {}).items() if k in ("q_acc", "i_acc", "g_acc")},
        **{k: v for k, v in (entry.get("hallusionbench") or {}).items() if k in FIGURES and k != "unreadable"},
    }
    return {k: found[k] for k in FIGURES if k in found}


def figure_text(key: str, value) -> str:
    """A figure as every report prints it, with its unit (metrics.UNITS): "83.3%", "2", "+0.125", "0.250"; "-": none."""
    u = unit(key)
    if value is None:
        return "-"
    if u == "%":
        return f"{_pct(value)}%"
    if u == "count":
        return str(value)
    return f"{value:+.3f}" if u == "signed share" else f"{value:.3f}"


def pair_groups_line(g: dict) -> str:
    """One line of a `metrics.pair_groups` dict, for the command's summary."""
    left = f"; {g['incomplete']} group(s) with an unscored item left out" if g.get("incomplete") else ""
    return (
        f"pair groups: {label('q_acc')} {_pct(g['q_acc'])}%, {label('i_acc')} {_pct(g['i_acc'])}%, "
        f"{label('g_acc')} {_pct(g['g_acc'])}% over {g['groups']} group(s){left}"
    )


def left_out_line(o: dict) -> str:
    """Pairs and images left out of pair and image accuracy for an unscored item ("" when none were)."""
    p, i = o.get("incomplete_pairs", 0), o.get("incomplete_images", 0)
    if not p and not i:
        return ""
    return (
        f"{p} pair(s) and {i} image(s) with an unscored item left out of {label('pair_accuracy')} and "
        f"{label('image_accuracy')}"
    )


def _over(key: str, value, n: int, what: str) -> str:
    """`<name> <value>% over <n> <what>(s)`, or that there was none complete to count (never "-% over 0")."""
    if not n:
        return f"no complete {what}s for {label(key)}"
    return f"{label(key)} {_pct(value)}% over {n} {what}(s)"


def figures_line(o: dict) -> str:
    """A model's overall accuracy, pair accuracy and image accuracy, for the command's summary."""
    left = left_out_line(o)
    return (
        _over("accuracy", o["accuracy"], o["n"], "item")
        + "; "
        + _over("pair_accuracy", o["pair_accuracy"], o["pairs"], "pair")
        + "; "
        + _over("image_accuracy", o["image_accuracy"], o["images"], "image")
        + (f" ({left})" if left else "")
    )


YNQ_KEYS = ("precision", "recall", "f1", "yes_ratio", "truth_yes_ratio", "unreadable")
HB_KEYS = ("aAcc", "qAcc", "fAcc", "yes_pct_diff", "fp_ratio")


def keyed_line(title: str, figures: dict, keys) -> str:
    """`<title>: <name> <value>, ...` for the keys `figures` has (figure_values), for the command's summary."""
    return f"{title}: " + ", ".join(f"{label(k)} {figure_text(k, figures[k])}" for k in keys if k in figures)


def kinds_line(kinds: dict) -> str:
    """Accuracy per kind (OEQ, YNQ), for the command's summary."""
    return f"{label('accuracy')} by kind: " + ", ".join(
        f"{k} {_pct(a['accuracy'])}% over {a['n']}" for k, a in kinds.items()
    )


def _groups_table(models: dict, modes: list) -> list[str]:
    """Per model and mode: items' accuracy (all, as VHTest), then Q-Acc, I-Acc, G-Acc over the pair groups."""
    lines = [
        "",
        f"## Pair groups (%): {label('q_acc')}, {label('i_acc')}, {label('g_acc')}",
        "",
        (
            "A group: the questions asked of both images of a pair whose answers differ by image (yes/no: yes on "
            f"one, no on the other). {label('q_acc')}: a question right on both images; {label('i_acc')}: an image "
            f"with every question of its group right on it; {label('g_acc')}: a group with every question right on "
            "both images (NaturalBench). Accuracy is over all items of the mode."
        ),
        "",
        f"| model | mode | {label('accuracy')} | groups | {label('q_acc')} | {label('i_acc')} | {label('g_acc')} |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in models.items():
        per = [(md, m["metrics"]["modes"].get(md, {})) for md in modes] + [("overall", m["metrics"]["overall"])]
        for md, s in per:
            g = s.get("pair_groups")
            if g:
                left = f" ({g['incomplete']} incomplete left out)" if g.get("incomplete") else ""
                lines.append(
                    f"| {name} | {md} | {_pct(s.get('accuracy'))} | {g['groups']}{left} | {_pct(g['q_acc'])} | "
                    f"{_pct(g['i_acc'])} | {_pct(g['g_acc'])} |"
                )
    return lines


def markdown(report: dict) -> str:
    models = report["models"]
    modes = report["modes"]
    lines = [
        f"# {report['benchmark']['name']}: {len(models)} model(s)",
        "",
        f"yes/no rule: `{report['rule']}`; OEQ scorer: `{report['oeq']['scorer']}`"
        + (f" (judge {report['oeq']['judge']})" if report["oeq"].get("judge") else ""),
        "",
        "## Accuracy (%) per mode",
        "",
        "| model | " + " | ".join(modes) + f" | overall | {label('pair_accuracy')} | {label('image_accuracy')} |",
        "|---|" + "---|" * (len(modes) + 3),
    ]
    left = []
    kinds = [k for k in ("OEQ", "YNQ") if any(k in m["metrics"].get("kinds", {}) for m in models.values())]
    for name, m in models.items():
        o = m["metrics"]["overall"]
        per = [_pct(m["metrics"]["modes"].get(md, {}).get("accuracy")) for md in modes]
        lines.append(
            f"| {name} | "
            + " | ".join(per)
            + f" | {_pct(o['accuracy'])} | {_pct(o['pair_accuracy'])} | {_pct(o['image_accuracy'])} |"
        )
        if left_out_line(o):
            left.append(f"- {name}: {left_out_line(o)}")
    if left:
        lines += [""] + left
    if len(kinds) > 1:
        lines += [
            "",
            "## Accuracy (%) per kind",
            "",
            "| model | " + " | ".join(kinds) + " |",
            "|---|" + "---|" * len(kinds),
        ]
        lines += [
            f"| {name} | " + " | ".join(_pct(m["metrics"]["kinds"].get(k, {}).get("accuracy")) for k in kinds) + " |"
            for name, m in models.items()
        ]
    if any("pair_groups" in m["metrics"]["overall"] for m in models.values()):
        lines += _groups_table(models, modes)
    if any("tp" in m["metrics"]["overall"] for m in models.values()):
        keys = YNQ_KEYS
        lines += [
            "",
            "## Yes/no questions",
            "",
            "| model | " + " | ".join(label(k) for k in keys) + " |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, m in models.items():
            o = m["metrics"]["overall"]
            if "tp" in o:
                lines.append(
                    f"| {name} | {_pct(o['precision'])} | {_pct(o['recall'])} | {_pct(o['f1'])} |"
                    f" {_pct(o['yes_ratio'])} | {_pct(o['truth_yes_ratio'])} | {o['unreadable']} |"
                )
    if any("hallusionbench" in m for m in models.values()):
        keys = HB_KEYS
        lines += [
            "",
            "## HallusionBench",
            "",
            "| model | " + " | ".join(label(k) for k in keys) + " | unclear |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, m in models.items():
            h = m.get("hallusionbench")
            if h:
                lines.append(
                    f"| {name} | {_pct(h['aAcc'])} | {_pct(h['qAcc'])} | {_pct(h['fAcc'])} |"
                    f" {figure_text('yes_pct_diff', h['yes_pct_diff'])} | {figure_text('fp_ratio', h['fp_ratio'])} |"
                    f" {h['unclear']} |"
                )
                if h.get("incomplete_question_pairs") or h.get("incomplete_figures"):
                    lines.append(
                        f"\n{name}: {h['incomplete_question_pairs']} question pair(s) and {h['incomplete_figures']} "
                        f"figure(s) with an unscored question left out of {label('qAcc')} and {label('fAcc')}\n"
                    )
    if any("judge_agreement" in m for m in models.values()):
        lines += [
            "",
            "## Judge vs workers (open answers both judged)",
            "",
            "| model | items compared | agree | Cohen's kappa | judged by the judge only | by workers only |",
            "|---|---|---|---|---|---|",
        ]
        for name, m in models.items():
            a = m.get("judge_agreement")
            if a:
                lines.append(
                    f"| {name} | {a['items']} | {a['agree']} | {_kappa(a['kappa'])} | {a['judge_only']} | "
                    f"{a['workers_only']} |"
                )
    unjudged = {n: m["oeq_unjudged"] for n, m in models.items() if m.get("oeq_unjudged")}
    if unjudged:
        lines += [
            "",
            "Open answers with no verdict (scored wrong): " + ", ".join(f"{n}: {k}" for n, k in unjudged.items()),
        ]
    refused = {n: m["oeq_no_answer"] for n, m in models.items() if m.get("oeq_no_answer")}
    if refused:
        lines += [
            "",
            "Open answers that do not answer, by the store's labels (scored wrong): "
            + ", ".join(f"{n}: {k}" for n, k in refused.items()),
        ]
    fails = {n: m for n, m in models.items() if m.get("failed")}
    if fails:
        lines += ["", "## Requests that got no answer (not scored)", ""]
        for n, m in fails.items():
            why = ", ".join(f"{st} {k}" for st, k in m["failed_by_status"].items())
            lines.append(f"- {n}: {m['failed']} ({why}); the items and reasons are in report.json and answers-*.jsonl")
    if report.get("across_models"):
        from vhmine.eval.across import markdown_lines

        lines += markdown_lines(report["across_models"])
    lines += [
        "",
        "## Figures",
        "",
        (
            "Each figure's name here and in the console, its key in report.json (and in the lmms-eval export's"
            " metrics), its unit and what it counts. Pairs, images, groups, question pairs and figures count only when"
            ' every item of theirs was scored; "-": there was none to count.'
        ),
        "",
        "| name | report.json key | unit | counts |",
        "|---|---|---|---|",
    ]
    shown = set()
    for m in models.values():
        o = m["metrics"]["overall"]
        shown |= set(o) | set(o.get("pair_groups") or {}) | set(m.get("hallusionbench") or {})
    lines += [f"| {name} | `{key}` | {unit(key)} | {what} |" for key, (name, what) in FIGURES.items() if key in shown]
    return "\n".join(lines) + "\n"


def bar_chart(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = report["modes"]
    models = list(report["models"])
    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(modes) + 2), 4))
    for k, name in enumerate(models):
        per = report["models"][name]["metrics"]["modes"]
        vals = [100 * (per.get(m, {}).get("accuracy") or 0) for m in modes]
        ax.bar([i + k * width - 0.4 + width / 2 for i in range(len(modes))], vals, width, label=name)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, rotation=30, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{report['benchmark']['name']}: accuracy per mode")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")  # the path may be a temporary name (atomic_write)
    plt.close(fig)
