"""The CLIP-vs-DINOv2 scatter plot of a mining run: scatter.png, drawn in numpy and written by Pillow.

Reads only the similarities it is given (and a font: DejaVu Sans from matplotlib's installed data files, found
without importing matplotlib, else Pillow's own); writes the PNG. Three layers of round markers over a grid:
a grey background of random pairs (or every pair of a small collection), the CLIP-alike pairs outside the
box in blue, those in the box in red; the box (CLIP >= --clip, DINOv2 <= --dino) dashed, both thresholds as
lines, a legend whose labels say the run's own counts (returned, for run.json's scatter_legend).

Why not matplotlib: importing its figure and drawing 180,000 markers took 0.45 CPU-s of a 50,000-row mine
whose join takes 7; here each layer's discs are dilated from their centres on a boolean canvas at twice the
resolution and averaged down (anti-aliased): 0.04 CPU-s (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SIZE = (770, 660)  # the picture, pixels (7 x 6 inches at 110 dpi, as it was)
FRAME = (78, 30, 755, 608)  # the axes' box: left, top, right, bottom
SUPERSAMPLE = 2  # markers are stamped at twice the resolution, then averaged down
MOST_POINTS = 200_000  # more CLIP-alike pairs than this: a random sample of them is drawn (the legend keeps the counts)
GREY, BLUE, RED = (170, 170, 170), (76, 114, 176), (221, 51, 51)
BACKGROUND_OPACITY = 0.6  # the grey background's markers over the grid
GRID, INK = (229, 229, 229), (34, 34, 34)


def box_label(in_box: int, written: int | None = None) -> str:
    """The legend of the pairs in the box: how many are in it and, when --max-pairs / --max-per-image kept
    fewer, how many of them pairs.parquet holds."""
    if written is None or written == in_box:
        return f"in the box: mined and written ({in_box})"
    return f"in the box ({in_box}); {written} of them written (--max-pairs / --max-per-image)"


def background_label(shown: int, pairs: int | None = None) -> str:
    """The legend of the background: every pair of the collection (`pairs` of them), or a random sample."""
    if pairs is not None and shown == pairs:
        return f"all pairs ({shown:,})"
    return f"a random sample of {shown:,} pairs" + (f" (of {pairs:,})" if pairs is not None else "")


@dataclass(frozen=True)
class Axes:
    """The data ranges the frame shows: x (CLIP) from x0 to x1, y (DINOv2) from y0 to y1 (y1 at the top)."""

    x0: float
    x1: float
    y0: float
    y1: float

    def pixel(self, x, y, scale: int | None = None):
        """(column, row) in the picture of data points (arrays or numbers); with `scale`, in the frame's
        inside drawn at that many times the resolution (its top-left corner at 0, 0)."""
        left, top, right, bottom = FRAME
        col = (np.asarray(x, float) - self.x0) / (self.x1 - self.x0) * (right - left)
        row = (self.y1 - np.asarray(y, float)) / (self.y1 - self.y0) * (bottom - top)
        return (col + left, row + top) if scale is None else (col * scale, row * scale)


def scatter_axes(clip_sim, dino_sim, background, clip_min: float, dino_max: float) -> tuple[Axes, float]:
    """The axes that hold every point, the box and both thresholds, 5% of the span added each side; and the
    box's lower edge (a little below every point and the DINOv2 threshold)."""
    xs = [np.asarray(a, float) for a in (clip_sim, background[0])]
    ys = [np.asarray(a, float) for a in (dino_sim, background[1])]
    lo = min([-0.1, dino_max] + [float(a.min()) for a in ys if len(a)]) - 0.02
    x_lo = min([clip_min] + [float(a.min()) for a in xs if len(a)])
    x_hi = max([1.0] + [float(a.max()) for a in xs if len(a)])
    y_hi = max([dino_max] + [float(a.max()) for a in ys if len(a)])
    dx, dy = max(x_hi - x_lo, 1e-6) * 0.05, max(y_hi - lo, 1e-6) * 0.05
    return Axes(x_lo - dx, x_hi + dx, lo - dy, y_hi + dy), lo


def write_scatter(
    path: Path,
    clip_sim,
    dino_sim,
    background,
    clip_min: float,
    dino_max: float,
    *,
    title: str,
    written: int | None = None,
    pairs: int | None = None,
) -> list[str]:
    """Scatter of candidate pairs (and a random background sample), with the threshold box drawn; `written`:
    the pairs of the box that the run wrote; `pairs`: every pair of the collection (the background is all of
    them when it holds that many). Returns the legend's labels."""
    from PIL import Image, ImageDraw

    clip_sim, dino_sim = np.asarray(clip_sim, float), np.asarray(dino_sim, float)
    bg_c, bg_d = (np.asarray(a, float) for a in background)
    n_in = int((dino_sim <= dino_max).sum())  # counted before any sampling: the legend gives the run's numbers
    labels = [background_label(len(bg_c), pairs), f"CLIP-alike, DINOv2-alike ({len(dino_sim) - n_in})"]
    labels.append(box_label(n_in, written))
    if len(clip_sim) > MOST_POINTS:  # keep the PNG readable and quick to draw
        pick = np.random.default_rng(0).choice(len(clip_sim), MOST_POINTS, replace=False)
        clip_sim, dino_sim = clip_sim[pick], dino_sim[pick]
    axes, lo = scatter_axes(clip_sim, dino_sim, (bg_c, bg_d), clip_min, dino_max)
    xticks, yticks = nice_ticks(axes.x0, axes.x1), nice_ticks(axes.y0, axes.y1)
    inside = dino_sim <= dino_max
    layers = [(bg_c, bg_d, GREY, 1.6, BACKGROUND_OPACITY), (clip_sim[~inside], dino_sim[~inside], BLUE, 2.3, 1.0)]
    layers.append((clip_sim[inside], dino_sim[inside], RED, 2.6, 1.0))
    image = Image.new("RGB", SIZE, "white")
    image.paste(Image.fromarray(_plot_area(axes, xticks, yticks, layers)), FRAME[:2])
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = FRAME
    (cx, dy), (rx, ly) = axes.pixel(clip_min, dino_max), axes.pixel(1.0, lo)
    draw.line([(round(cx), top), (round(cx), bottom)], fill=RED, width=1)
    draw.line([(left, round(dy)), (right, round(dy))], fill=RED, width=1)
    _dashed_box(draw, (round(cx), round(dy), round(rx), round(ly)), RED, width=2)
    draw.rectangle(FRAME, outline=INK, width=1)
    _ticks(draw, axes, xticks, yticks)
    _text(image, title, ((left + right) / 2, 14), size=15)
    _text(image, "CLIP cosine similarity", ((left + right) / 2, SIZE[1] - 20), size=15)
    _text(image, "DINOv2 cosine similarity", (16, (top + bottom) / 2), size=15, rotate=True)
    _legend(image, labels, [GREY, BLUE, RED])
    image.save(path, format="PNG", optimize=False)
    return labels


def nice_ticks(lo: float, hi: float, most: int = 8) -> np.ndarray:
    """Round tick values inside [lo, hi]: multiples of 1, 2, 2.5 or 5 times a power of ten, at most `most`."""
    span = hi - lo
    unit = 10.0 ** math.floor(math.log10(span / most))
    step = next(unit * m for m in (1, 2, 2.5, 5, 10) if span / (unit * m) <= most)
    first = math.ceil(lo / step - 1e-9)
    ticks = (first + np.arange(int(math.floor(hi / step + 1e-9)) - first + 1)) * step
    return np.round(ticks, 12)


def tick_label(value: float, step: float) -> str:
    """A tick's text: as many decimals as the step needs, a true minus sign, never "-0"."""
    power = math.floor(math.log10(step) + 1e-9)
    decimals = max(0, -power) + (round(step / 10.0**power, 6) == 2.5)
    text = f"{value:.{decimals}f}"
    return f"{0:.{decimals}f}" if float(text) == 0 else text.replace("-", "\u2212")


def _plot_area(axes: Axes, xticks, yticks, layers) -> np.ndarray:
    """The frame's inside as an RGB array: the grid, then each layer's markers (x, y, colour, radius in
    pixels, opacity) over it, each layer's coverage of a pixel the share of its SUPERSAMPLE x SUPERSAMPLE
    sub-pixels that the layer's discs reach (stamp_discs)."""
    s = SUPERSAMPLE
    left, top, right, bottom = FRAME
    h, w = bottom - top, right - left
    canvas = np.full((h, w, 3), 255, np.uint8)
    gx, _ = axes.pixel(xticks, np.zeros(len(xticks)), scale=1)
    _, gy = axes.pixel(np.zeros(len(yticks)), yticks, scale=1)
    canvas[:, np.clip(np.round(gx).astype(int), 0, w - 1)] = GRID
    canvas[np.clip(np.round(gy).astype(int), 0, h - 1), :] = GRID
    flat = canvas.reshape(-1, 3)
    for x, y, colour, radius, alpha in layers:
        if not len(x):
            continue
        col, row = axes.pixel(x, y, scale=s)
        fine = stamp_discs(np.round(row).astype(np.int64), np.round(col).astype(np.int64), h * s, w * s, radius * s)
        # each pixel's sub-pixels added as strided views (numpy's sum over two axes of a reshape: 20x the time)
        cover = sum(fine[i::s, j::s].view(np.uint8) for i in range(s) for j in range(s)).ravel()
        at = np.flatnonzero(cover)
        share = (cover[at] * (alpha / (s * s))).astype(np.float32)[:, None]
        flat[at] = np.round(flat[at] * (1 - share) + np.asarray(colour, np.float32) * share).astype(np.uint8)
    return canvas


def stamp_discs(rows, cols, h: int, w: int, radius: float) -> np.ndarray:
    """A boolean (h, w) canvas, True within `radius` of any centre (rows, cols; any may lie outside). The
    centres are marked once, then dilated by the disc as rows of runs: the centres widened by k each way
    (k = 0, 1, ... the radius), each shifted to the rows whose run is k wide, a few passes over a small
    canvas instead of an index per centre and disc pixel (fresh memory is what costs most here)."""
    reach = int(math.floor(radius))
    pad = reach
    centres = np.zeros((h + 2 * pad, w + 2 * pad), bool)
    inside = (rows >= -pad) & (rows < h + pad) & (cols >= -pad) & (cols < w + pad)
    centres[rows[inside] + pad, cols[inside] + pad] = True
    out, widened = np.zeros_like(centres), centres.copy()
    half = {dy: int(math.floor(math.sqrt(radius**2 - dy**2))) for dy in range(-reach, reach + 1)}
    for k in range(reach + 1):
        if k:
            widened[:, k:] |= centres[:, :-k]
            widened[:, :-k] |= centres[:, k:]
        for dy in (d for d, run in half.items() if run == k):
            if dy >= 0:
                out[dy:] |= widened[: len(out) - dy]
            else:
                out[:dy] |= widened[-dy:]
    return out[pad : pad + h, pad : pad + w]


def _dashed_box(draw, box, colour, width: int, dash: int = 8, gap: int = 4) -> None:
    """An axis-aligned rectangle (left, top, right, bottom) drawn in dashes."""
    left, top, right, bottom = box
    for a in range(left, right, dash + gap):
        for y in (top, bottom):
            draw.line([(a, y), (min(a + dash, right), y)], fill=colour, width=width)
    for a in range(top, bottom, dash + gap):
        for x in (left, right):
            draw.line([(x, a), (x, min(a + dash, bottom))], fill=colour, width=width)


def _ticks(draw, axes: Axes, xticks, yticks) -> None:
    """Tick marks outside the frame and their values."""
    left, top, right, bottom = FRAME
    font = _font(13)
    step_x, step_y = (t[1] - t[0] if len(t) > 1 else 1.0 for t in (xticks, yticks))
    xs, _ = axes.pixel(xticks, np.zeros(len(xticks)))
    _, ys = axes.pixel(np.zeros(len(yticks)), yticks)
    for value, x in zip(xticks, np.round(xs).astype(int).tolist()):
        draw.line([(x, bottom), (x, bottom + 4)], fill=INK)
        draw.text((x, bottom + 6), tick_label(value, step_x), fill=INK, font=font, anchor="mt")
    for value, y in zip(yticks, np.round(ys).astype(int).tolist()):
        draw.line([(left - 4, y), (left, y)], fill=INK)
        draw.text((left - 6, y), tick_label(value, step_y), fill=INK, font=font, anchor="rm")


def _text(image, text: str, centre, size: int, rotate: bool = False) -> None:
    """Text centred at `centre`; turned to read upwards when `rotate`."""
    from PIL import Image, ImageDraw

    font = _font(size)
    if not rotate:
        ImageDraw.Draw(image).text(centre, text, fill=INK, font=font, anchor="mm")
        return
    box = ImageDraw.Draw(image).textbbox((0, 0), text, font=font, anchor="lt")
    strip = Image.new("L", (box[2] + 2, box[3] + 2), 0)
    ImageDraw.Draw(strip).text((1, 1), text, fill=255, font=font, anchor="lt")
    strip = strip.rotate(90, expand=True)
    corner = (round(centre[0] - strip.width / 2), round(centre[1] - strip.height / 2))
    image.paste(Image.new("RGB", strip.size, INK), corner, strip)


def _legend(image, labels: list[str], colours) -> None:
    """The legend in the frame's upper left corner: a marker and a label a line."""
    from PIL import ImageDraw

    draw, font = ImageDraw.Draw(image), _font(12)
    left, top = FRAME[0] + 6, FRAME[1] + 6
    width = max(draw.textlength(label, font=font) for label in labels) + 34
    draw.rectangle((left, top, left + width, top + 8 + 17 * len(labels)), fill="white", outline=(204, 204, 204))
    for k, (label, colour) in enumerate(zip(labels, colours)):
        y = top + 4 + 17 * k + 8
        draw.ellipse((left + 10, y - 3, left + 16, y + 3), fill=colour)
        draw.text((left + 26, y), label, fill=INK, font=font, anchor="lm")


@functools.cache
def _font(size: int):
    """DejaVu Sans at `size` pixels (matplotlib's, as the plot had; found without importing matplotlib), else
    Pillow's own font."""
    import importlib.util
    import os

    from PIL import ImageFont

    spec = importlib.util.find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "mpl-data", "fonts", "ttf", "DejaVuSans.ttf")
        if os.path.isfile(path):
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size)
