"""The people's figures as people read them: the one way the app and the CLI write a share, a number and a time.

Reads and writes nothing. `percent` is how `vhmine draft --stats` (savings_table) and the app's tables both write a
share ("-9909.2%"); `number` drops the trailing zeros a fixed number of places leaves ("18.9", not "18.9000", which is
how a table showed a float); `duration` writes hours as hours and minutes ("2 h 15 min", "45 min").
"""

from __future__ import annotations


def percent(x: float | None) -> str:
    """A share (1.0 is all) in percent with one decimal: 0.25 -> "25.0%", -99.092 -> "-9909.2%"; None -> "-"."""
    return "-" if x is None else f"{100 * x:.1f}%"


def number(x: float | None, places: int = 1) -> str | None:
    """`x` rounded to `places` decimals, without trailing zeros: 18.9 -> "18.9", 19.0 -> "19"; None stays None."""
    if x is None:
        return None
    text = f"{x:.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def duration(hours: float | None) -> str | None:
    """Hours as people say them, to the minute: "2 h 15 min", "3 h", "45 min", "under 1 min" (more than nothing),
    "0 min" (nothing); None stays None."""
    if hours is None:
        return None
    minutes = hours * 60
    if minutes <= 0:
        return "0 min"
    if minutes < 1:
        return "under 1 min"
    h, m = divmod(round(minutes), 60)
    return f"{h} h {m} min" if h and m else (f"{h} h" if h else f"{m} min")
