"""The HTML gallery of a mining run: its top pairs, self-contained (the scatter plot: mine.scatter).

Written into the run folder by mine.publish. The gallery embeds small JPEG thumbnails (each image decoded once,
in a few threads, a JPEG at a fraction of its size), so it can be mailed or opened anywhere; every text in it
is HTML-escaped. Images are read where the index says they are (a file, or a WebDataset tar member:
images.read_image_bytes). A `vhmine mine --against` run's pairs
carry index_a / index_b: then each caption names its image's index and the column heads name the sides.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path


def thumbnail_data_url(path: str, size: int = 256) -> str | None:
    """A small JPEG of the image (a file, a tar member or a URL) as a data URL, or None if it can no longer be read."""
    from vhmine.images import BadImage, decode_rgb, read_image_bytes

    try:
        img = decode_rgb(read_image_bytes(path), at_least=size)  # a JPEG decoded at a fraction of its size
    except (OSError, BadImage):
        return None
    img.thumbnail((size, size))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# the head of every vhmine HTML page of image pairs (this gallery, the export's near-duplicate page): format
# it with title and subtitle (HTML-escaped by the caller)
PAGE_HEAD = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 2em; }}
td, th {{ padding: 6px 10px; border-bottom: 1px solid #ddd; vertical-align: top; text-align: left; }}
img {{ max-width: 256px; max-height: 256px; display: block; }}
.meta {{ font-size: 12px; color: #555; max-width: 256px; word-break: break-all; }}
.num {{ font-variant-numeric: tabular-nums; }}
</style></head><body>
<h1>{title}</h1><p>{subtitle}</p>
"""

_PAGE = (
    PAGE_HEAD
    + "<table><tr><th>rank</th><th>image A{side_a}</th><th>image B{side_b}</th>"
    + """<th>CLIP</th><th>DINOv2</th><th>gap</th></tr>
{rows}
</table>{empty}</body></html>
"""
)


def thumbnails(paths, *, progress: bool = False) -> dict[str, str | None]:
    """thumbnail_data_url of each distinct path, decoded in a few threads (PIL lets go of the GIL while it
    decodes, resizes and encodes); an image in several pairs is decoded once."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    todo = list(dict.fromkeys(paths))
    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as pool:
        urls = pool.map(thumbnail_data_url, todo)
        bar = tqdm(urls, total=len(todo), desc="gallery", unit="img", leave=False, disable=not progress or not todo)
        return dict(zip(todo, bar, strict=True))


def _cell(url: str | None, path: str, image_id: str, categories, index: str | None = None) -> str:
    img = f'<img src="{url}" alt="{html.escape(image_id)}">' if url else "<em>(image unreadable)</em>"
    cats = ", ".join(categories) if len(categories) else ""
    where = "" if index is None else f"index {html.escape(str(index))}<br>"  # an --against run: which side it is from
    return (
        f"<td>{img}<div class=meta>{where}{html.escape(image_id)}<br>{html.escape(path)}"
        f"{'<br>' + html.escape(cats) if cats else ''}</div></td>"
    )


def write_gallery(
    path: Path, pairs, *, title: str, subtitle: str = "", total: int | None = None, progress: bool = False
) -> None:
    """HTML table of pairs (rows of a pairs DataFrame) side by side with their scores; `total`: pairs in the run;
    `progress`: a bar over the images (each thumbnail decodes an image: a second or more for 100 large photos)."""
    across = "index_a" in pairs.columns and "index_b" in pairs.columns  # a `vhmine mine --against` run
    urls = thumbnails([p for ab in zip(pairs["path_a"], pairs["path_b"], strict=True) for p in ab], progress=progress)
    rows = []
    for r in pairs.itertuples(index=False):
        cell_a = _cell(urls[r.path_a], r.path_a, r.image_id_a, r.categories_a, r.index_a if across else None)
        cell_b = _cell(urls[r.path_b], r.path_b, r.image_id_b, r.categories_b, r.index_b if across else None)
        rows.append(
            f"<tr><td class=num>{int(r.rank)}</td>{cell_a}{cell_b}<td class=num>{r.clip_sim:.4f}</td>"
            f"<td class=num>{r.dino_sim:.4f}</td><td class=num>{r.gap:.4f}</td></tr>"
        )
    total = len(rows) if total is None else total
    if rows:
        empty = (
            "" if total <= len(rows) else f"<p>Top {len(rows)} of {total} pairs; all of them are in pairs.parquet.</p>"
        )
    elif total:
        empty = f"<p>{total} pairs passed both thresholds; none is shown here (--gallery-size 0).</p>"
    else:
        empty = "<p><strong>No pair passed both thresholds.</strong></p>"
    sides = {"side_a": "", "side_b": ""}
    if across:  # side a is always --index, side b --against: each head names its index when one does
        for side in ("a", "b"):
            names = sorted({str(n) for n in pairs[f"index_{side}"]})
            sides[f"side_{side}"] = f" ({html.escape(names[0])})" if len(names) == 1 else ""
    page = _PAGE.format(
        title=html.escape(title), subtitle=html.escape(subtitle), rows="\n".join(rows), empty=empty, **sides
    )
    Path(path).write_text(page, encoding="utf-8")
