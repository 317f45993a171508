"""report.html: one page to browse an eval's results, failures first, that opens offline and fetches nothing.

Reads the report dict of vhmine.eval.job.evaluate (with its `across_models` section, vhmine.eval.across), each
model's detail records (vhmine.eval.score) and the benchmark's images; writes `report.html` into the eval folder,
and `report-images/` beside it only when the images do not fit (below). It shows per-mode accuracy per model as
its every figure of report.json under its vhmine.eval.metrics.FIGURES name and unit (what each counts beside), each
share with its 95% interval as a bar under it (the interval in words on hover), an inline SVG chart with its legend
and a whisker per bar, the transfer table, the paired comparisons of every two models (greyed where not
distinguishable, filterable by mode), the items that fool every model per mode with each model's
answer, and a table of every item
(thumbnail, mode, question, truth or reference answers, each model's answer with its verdict: rule, match, judge
or labels, and why), failures first, with filters in plain JavaScript (vhmine.eval.html_assets). The figures,
the chart and the tables are vhmine.eval.html_figures'.

Images: each distinct picture once, as a downscaled JPEG thumbnail (THUMB_PX) and its full-size file. When the
page with both inlined stays under `max_bytes` (about 30 MB) everything is inlined; else the thumbnails are
inlined and the full-size images linked by relative path (the benchmark's own image files, or copies in
report-images/ for formats that embed their images); when even the thumbnails do not fit, they are files in
report-images/ too. The page says which. A benchmark of 2,000 items on 1,000 photograph-sized pictures (40 KB
each) and 5 models gives a page of 7.4 MB, thumbnails inlined (tests/eval/test_html_report.py).

Every text that comes from a benchmark, a model or a worker is escaped (html.escape; in the JSON script block
`<`, `>` and `&` are \\u-escaped), and the Content-Security-Policy allows no script source but the page's own,
no connection and no image from the network.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.eval.html_assets import SCRIPT, STYLE
from vhmine.eval.html_figures import (  # noqa: F401  (COLORS: the chart's, as report.html's)
    COLORS,
    _e,
    by_table,
    comparisons_section,
    summary_table,
    svg_chart,
    transfer_table,
)

FILE = "report.html"
IMAGES_DIR = "report-images"
MAX_BYTES = 30_000_000
THUMB_PX = 160
CSP = (
    "default-src 'none'; img-src data: file:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'none'; form-action 'none'; base-uri 'none'"
)


def _mime(data: bytes) -> str:
    from vhmine.formats import image_ext

    return {".png": "image/png", ".jpg": "image/jpeg", ".webp": "image/webp"}.get(
        image_ext(data), "application/octet-stream"
    )


def _uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def thumbnail(data: bytes, px: int = THUMB_PX) -> bytes:
    """A JPEG of at most `px` pixels a side."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im = im.convert("RGB")
        im.thumbnail((px, px))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=72, optimize=True)
    return buf.getvalue()


# --- images ------------------------------------------------------------------------------------------


def _pictures(bench: Benchmark) -> tuple[dict[str, str], dict[str, dict], int]:
    """(item id -> picture key, key -> {"data", "thumb", "file"}, items whose image cannot be read): each distinct
    picture once, keyed by its sha256. Scoring predictions needs no image, so a missing one is counted, not an error."""
    from tqdm import tqdm

    from vhmine.errors import FormatError

    of: dict[str, str] = {}
    pics: dict[str, dict] = {}
    missing = 0
    for it in tqdm(bench, desc="report images", unit="item", disable=len(bench) < 500):
        if it.image is None and it.image_data is None:
            continue
        try:
            data = bench.image_bytes(it)
            key = hashlib.sha256(data).hexdigest()[:16]
            thumb = pics[key]["thumb"] if key in pics else thumbnail(data)  # decodes it: an image at all
        except (FormatError, OSError, ValueError):
            missing += 1
            continue
        of[it.id] = key
        if key not in pics:
            p = bench.image_path(it)
            pics[key] = {"data": data, "thumb": thumb, "file": p.resolve() if p is not None and p.is_file() else None}
    return of, pics, missing


def _placed(pics: dict[str, dict], out: Path, text_bytes: int, max_bytes: int) -> tuple[dict, str, dict]:
    """(key -> [thumbnail src, full src], the page's note on images, files to write under out: rel -> bytes)."""
    thumbs = {k: p["thumb"] for k, p in pics.items()}
    thumb_uris = {k: _uri(t, "image/jpeg") for k, t in thumbs.items()}
    full_uris = {k: _uri(p["data"], _mime(p["data"])) for k, p in pics.items()}
    n_thumbs, n_full = sum(map(len, thumb_uris.values())), sum(map(len, full_uris.values()))
    files: dict[str, bytes] = {}

    def linked(k: str) -> str:
        p = pics[k]
        if p["file"] is not None:  # the benchmark's own file
            return Path(os.path.relpath(p["file"], out.resolve())).as_posix()
        rel = f"{IMAGES_DIR}/{k}{_ext(p['data'])}"
        files[rel] = p["data"]
        return rel

    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    if text_bytes + n_thumbs + n_full <= max_bytes:
        return (
            {k: [thumb_uris[k], full_uris[k]] for k in pics},
            f"{len(pics)} image(s), thumbnails and full size inlined: this page is self-contained.",
            files,
        )
    if text_bytes + n_thumbs <= max_bytes:
        placed = {k: [thumb_uris[k], linked(k)] for k in pics}
        return (
            placed,
            (
                f"{len(pics)} image(s): thumbnails inlined; full-size images are linked by relative path "
                f"(inlining them would make this page {mb(text_bytes + n_thumbs + n_full)}, over "
                f"{mb(max_bytes)}), so keep this folder where it is beside the benchmark"
                + (f" and {IMAGES_DIR}/" if files else "")
                + "."
            ),
            files,
        )
    placed = {}
    for k in pics:
        rel = f"{IMAGES_DIR}/thumbs/{k}.jpg"
        files[rel] = thumbs[k]
        placed[k] = [rel, linked(k)]
    return (
        placed,
        (
            f"{len(pics)} image(s) linked by relative path, thumbnails in {IMAGES_DIR}/thumbs/ (inlining even "
            f"the thumbnails would make this page {mb(text_bytes + n_thumbs)}, over {mb(max_bytes)}): keep "
            f"{IMAGES_DIR}/ and the benchmark where they are."
        ),
        files,
    )


def _ext(data: bytes) -> str:
    from vhmine.formats import image_ext

    return image_ext(data)


# --- the page's parts ---------------------------------------------------------------------------------


def _fool_all(across: dict, bench: Benchmark, pic_of: dict, details: dict[str, list[dict]]) -> str:
    """Per mode, the items every model got wrong: image, question, the truth, and what each model answered."""
    by_id = bench.by_id()
    said = {m: {d["id"]: d.get("answer") for d in rows} for m, rows in details.items()}
    parts = []
    for mode, ids in across["fool_all"].items():
        figs = []
        for i in ids[:12]:
            img = f'<img class="thumb" data-img="{pic_of[i]}" alt="">' if i in pic_of else ""
            answers = "".join(f'<div class="ans"><b>{_e(m)}</b>: {_e(said[m].get(i))}</div>' for m in details)
            figs.append(
                f'<figure>{img}<figcaption>{_e(by_id[i].question)}<div class="note">truth: '
                f"{_reference(by_id[i])}</div>{answers}</figcaption></figure>"
            )
        more = (
            f' <button class="linkish" data-show-mode="{_e(mode)}">show all {len(ids)} in the table</button>'
            if ids
            else ""
        )
        parts.append(
            f"<h3>{_e(mode)}: {len(ids)} item(s){more}</h3>"
            + (f'<div class="fool">{"".join(figs)}</div>' if ids else "")
        )
    return "".join(parts)


def _reference(it) -> str:
    if it.kind == "YNQ" and it.truth is not None:
        return f"<b>{'yes' if it.truth else 'no'}</b>"
    return " / ".join(f"{_e(a)}" for a in it.answers) or '<span class="note">none</span>'


def _rows(bench: Benchmark, details: dict[str, list[dict]], across: dict, pic_of: dict) -> str:
    models = list(details)
    by_id = bench.by_id()
    per = {m: {d["id"]: d for d in rows} for m, rows in details.items()}
    group_pics: dict[str, list[str]] = {}
    for it in bench:
        if it.group_id and it.id in pic_of and pic_of[it.id] not in group_pics.setdefault(it.group_id, []):
            group_pics[it.group_id].append(pic_of[it.id])
    out = []
    for n, iid in enumerate(across["order"]):
        it, c = by_id[iid], across["items"][iid]
        wrong = " ".join(str(k) for k, m in enumerate(models) if per[m].get(iid, {}).get("correct") is False)
        img = ""
        if iid in pic_of:
            keys = [pic_of[iid]] + [k for k in group_pics.get(it.group_id or "", []) if k != pic_of[iid]][:1]
            img = "".join(
                f'<img class="thumb{" partner" if j else ""}" data-img="{k}" data-full="{" ".join(keys)}" '
                f'alt="{"the other image of its pair group" if j else "the image"}">'
                for j, k in enumerate(keys)
            )
        group = (
            f'<div><a href="#" class="group" data-set-group="{_e(it.group_id)}">pair group</a></div>'
            if it.group_id
            else ""
        )
        cells = []
        for k, m in enumerate(models):
            d = per[m].get(iid)
            if d is None:
                cells.append(f'<td class="mc m{k}"><span class="note">not answered</span></td>')
                continue
            cls, word = {True: ("ok", "✓ right"), False: ("bad", "✗ wrong"), None: ("none", "— not scored")}[
                d["correct"]
            ]
            v = d.get("verdict") or {}
            cells.append(
                f'<td class="mc m{k}"><div class="ans">{_e(d.get("answer"))}</div><div class="v {cls}">{word}</div>'
                f'<div class="why">{_e(v.get("by"))}: {_e(v.get("reason"))}</div></td>'
            )
        all_fail = c["failed_by"] == len(models) and c["scored_by"] == len(models)
        out.append(
            f'<tr id="it-{n}" data-mode="{_e(it.mode)}" data-kind="{_e(it.kind)}" data-group="{_e(it.group_id)}" '
            f'data-wrong="{wrong}" data-failed="{c["failed_by"]}">'
            f'<td class="img">{img}</td><td>{_e(it.mode)}<div class="note">{_e(it.kind)}</div></td>'
            f'<td class="q">{_e(it.question)}<div class="id">{_e(iid)}</div>{group}</td>'
            f'<td class="ref">{_reference(it)}</td>{"".join(cells)}'
            f'<td class="failed{" all" if all_fail else ""}">{c["failed_by"]} / {c["scored_by"]}</td></tr>'
        )
    return "".join(out)


def _options(values, labels=None) -> str:
    return "".join(f'<option value="{_e(v)}">{_e(lab)}</option>' for v, lab in zip(values, labels or values))


def render(
    report: dict, bench: Benchmark, details: dict[str, list[dict]], pic_of: dict, images_json: str, image_note: str
) -> str:
    across = report["across_models"]
    models = list(details)
    o = report["oeq"]
    how = f"yes/no rule <b>{_e(report['rule'])}</b>; open answers by <b>{_e(o['scorer'])}</b>" + (
        f" (judge {_e(o.get('judge'))}, prompt {_e(o.get('judge_prompt'))})" if o.get("judge") else ""
    )
    if report["rule"] == "mmvp":
        how = f"rule <b>mmvp</b> (MMVP's gpt_grader.py): the judge {_e(o.get('judge'))} grades every answer"
    heads = "".join(f'<th class="mh m{k}">{_e(m)}</th>' for k, m in enumerate(models))
    filters = (
        f'<div id="filters"><label>mode <select id="f-mode"><option value="">all</option>{_options(report["modes"])}'
        '</select></label><label>kind <select id="f-kind"><option value="">all</option>'
        f'{_options(bench.kinds())}</select></label><label>model <select id="f-model"><option value="">all</option>'
        f"{_options([str(k) for k in range(len(models))], models)}</select></label>"
        '<label><input type="checkbox" id="f-wrong"> wrong only</label>'
        '<label><input type="checkbox" id="f-all"> wrong for every model</label>'
        '<label>pair group <input id="f-group" size="28" placeholder="click a row\'s pair group"></label>'
        '<button id="f-clear" type="button">clear</button>'
        f'<span class="note">showing <b id="shown">{len(bench)}</b> of {len(bench)} item(s)</span></div>'
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(report['benchmark']['name'])}: {len(models)} model(s)</title><style>{STYLE}</style>"
        '<style id="colstyle"></style></head>'
        f'<body data-models="{len(models)}"><header><h1>{_e(report["benchmark"]["name"])}</h1>'
        f'<div class="meta">{len(bench)} item(s) in {len(report["modes"])} mode(s), {len(models)} model(s);'
        f" {how}.</div>"
        f'<div class="note">{_e(image_note)}</div></header><main>'
        f"<section><h2>Figures</h2>{summary_table(report)}<h2>Accuracy per mode</h2>{svg_chart(report)}"
        f"{by_table(report, 'modes', report['modes'])}{by_table(report, 'kinds', ('OEQ', 'YNQ'))}</section>"
        f"<section><h2>Across models</h2>{transfer_table(across)}"
        f"{comparisons_section(report)}"
        f"<h2>Items that fool every model</h2>{_fool_all(across, bench, pic_of, details)}</section>"
        f'<section><h2>Items, failures first</h2>{filters}<table id="items"><thead><tr><th>image</th><th>mode</th>'
        f"<th>question</th><th>truth / reference</th>{heads}<th>failed by</th></tr></thead>"
        f"<tbody>{_rows(bench, details, across, pic_of)}</tbody></table></section></main>"
        f'<script type="application/json" id="vh-images">{images_json}</script><script>{SCRIPT}</script></body></html>'
    )


def _json_script(obj) -> str:
    return (
        json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )


def write(
    report: dict, bench: Benchmark, details: dict[str, list[dict]], out: Path, max_bytes: int | None = None
) -> Path:
    """report.html into `out` (and report-images/ when needed); returns its path (see the module docstring).
    `max_bytes`: the page's size budget [default: MAX_BYTES]."""
    from vhmine.files import atomic_write_text

    out = Path(out)
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    pic_of, pics, missing = _pictures(bench)
    draft = render(report, bench, details, pic_of, "{}", "")
    placed, note, files = _placed(pics, out, len(draft.encode("utf-8")) + 400, max_bytes)
    if missing:
        note += f" {missing} item(s) show no image: their file cannot be read (give the images' folder with --images)."
    shutil.rmtree(out / IMAGES_DIR, ignore_errors=True)  # an earlier run's copies
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    atomic_write_text(out / FILE, render(report, bench, details, pic_of, _json_script(placed), note))
    return out / FILE
