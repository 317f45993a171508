"""How many items per mode tell two models apart: the paired design's sample size (McNemar's test, Connor 1987).

Reads and writes nothing (standard library only). `vhmine status` and `vhmine export` name the modes that fall short
(`short_modes`; their line `shortfall_line`, the manifest's record `shortfall`); docs/eval.md explains the
arithmetic. Two models answer the same n items of a mode; what tells them apart is the discordant items, those
exactly one of them gets right. With delta the difference in accuracy to
detect and psi the share of discordant items, a two-sided McNemar test at level alpha has the power asked for when

    n = (z_{1-alpha/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2

(R. J. Connor, "Sample size for testing differences in proportions for the paired-sample design", Biometrics
43(1):207-211, 1987, p. 209; its worked example, 5% and 45% discordant each way, needs 23 pairs). psi is the
design's unknown: `discordant_share` derives it from the two accuracies and the correlation of the models' right and
wrong answers; models at 60% +- 2.5 points correlated 0.5 (lmms-eval's power_analysis default) give 0.24, near the
default here, 0.25. Defaults, 60% and 5 points at power 0.8 and alpha 0.05, then need 783 items per mode;
independent models (psi 0.48) 1,509; a VHTest-sized mode of 150 items has a power of 0.23. The formula gives the
asymptotic McNemar test its power (80.3% at 783 in a simulation); the exact test eval reports is a little
conservative (78%) (tests/rules/test_sample_size.py).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from vhmine.errors import InputError

ACCURACY, DIFFERENCE, POWER, ALPHA, DISCORDANT = 0.6, 0.05, 0.8, 0.05, 0.25
METHOD = "connor-1987"


def discordant_share(accuracy_a: float, accuracy_b: float, correlation: float) -> float:
    """psi, the expected share of items exactly one of two models gets right, from their accuracies and the
    correlation of their right/wrong answers: p_a q_b + p_b q_a - 2 rho sqrt(p_a q_a p_b q_b)."""
    pa, pb = accuracy_a, accuracy_b
    return pa * (1 - pb) + pb * (1 - pa) - 2 * correlation * math.sqrt(pa * (1 - pa) * pb * (1 - pb))


def _design(accuracy: float, difference: float, discordant: float | None) -> float:
    """psi for two models at accuracy +- difference/2, checked to be a possible table of paired answers."""
    d = abs(difference)
    if not 0 < d < 1:
        raise InputError(f"the difference to detect must be between 0 and 1 (a share), not {difference}")
    pa, pb = accuracy + d / 2, accuracy - d / 2
    if not (0 <= pb and pa <= 1):
        raise InputError(f"accuracy {accuracy} +- {d / 2} leaves [0, 1]: give an accuracy further from 0 and 1")
    psi = discordant_share(pa, pb, 0.0) if discordant is None else discordant
    p10, p01 = (psi + d) / 2, (psi - d) / 2  # A right and B wrong; the reverse
    if p01 < 0 or p10 > min(pa, 1 - pb) or p01 > min(pb, 1 - pa):
        lo, hi = d, min(2 * min(pa, 1 - pb) - d, 2 * min(pb, 1 - pa) + d)
        raise InputError(
            f"a discordant share of {psi} is impossible for models at {pa:.3f} and {pb:.3f}: "
            f"it lies between {lo:.3f} and {hi:.3f}"
        )
    return psi


def instances_needed(
    accuracy: float = ACCURACY,
    difference: float = DIFFERENCE,
    power: float = POWER,
    alpha: float = ALPHA,
    discordant: float | None = DISCORDANT,
) -> int:
    """Items per mode for a two-sided McNemar test at `alpha` to tell two models apart with `power` when their
    accuracies differ by `difference` around `accuracy`, with a share `discordant` of items one model gets right
    and the other wrong (None: models whose answers are independent)."""
    psi = _design(accuracy, difference, discordant)
    d = abs(difference)
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    return math.ceil((za * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2 / (d * d))


def power_at(
    n: int,
    accuracy: float = ACCURACY,
    difference: float = DIFFERENCE,
    alpha: float = ALPHA,
    discordant: float | None = DISCORDANT,
) -> float:
    """The power of that test with `n` items (Connor's formula read the other way; the far tail is left out)."""
    psi = _design(accuracy, difference, discordant)
    d = abs(difference)
    za = NormalDist().inv_cdf(1 - alpha / 2)
    return NormalDist().cdf((d * math.sqrt(n) - za * math.sqrt(psi)) / math.sqrt(psi - d * d))


def short_modes(counts: dict[str, int], needed: int) -> dict[str, int]:
    """The modes with fewer than `needed` items (mode -> its items), in the given order: what status and export name."""
    return {m: k for m, k in counts.items() if k < needed}


def settings(
    accuracy: float = ACCURACY,
    difference: float = DIFFERENCE,
    power: float = POWER,
    alpha: float = ALPHA,
    discordant: float | None = DISCORDANT,
) -> dict:
    """The design as a manifest or status records it, with the items it needs."""
    return {
        "accuracy": accuracy,
        "difference": difference,
        "power": power,
        "alpha": alpha,
        "discordant": discordant,
        "method": METHOD,
        "needed": instances_needed(accuracy, difference, power, alpha, discordant),
    }


def shortfall(counts: dict[str, int]) -> dict:
    """The default design (`settings`) with the modes of `counts` (mode -> items) that fall short of it: what an
    export's manifest and `vhmine status --json` record."""
    design = settings()
    return {**design, "short_modes": short_modes(counts, design["needed"])}


def shortfall_line(counts: dict[str, int], what: str = "items") -> str | None:
    """The line `vhmine status` and `vhmine export` print for the modes of `counts` under the default design's need;
    None when no mode is."""
    needed = instances_needed()
    short = short_modes(counts, needed)
    if not short:
        return None
    return (
        f"{len(short)} of {len(counts)} mode(s) have fewer than the {needed} {what} per mode that tell two models "
        f"{100 * DIFFERENCE:g} points apart at {100 * ACCURACY:g}% accuracy (power {POWER:g}, alpha {ALPHA:g}, "
        f"{100 * DISCORDANT:g}% of items answered right by one model only; docs/eval.md): "
        + ", ".join(f"{m} {k}" for m, k in short.items())
    )
