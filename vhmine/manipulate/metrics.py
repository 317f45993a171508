"""AutoHallusion's attack success rates over cases: ASR, MASR (correctness) and CASR (consistency).

Reads `FamilyResult`s (vhmine.manipulate.detect); writes nothing. A case is one edited image and one
question family (existence or spatial), the unit the paper's tables count. It is induced by
correctness when some answer contradicts the truth the edit implies (MASR), by consistency when two
answers about one fact conflict across context levels, or an answer denies what the victim's caption
says (CASR); ASR counts a case induced either way. Every rate is given overall and for existence
and spatial cases, with the average number of questions asked before a case counted as induced
(over induced cases only).

A case none of whose questions got an answer (every request failed) is no failed attack: it is left out
of every rate and counted apart (`unanswered`). Answers whose judge request failed are counted
(`unjudged`): they are never read by the yes/no rule instead. Rates are kept unrounded (percentages);
only `metrics_table`, the printed table, rounds.
"""

from __future__ import annotations

from collections.abc import Sequence

FAMILIES = ("existence", "spatial")


def _rates(results: Sequence) -> dict:
    answered = [r for r in results if r.asked > 0]  # a case with no answer at all says nothing about the attack
    n = len(answered)
    induced = [r for r in answered if r.success]

    def pct(k: int) -> float | None:
        return 100.0 * k / n if n else None

    firsts = [r.first_induced for r in induced if r.first_induced is not None]
    return {
        "cases": n,
        "ASR": pct(len(induced)),
        "MASR": pct(sum(r.by_correctness for r in answered)),
        "CASR": pct(sum(r.by_consistency for r in answered)),
        "induced": len(induced),
        "avg_questions_to_induce": sum(firsts) / len(firsts) if firsts else None,
        "unanswered": len(results) - n,
        "unjudged": sum(getattr(r, "unjudged", 0) for r in answered),
    }


def attack_metrics(results: Sequence) -> dict:
    """{"overall": rates, "existence": rates, "spatial": rates, "by_strategy": {strategy: rates}}."""
    out = {"overall": _rates(results)}
    for fam in FAMILIES:
        out[fam] = _rates([r for r in results if r.family == fam])
    out["by_strategy"] = {
        s: _rates([r for r in results if r.strategy == s]) for s in sorted({r.strategy for r in results})
    }
    return out


def metrics_table(m: dict) -> str:
    def fmt(v) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        f"  {'':<12} {'cases':>5} {'ASR':>6} {'MASR':>6} {'CASR':>6} {'avg q':>6} {'no answer':>9} {'unjudged':>8}"
    ]
    rows = (
        [("overall", m["overall"])]
        + [(f, m[f]) for f in FAMILIES]
        + [(f"  {s}", r) for s, r in m.get("by_strategy", {}).items()]
    )
    for name, r in rows:
        avg = "-" if r["avg_questions_to_induce"] is None else f"{r['avg_questions_to_induce']:.2f}"
        lines.append(
            f"  {name:<12} {r['cases']:>5} {fmt(r['ASR']):>6} {fmt(r['MASR']):>6} {fmt(r['CASR']):>6} {avg:>6} "
            f"{r['unanswered']:>9} {r['unjudged']:>8}"
        )
    if m["overall"]["unanswered"]:
        lines.append(
            f"  {m['overall']['unanswered']} case(s) got no answer to any question: left out of ASR, MASR and "
            "CASR; rerun the same command to ask them again"
        )
    return "\n".join(lines)
