"""eval's report files: `report.md` (tables, several models side by side) and `accuracy_by_mode.png`.

Reads the report dict that vhmine.eval.job.evaluate builds (also written as report.json); writes the two
files' contents (`markdown`) and the chart (`bar_chart`, matplotlib). Where the benchmark has pair
groups, `markdown` adds their question, image and group accuracy per mode (NaturalBench's Q-Acc, I-Acc,
G-Acc, vhmine.eval.metrics.pair_groups) beside the per-item accuracy VHTest reports. Items whose request failed are
not in any figure; `markdown` lists how many per model and why. Every figure is printed with its 95% interval,
`61.3 [53.4, 68.7]` (report.json's `intervals`, vhmine.eval.units; a count and the benchmark's own truth yes
ratio have none and print their value alone), and with two models or more the paired
comparisons follow (report.json's `comparisons`: every figure overall, accuracy per mode; vhmine.eval.interval_text).
The chart's bars carry their intervals as error bars. Every figure is printed under its one label
(vhmine.eval.metrics.FIGURES), here, in the console summary (`model_lines`) and as report.json's key.
"""

from __future__ import annotations

from pathlib import Path

from vhmine.eval.interval_text import comparison_lines, with_ci
from vhmine.eval.metrics import FIGURES, label, unit


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _ci(s: dict, key: str, value=None) -> str:
    """A summary's figure with its 95% interval as report.md prints it, `61.3 [53.4, 68.7]` (interval_text.with_ci);
    `value`: where the figure is not the summary's own key (its pair groups' Q-/I-/G-Acc)."""
    return with_ci(key, s.get(key) if value is None else value, (s.get("intervals") or {}).get(key))


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


def _over(key: str, value, n: int, what: str, record: dict | None = None) -> str:
    """`<name> <value>% [<lo>, <hi>] over <n> <what>(s)` (the 95% interval where `record` has one), or that there was
    none complete to count (never "-% over 0")."""
    if not n:
        return f"no complete {what}s for {label(key)}"
    ci = (record or {}).get("ci95")
    bounds = f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""
    return f"{label(key)} {_pct(value)}%{bounds} over {n} {what}(s)"


def figures_line(o: dict) -> str:
    """A model's overall accuracy, pair accuracy and image accuracy with their 95% intervals, for the command's
    summary."""
    left = left_out_line(o)
    ci = o.get("intervals") or {}
    return (
        _over("accuracy", o["accuracy"], o["n"], "item", ci.get("accuracy"))
        + "; "
        + _over("pair_accuracy", o["pair_accuracy"], o["pairs"], "pair", ci.get("pair_accuracy"))
        + "; "
        + _over("image_accuracy", o["image_accuracy"], o["images"], "image", ci.get("image_accuracy"))
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
                    f"| {name} | {md} | {_ci(s, 'accuracy')} | {g['groups']}{left} | {_ci(s, 'q_acc', g['q_acc'])} | "
                    f"{_ci(s, 'i_acc', g['i_acc'])} | {_ci(s, 'g_acc', g['g_acc'])} |"
                )
    return lines


def markdown(report: dict) -> str:
    models = report["models"]
    modes = report["modes"]
    lines = [
        f"# {report['benchmark']['name']}: {len(models)} model(s)",
        "",
        _rule_line(report),
        "",
        "## Accuracy (%) per mode",
        "",
        "Each figure with its 95% interval: `61.3 [53.4, 68.7]` (the Figures section below says how each is drawn).",
        "",
        "| model | " + " | ".join(modes) + f" | overall | {label('pair_accuracy')} | {label('image_accuracy')} |",
        "|---|" + "---|" * (len(modes) + 3),
    ]
    left = []
    kinds = [k for k in ("OEQ", "YNQ") if any(k in m["metrics"].get("kinds", {}) for m in models.values())]
    for name, m in models.items():
        o = m["metrics"]["overall"]
        per = [_ci(m["metrics"]["modes"].get(md, {}), "accuracy") for md in modes]
        lines.append(
            f"| {name} | "
            + " | ".join(per)
            + f" | {_ci(o, 'accuracy')} | {_ci(o, 'pair_accuracy')} | {_ci(o, 'image_accuracy')} |"
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
            f"| {name} | " + " | ".join(_ci(m["metrics"]["kinds"].get(k, {}), "accuracy") for k in kinds) + " |"
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
                lines.append(f"| {name} | " + " | ".join(_ci(o, k) for k in keys[:-1]) + f" | {o['unreadable']} |")
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
                lines.append(f"| {name} | " + " | ".join(_ci(h, k) for k in keys) + f" | {h['unclear']} |")
                if h.get("incomplete_question_pairs") or h.get("incomplete_figures"):
                    lines.append(
                        f"\n{name}: {h['incomplete_question_pairs']} question pair(s) and {h['incomplete_figures']} "
                        f"figure(s) with an unscored question left out of {label('qAcc')} and {label('fAcc')}\n"
                    )
    if any("mmvp" in m for m in models.values()):
        lines += ["", "## MMVP's pair accuracy", ""]
        lines += [f"- {name}: {mmvp_line(m['mmvp'])}" for name, m in models.items() if "mmvp" in m]
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
    lines += _comparisons(report.get("comparisons") or [])
    lines += [
        "",
        "## Figures",
        "",
        (
            "Each figure's name here and in the console, its key in report.json (and in the lmms-eval export's"
            " metrics), its unit, what it counts and how its 95% interval is drawn. Pairs, images, groups, question"
            ' pairs and figures count only when every item of theirs was scored; "-": there was none to count.'
        ),
        "",
        (
            "Intervals: Wilson's score interval for a share of items (accuracy, precision, recall, the yes ratio,"
            " aAcc, the false-positive ratio) and for a share of units, over the units it counts (pair and image"
            " accuracy, G-Acc, qAcc, fAcc: n is the pairs, images, groups, question pairs or figures); for the figures"
            " that are not a share (F1; Q-Acc and I-Acc, ratios over pair groups; HallusionBench's yes-percentage"
            f" difference) a percentile bootstrap over the units the figure counts, {_resampling(report)}."
            " The truth yes ratio is the benchmark's own and has none. report.json gives every figure's `n`, `ci95`"
            " and `ci_method` (docs/eval.md)."
        ),
        "",
        "| name | report.json key | unit | counts | 95% interval |",
        "|---|---|---|---|---|",
    ]
    shown, methods = set(), {}
    for m in models.values():
        o = m["metrics"]["overall"]
        shown |= set(o) | set(o.get("pair_groups") or {}) | set(m.get("hallusionbench") or {})
        for part in (o, m.get("hallusionbench") or {}):
            for key, rec in (part.get("intervals") or {}).items():
                methods.setdefault(key, "none (a count)" if rec.get("ci_method") == "count" else rec["ci_method"])
    lines += [
        f"| {name} | `{key}` | {unit(key)} | {what} | {methods.get(key, '-')} |"
        for key, (name, what) in FIGURES.items()
        if key in shown
    ]
    return "\n".join(lines) + "\n"


def _rule_line(report: dict) -> str:
    oeq = report["oeq"]
    if report["rule"] == "mmvp":
        return (
            f"rule: `mmvp`, MMVP's gpt_grader.py: the judge ({oeq.get('judge')}) grades every answer with MMVP's"
            " prompt, only a reply that is exactly yes counts, and a pair counts when both its answers do"
        )
    judged = f" (judge {oeq['judge']})" if oeq.get("judge") else ""
    return f"yes/no rule: `{report['rule']}`; OEQ scorer: `{oeq['scorer']}`{judged}"


def mmvp_line(rec: dict) -> str:
    """A model's figure under MMVP's rule as MMVP prints it (a fraction), and MMVP's own count over the lines of an
    answers file where that differs."""
    acc = "-" if rec["pair_accuracy"] is None else f"{rec['pair_accuracy']:.4g}"
    line = f"MMVP: {rec['pairs_right']} of {rec['pairs']} pair(s) right, accuracy {acc}"
    if "line_pairs" in rec and rec["line_pairs"] != [rec["pairs_right"], rec["pairs"]]:
        right, pairs = rec["line_pairs"]
        line += (
            f"; over the answers file's consecutive lines, as gpt_grader.py pairs them: {right} of {pairs} "
            f"({len(rec['order_breaks'])} line pair(s) not a pair of the benchmark)"
        )
    return line


def _resampling(report: dict) -> str:
    boot = (report.get("intervals") or {}).get("bootstrap") or {}
    return f"{boot.get('resamples', '?'):,} resamples, seed {boot.get('seed', '?')}"


def _comparisons(comparisons: list[dict]) -> list[str]:
    """report.md's paired comparisons: every figure on the whole benchmark, and accuracy per mode (report.json holds
    every figure of every mode)."""
    shown = [c for c in comparisons if c.get("mode") is None or c["figure"] == "accuracy"]
    lines = comparison_lines(shown)
    if lines and len(shown) < len(comparisons):
        lines += [
            "",
            f"Per mode only accuracy is shown here: every figure of every mode is in report.json's"
            f" `comparisons` ({len(comparisons)} in all).",
        ]
    return lines


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
        # each bar's 95% interval as an error bar (none where the mode was not scored)
        cis = [((per.get(m, {}).get("intervals") or {}).get("accuracy") or {}).get("ci95") for m in modes]
        below = [v - 100 * ci[0] if ci else 0 for v, ci in zip(vals, cis, strict=True)]
        above = [100 * ci[1] - v if ci else 0 for v, ci in zip(vals, cis, strict=True)]
        x = [i + k * width - 0.4 + width / 2 for i in range(len(modes))]
        ax.bar(x, vals, width, label=name, yerr=[below, above], capsize=2, error_kw={"elinewidth": 0.8})
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, rotation=30, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{report['benchmark']['name']}: accuracy per mode (95% intervals)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")  # the path may be a temporary name (atomic_write)
    plt.close(fig)
