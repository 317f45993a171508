"""vhmine.eval.html_report: `vhmine eval` writes report.html, one offline page of every item with its image and each
model's answer and verdict, failures first; the same from --predictions as from --model; escaped; under ~30 MB for
2,000 items x 5 models, linking images beyond that; and in Chromium (playwright, Debian's chromium, as the app's
tests): filters change the visible rows, images load, and nothing is fetched from the network."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import write_group_bench
from openai_server import chat_text
from PIL import Image

from vhmine.bench import BenchItem, Benchmark
from vhmine.eval import html_report
from vhmine.eval.job import EvalOptions, evaluate
from vhmine.export.job import write_benchmark

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
EVIL = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'

# three models' answers (see the expected failures below)
ANSWERS = {
    "yes-man": {"o1": "3", "o2": "three", "y1": "Yes", "y2": "Yes", "y3": "Yes", "y4": "No"},
    "no-man": {"o1": "4", "o2": "4", "y1": "No", "y2": "Yes", "y3": "maybe", "y4": "no"},
    EVIL: {"o1": EVIL, "o2": EVIL, "y1": "yes", "y2": "yes", "y3": "no", "y4": "no"},
}
# failed by: o1 no-man, evil; o2 yes-man, evil; y1 no-man; y2 all three; y3 no-man, evil; y4 none
FAILED_BY = {"o1": 2, "o2": 2, "y1": 1, "y2": 3, "y3": 2, "y4": 0}
ORDER = ["y2", "o1", "o2", "y3", "y1", "y4"]  # every model wrong, then most; then mode order, pair group, id


_bench = write_group_bench


def _predictions(tmp_path, answers=ANSWERS) -> list:
    out = []
    for k, (model, ans) in enumerate(answers.items()):
        p = tmp_path / f"pred{k}.jsonl"
        p.write_text("".join(json.dumps({"id": i, "answer": a}) + "\n" for i, a in ans.items()))
        out.append((model, p))
    return out


@pytest.fixture
def evaluated(tmp_path):
    bench = _bench(tmp_path)
    res = evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=_predictions(tmp_path)))
    return tmp_path / "ev", res


def _row_ids(page: str) -> list[str]:
    body = page.split('<table id="items">', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r'<div class="id">([^<]*)</div>', body)


def test_report_html_lists_every_item_failures_first_and_escapes_model_text(evaluated):
    out, res = evaluated
    page = (out / "report.html").read_text()
    assert _row_ids(page) == ORDER
    across = json.loads((out / "report.json").read_text())["across_models"]
    assert {i: c["failed_by"] for i, c in across["items"].items()} == FAILED_BY
    assert across["fool_all"] == {"counting": ["y2"], "color": []}
    # the model's text is shown as text: no element, no script, from it
    assert EVIL not in page and "<script>window.pwned" not in page and 'onerror="window' not in page
    assert html_report._e(EVIL) in page
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';' in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    # verdicts with their reasons: the rule, and the matched reference
    assert "rule:vhtest: unreadable as yes or no (scored wrong)" in page
    assert "match: the reference answer &#x27;4&#x27; appears in the answer" in page
    assert page.count("data:image/jpeg;base64,") == 2 and "thumbnails and full size inlined" in page  # each photo once
    md = (out / "report.md").read_text()
    assert "| yes-man | - | 50 | 100 |" in md and "Items every model got wrong: counting 1, color 0" in md


def test_predictions_and_model_give_the_same_report(tmp_path, openai_server):  # noqa: F811
    bench = _bench(tmp_path)
    srv = openai_server
    asked = {
        "How many cats are there?": "3",
        "Are there exactly 3 cats? ONLY answer yes or no.": "Yes",
        "Is the car red? ONLY answer yes or no.": "No",
        "Is the car blue? ONLY answer yes or no.": "no",
    }
    srv.responder = lambda body: asked[chat_text(body)]
    evaluate(
        EvalOptions(
            bench=bench,
            out=tmp_path / "asked",
            models=["vlm"],
            base_url=srv.base_url,
            llm={"cache": tmp_path / "cache.db", "progress": False},
        )
    )
    answers = {
        d["id"]: d["answer"]
        for d in map(json.loads, (tmp_path / "asked" / "answers-vlm.jsonl").read_text().splitlines())
    }
    evaluate(EvalOptions(bench=bench, out=tmp_path / "read", predictions=_predictions(tmp_path, {"vlm": answers})))
    pages = [
        re.sub(r'<td class="source">[^<]*</td>', "", (tmp_path / d / "report.html").read_text())
        for d in ("asked", "read")
    ]
    assert pages[0] == pages[1] and _row_ids(pages[0])[:3] == ["o2", "y2", "y3"]  # each failed by the one model


def _big(tmp_path, n_images: int, per_image: int, models: int) -> tuple[Path, list]:
    """`n_images` distinct 320x240 photograph-like images (smooth shapes, grain: about 40 KB as JPEG, as photos are),
    `per_image` yes/no questions
    each, as a pope folder (image files under images/), and `models` models' predictions."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "imgs"
    folder.mkdir()
    items = []
    for k in range(n_images):
        base = rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)
        arr = np.asarray(Image.fromarray(base).resize((320, 240), Image.BICUBIC), dtype=np.int16)
        arr = np.clip(arr + rng.integers(-40, 40, arr.shape), 0, 255).astype(np.uint8)
        p = folder / f"{k}.jpg"
        Image.fromarray(arr).save(p, quality=85)
        for q in range(per_image):
            items.append(
                BenchItem(
                    f"i{k}-{q}",
                    f"mode{k % 8}",
                    "YNQ",
                    f"Is there thing {q} in picture {k}?",
                    (),
                    bool((k + q) % 2),
                    str(p),
                    str(k),
                )
            )
    write_benchmark(Benchmark("big", items), tmp_path / "bench", "pope")
    answers = {
        f"model-{m}": {
            it.id: "yes" if (j + m) % 3 else "I think the answer is no, because " * 3 for j, it in enumerate(items)
        }
        for m in range(models)
    }
    return tmp_path / "bench", _predictions(tmp_path, answers)


@pytest.mark.slow
def test_2000_items_and_5_models_stay_under_30_mb(tmp_path):
    bench, preds = _big(tmp_path, 1000, 2, 5)
    evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=preds))
    page = (tmp_path / "ev" / "report.html").read_text()
    size = (tmp_path / "ev" / "report.html").stat().st_size
    assert size < 30_000_000, size
    assert (
        len(_row_ids(page)) == 2000 and page.count("data:image/jpeg;base64,") == 1000
    )  # thumbnails inlined, once each
    # the full images (about 40 MB as base64) would not fit: linked to the benchmark's files, and the page says so
    assert "full-size images are linked by relative path" in page
    images = json.loads(re.search(r'<script type="application/json" id="vh-images">(.*?)</script>', page).group(1))
    full = {v[1] for v in images.values()}
    assert all(f.startswith("../bench/images/") and (tmp_path / "ev" / f).is_file() for f in full)


def test_beyond_the_budget_the_thumbnails_are_files_too(tmp_path, monkeypatch):
    bench, preds = _big(tmp_path, 12, 1, 2)
    monkeypatch.setattr(html_report, "MAX_BYTES", 20_000)  # less than the page's text and thumbnails
    evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=preds))
    page = (tmp_path / "ev" / "report.html").read_text()
    assert "data:image" not in page and "linked by relative path, thumbnails in report-images/thumbs/" in page
    thumbs = sorted((tmp_path / "ev" / "report-images" / "thumbs").iterdir())
    assert len(thumbs) == 12 and all(max(Image.open(t).size) <= html_report.THUMB_PX for t in thumbs)
    # an eval with room again inlines them and leaves no stale copies
    monkeypatch.setattr(html_report, "MAX_BYTES", 30_000_000)
    evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=preds))
    assert not (tmp_path / "ev" / "report-images").exists()


# --- in a real browser ---------------------------------------------------------------------------------


def _open(browser, path: Path, attempted: list):
    page = browser.new_page()
    errors: list = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: attempted.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    # block the network: every request that is not the page's own file is aborted (and recorded above)
    page.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort()
    )
    page.goto(path.resolve().as_uri())
    page.wait_for_function("document.getElementById('shown').textContent !== ''")
    return page, errors


def _visible(page) -> list[str]:
    return page.eval_on_selector_all("#items tbody tr:not([hidden]) .id", "els => els.map(e => e.textContent)")


@pytest.mark.slow
def test_filters_images_and_no_network_in_chromium(evaluated, chromium):
    out, _ = evaluated
    attempted: list = []
    with chromium.new_context(viewport={"width": 1400, "height": 1000}) as browser:
        page, errors = _open(browser, out / "report.html", attempted)
        assert _visible(page) == ORDER
        widths = page.eval_on_selector_all("img[data-img]", "els => els.map(e => e.complete ? e.naturalWidth : -1)")
        assert widths and all(w > 0 for w in widths), widths
        assert page.evaluate("window.pwned") is None and page.locator('img[src="x"]').count() == 0
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "eval_report.png"), full_page=True)
        page.select_option("#f-mode", "color")
        assert _visible(page) == ["y3", "y4"]
        page.select_option("#f-mode", "")
        page.select_option("#f-kind", "OEQ")
        assert _visible(page) == ["o1", "o2"]
        page.select_option("#f-kind", "")
        page.check("#f-all")
        assert _visible(page) == ["y2"] and page.inner_text("#shown") == "1"
        page.uncheck("#f-all")
        page.check("#f-wrong")
        assert _visible(page) == ["y2", "o1", "o2", "y3", "y1"]  # y4: nobody got it wrong
        page.select_option("#f-model", "0")  # yes-man: wrong on o2 and y2; its column alone
        assert _visible(page) == ["y2", "o2"]
        assert page.locator("td.m0").first.is_visible() and not page.locator("td.m1").first.is_visible()
        page.click("#f-clear")
        assert _visible(page) == ORDER and page.locator("td.m1").first.is_visible()
        # a pair group: its two items, each with the other image of the group beside its own
        page.locator("tr", has=page.locator(".id", has_text="o1")).locator("a.group").click()
        assert _visible(page) == ["o1", "o2"]
        assert page.locator("tr:not([hidden]) img.partner").count() == 2
        page.locator("tr:not([hidden]) img.thumb:not(.partner)").first.click()
        page.wait_for_selector("#lightbox img.full")
        full = page.eval_on_selector_all("#lightbox img.full", "els => els.map(e => [e.naturalWidth, e.naturalHeight])")
        assert len(full) == 2 and all(w > 0 for w, _ in full)
        assert sorted(full) == sorted([list(Image.open(p).size) for p in (out.parent / "photos").glob("*.png")])
        page.click("#lightbox")
        assert page.locator("#lightbox").count() == 0
        page.fill("#f-group", "")
        page.click("[data-show-mode='counting']")  # "items that fool every model": counting's, in the table
        assert _visible(page) == ["y2"]
        browser.close()
    assert errors == [] and attempted == []


def test_linked_images_load_in_chromium(tmp_path, monkeypatch, chromium):
    bench, preds = _big(tmp_path, 6, 1, 2)
    monkeypatch.setattr(html_report, "MAX_BYTES", 20_000)
    evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=preds))
    attempted: list = []
    with chromium.new_context(viewport={"width": 1400, "height": 1000}) as browser:
        page, errors = _open(browser, tmp_path / "ev" / "report.html", attempted)
        page.wait_for_function("Array.from(document.querySelectorAll('img[data-img]')).every(e => e.complete)")
        widths = page.eval_on_selector_all("img[data-img]", "els => els.map(e => e.naturalWidth)")
        assert len(widths) >= 6 and all(w > 0 for w in widths), widths  # the rows, and the items that fool both
        page.locator("img.thumb").first.click()
        page.wait_for_selector("#lightbox img.full")
        page.wait_for_function("document.querySelector('#lightbox img.full').complete")
        assert page.eval_on_selector("#lightbox img.full", "e => e.naturalWidth") == 320  # the benchmark's own file
        browser.close()
    assert errors == [] and attempted == []


def test_thumbnail_is_small():
    buf = io.BytesIO()
    Image.new("RGB", (1024, 512), "red").save(buf, format="PNG")
    assert Image.open(io.BytesIO(html_report.thumbnail(buf.getvalue()))).size == (160, 80)


# --- what the page says: every figure by its name and unit, the answers that fooled everyone, the legend ----


def test_report_html_shows_every_figure_of_report_json_under_its_name_with_unit_and_what_it_counts(evaluated):
    """It showed accuracy and one unlabelled "group acc." column (0.0, no %), none of report.json's other figures."""
    from vhmine.eval import metrics as MT

    out, res = evaluated
    page = (out / "report.html").read_text()
    assert "group acc." not in page
    for model, entry in json.loads((out / "report.json").read_text())["models"].items():
        o = entry["metrics"]["overall"]
        expected = {k: v for k, v in o.items() if k in MT.FIGURES} | {
            k: o["pair_groups"][k] for k in ("q_acc", "i_acc", "g_acc")
        }
        assert {
            "accuracy",
            "precision",
            "recall",
            "f1",
            "yes_ratio",
            "pair_accuracy",
            "image_accuracy",
            "q_acc",
            "i_acc",
            "g_acc",
        } <= set(expected)
        for key, value in expected.items():
            shown = re.findall(rf'data-model="{re.escape(html_report._e(model))}" data-figure="{key}">([^<]*)<', page)
            want = str(value) if MT.unit(key) == "count" else "-" if value is None else f"{100 * value:.1f}%"
            assert shown == [want], (model, key, shown, want)
    for key in ("accuracy", "precision", "q_acc", "unreadable"):
        name, counts = MT.FIGURES[key]
        assert (
            f'data-figure="{key}" title="{html_report._e(counts)}">{html_report._e(name)}<div class="unit">'
            f"{MT.unit(key)}</div></th>" in page
        )
        assert f"<td>{html_report._e(name)}</td><td><code>{key}</code></td><td>{MT.unit(key)}</td>" in page
    # accuracy per kind, also in report.json
    oeq = res.report["models"]["yes-man"]["metrics"]["kinds"]["OEQ"]
    assert {k: oeq[k] for k in ("n", "correct", "accuracy")} == {"n": 2, "correct": 1, "accuracy": 0.5}
    assert "accuracy (%) per kind" in page


def test_the_fool_every_model_gallery_shows_each_models_answer(evaluated):
    out, _ = evaluated
    page = (out / "report.html").read_text()
    gallery = page.split("<h2>Items that fool every model</h2>", 1)[1].split("</section>", 1)[0]
    assert "Are there exactly 3 cats?" in gallery and "truth: <b>no</b>" in gallery
    for model, answers in ANSWERS.items():
        assert f'<div class="ans"><b>{html_report._e(model)}</b>: {html_report._e(answers["y2"])}</div>' in gallery


def test_the_charts_legend_is_inside_the_chart_beside_the_bars(evaluated):
    out, _ = evaluated
    page = (out / "report.html").read_text()
    svg = page.split("<h2>Accuracy per mode</h2>", 1)[1].split("</svg>", 1)[0]
    legend = svg.split('<g class="legend"', 1)[1]
    for k, model in enumerate(ANSWERS):
        assert (
            f'fill="{html_report.COLORS[k]}"/><text x="18" y="{18 * k + 11}">{html_report._e(model)}</text>' in legend
        )
    x_legend = float(re.search(r"translate\(([\d.]+),", legend).group(1))
    bars = [float(x) + 16 for x in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="16"', svg)]
    assert bars and max(bars) < x_legend < max(bars) + 60  # right of the last bar, not below the chart


def test_the_figures_table_fits_a_1280_px_window_in_chromium(tmp_path, chromium):
    """Its column per figure made it 1,371 px wide in a 1280 px window, the source column cut off (issue 33): now a
    row per figure and a column per model, long names and sources wrapped; four models with long names and long
    predictions file names fit, every cell inside the window, and the page scrolls no sideways."""
    bench = _bench(tmp_path)
    answers = {"o1": "3", "o2": "4", "y1": "Yes", "y2": "No", "y3": "yes", "y4": "maybe"}
    names = ["llava-v1.6-vicuna-13b-hf", "gpt-4o-2024-08-06", "Qwen/Qwen2.5-VL-72B-Instruct", "InternVL2_5-78B-MPO"]
    preds = []
    for k, name in enumerate(names):
        p = tmp_path / f"{k}_{'_'.join(['predictions'] * 6)}_{name.replace('/', '_')}.jsonl"
        p.write_text("".join(json.dumps({"id": i, "answer": a}) + "\n" for i, a in answers.items()))
        preds.append((name, p))
    evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=preds))
    with chromium.new_context(viewport={"width": 1280, "height": 900}) as browser:
        page = browser.new_page()
        page.goto((tmp_path / "ev" / "report.html").resolve().as_uri())
        table, cells, page_width = page.evaluate(
            """() => { const t = document.querySelector('table.figures');
                return [t.getBoundingClientRect().right, [...t.querySelectorAll('td, th')].map(
                    c => Math.ceil(c.getBoundingClientRect().right)), document.documentElement.scrollWidth]; }"""
        )
        browser.close()
    assert table <= 1280 - 24 and max(cells) <= 1280 - 24, (table, max(cells))  # inside the page's padding
    assert page_width <= 1280, page_width
