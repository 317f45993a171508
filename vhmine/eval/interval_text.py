"""How eval's reports print intervals and paired comparisons: `61.3 [53.4, 68.7]`, a table of differences, a bar.

Reads the records report.json holds (a figure's `{"n", "ci95", "ci_method"}`, vhmine.eval.units; `comparisons`);
writes nothing. `with_ci` is a figure with its interval in the figure's unit (vhmine.eval.metrics.UNITS);
`comparison_lines` report.md's section of paired comparisons, a difference not told apart marked "not
distinguishable" (one rule, `distinguishable`: McNemar's p < 0.05 where there is one, else the interval leaves
out 0); `compare_lines` the console's lines for `vhmine eval --compare A B` (`compare_header` their first line, naming
the rule); for report.html, `ci_bar` the inline SVG of a share and its interval, `ci_title` its words,
`comparisons_html` the table of comparisons.
"""

from __future__ import annotations

from html import escape

from vhmine.eval.intervals import told_apart
from vhmine.eval.metrics import label, unit

NOT_DISTINGUISHABLE = "not distinguishable"


def _num(key: str, x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    if abs(x) < 5e-7:  # a difference of nothing (or -0.0, a turned-round 0) reads +0.0, never -0.0
        x = 0.0
    u = unit(key)
    if u == "%":
        return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"
    if u == "signed share" or signed:
        return f"{x:+.3f}"
    return f"{x:.3f}" if u == "share" else f"{x}"


def with_ci(key: str, value: float | None, record: dict | None) -> str:
    """`61.3 [53.4, 68.7]` (a % figure), `0.250 [0.120, 0.410]` (a share); the value alone when it has no interval."""
    text = _num(key, value)
    ci = (record or {}).get("ci95")
    if value is None or not ci:
        return text
    return f"{text} [{_num(key, ci[0])}, {_num(key, ci[1])}]"


def distinguishable(comparison: dict) -> bool:
    """The one verdict (vhmine.eval.intervals.told_apart): McNemar's p < 0.05 where the record has a p, else its
    interval leaves out 0; either way round of the two models it is the same."""
    return told_apart(comparison.get("p_value"), comparison.get("ci95"))


RULE_WORDS = (
    "Told apart: where a figure has an exact test (McNemar's, for every share: accuracy, aAcc, the yes ratio, pair "
    "and image accuracy, G-Acc, qAcc, fAcc) its p < 0.05; elsewhere the paired 95% interval leaves out 0"
)


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _row(c: dict) -> str:
    key = c["figure"]
    ci = c.get("ci95") or [None, None]
    verdict = "" if distinguishable(c) else NOT_DISTINGUISHABLE
    return (
        f"| {c['a']} | {c['b']} | {c.get('mode') or 'overall'} | {label(key)} | {_num(key, c['diff'], True)} | "
        f"[{_num(key, ci[0], True)}, {_num(key, ci[1], True)}] | {_p(c.get('p_value'))} | {c['n']} | {verdict} |"
    )


def comparison_lines(comparisons: list[dict]) -> list[str]:
    """report.md's paired comparisons: A minus B per figure (and mode), its 95% interval (a paired bootstrap over the
    figure's units), McNemar's exact p for every share; [] with fewer than two models."""
    if not comparisons:
        return []
    return [
        "",
        "## Paired comparisons (A - B)",
        "",
        "The difference on the units both models were scored on, its 95% interval (a paired bootstrap over those "
        f"units) and, for every share, the exact McNemar p-value. {RULE_WORDS} (report.json's `verdict_rule`); "
        f"otherwise {NOT_DISTINGUISHABLE}: this benchmark does not tell the two models apart on that figure.",
        "",
        "| A | B | mode | figure | A - B | 95% interval | p (McNemar) | units | |",
        "|---|---|---|---|---|---|---|---|---|",
    ] + [_row(c) for c in comparisons]


def compare_header(a: str, b: str) -> str:
    """The first line of `vhmine eval --compare A B`: what the figures are and the rule that tells the two apart."""
    return (
        f"{a} - {b} (95% intervals, a paired bootstrap; McNemar's exact p for every share; told apart: McNemar's "
        "p < 0.05 where there is one, else the interval leaves out 0):"
    )


def compare_lines(comparisons: list[dict], a: str, b: str) -> list[str]:
    """The console's lines for `vhmine eval --compare A B`: every figure's difference A - B (B - A turned round when
    the report holds them the other way), its interval, McNemar's p, and whether the two are told apart."""
    out = []
    for c in comparisons:
        if (c["a"], c["b"]) == (b, a):
            lo, hi = c["ci95"] or (None, None)
            c = {
                **c,
                "a": a,
                "b": b,
                "diff": None if c["diff"] is None else -c["diff"],
                "ci95": None if lo is None else [-hi, -lo],
            }
        elif (c["a"], c["b"]) != (a, b):
            continue
        key, ci = c["figure"], c.get("ci95") or [None, None]
        where = f"{c.get('mode')}: " if c.get("mode") else ""
        told = "told apart" if distinguishable(c) else NOT_DISTINGUISHABLE
        p = f", McNemar p {_p(c['p_value'])}" if c.get("p_value") is not None else ""
        out.append(
            f"  {where}{label(key)} {_num(key, c['diff'], True)} [{_num(key, ci[0], True)}, "
            f"{_num(key, ci[1], True)}] over {c['n']}{p}: {told}"
        )
    return out


def ci_bar(value: float | None, record: dict | None, width: int = 90) -> str:
    """report.html's bar of a share in [0, 1]: the interval as a band, the value as a tick (empty without one)."""
    ci = (record or {}).get("ci95")
    if value is None or not ci:
        return ""
    x = lambda v: round(max(0.0, min(1.0, v)) * width, 1)  # noqa: E731
    title = escape(f"95% interval {100 * ci[0]:.1f} to {100 * ci[1]:.1f} ({record.get('ci_method', '')})")
    return (
        f'<svg class="ci" width="{width}" height="8" role="img" aria-label="{title}"><title>{title}</title>'
        f'<rect x="0" y="3" width="{width}" height="2" fill="#d0d7de"/>'
        f'<rect x="{x(ci[0])}" y="1" width="{max(1.0, round(x(ci[1]) - x(ci[0]), 1))}" height="6" fill="#97bbf5"/>'
        f'<rect x="{round(x(value) - 0.5, 1)}" y="0" width="1.5" height="8" fill="#1f3d7a"/></svg>'
    )


def ci_title(key: str, record: dict | None) -> str:
    """A figure's interval in words, for a report.html cell's tooltip: `95% interval 53.4 to 68.7 over 150 (wilson)`;
    why there is none where the record says (`no interval: the benchmark's own`); else ""."""
    ci = (record or {}).get("ci95")
    if not ci:  # the truth yes ratio's "none (the benchmark's own)" (vhmine.eval.units.OWN) gives its reason
        why = str((record or {}).get("ci_method") or "")
        return f"no interval: {why.removeprefix('none (').removesuffix(')')}" if why.startswith("none (") else ""
    return f"95% interval {_num(key, ci[0])} to {_num(key, ci[1])} over {record.get('n')} ({record.get('ci_method')})"


def comparisons_html(comparisons: list[dict]) -> str:
    """report.html's table of paired comparisons (every figure, overall and per mode), filterable by mode; a row
    not told apart (`distinguishable`) is greyed and says "not distinguishable". "" with fewer than two models."""
    if not comparisons:
        return ""
    modes = list(dict.fromkeys(c.get("mode") or "overall" for c in comparisons))
    rows = []
    for c in comparisons:
        key, ci = c["figure"], c.get("ci95") or [None, None]
        told = distinguishable(c)
        mode = c.get("mode") or "overall"
        grey = "" if told else ' class="nd"'
        rows.append(
            f'<tr data-mode="{escape(mode)}"{grey}><td>{escape(c["a"])}</td>'
            f"<td>{escape(c['b'])}</td><td>{escape(mode)}</td><td>{escape(label(key))}</td>"
            f'<td class="num">{_num(key, c["diff"], True)}</td><td class="num">[{_num(key, ci[0], True)}, '
            f'{_num(key, ci[1], True)}]</td><td class="num">{_p(c.get("p_value"))}</td><td class="num">{c["n"]}</td>'
            f"<td>{'told apart' if told else NOT_DISTINGUISHABLE}</td></tr>"
        )
    options = "".join(f'<option value="{escape(m)}">{escape(m)}</option>' for m in modes)
    return (
        '<p class="note">A - B on the units both models were scored on, its 95% interval (a paired bootstrap over '
        f"those units) and, for every share, the exact McNemar p-value. {escape(RULE_WORDS)}. Greyed: not told apart, "
        f"so this benchmark does not tell the two apart on that figure ({NOT_DISTINGUISHABLE}).</p>"
        f'<div class="cfilters"><label>mode <select id="c-mode"><option value="">all</option>{options}</select>'
        '</label> <label><input type="checkbox" id="c-told"> told apart only</label></div>'
        '<table class="small" id="comparisons"><thead><tr><th>A</th><th>B</th><th>mode</th><th>figure</th>'
        "<th>A - B</th><th>95% interval</th><th>p (McNemar)</th><th>units</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
