"""The style sheet and the script of report.html (vhmine.eval.html_report), as text; reads and writes nothing.

The script is plain JavaScript with no network access of any kind (the page's Content-Security-Policy forbids
it too): it sets each image from the page's own JSON map, filters the rows (mode, kind, model, wrong only,
wrong for every model, pair group) and the paired comparisons (mode, told apart only), and shows a thumbnail's
full-size image, beside the other image of its pair group, in an overlay. It reads untrusted text only through
`textContent` and data attributes, never as HTML.
"""

STYLE = """
:root { --ok: #1a7f37; --bad: #c62828; --mute: #6e7781; --line: #d0d7de; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; }
header, main > section { padding: 12px 24px; }
header { background: var(--bg); border-bottom: 1px solid var(--line); }
h1 { font-size: 22px; margin: 4px 0; } h2 { font-size: 17px; margin: 18px 0 8px; }
h3 { font-size: 14px; margin: 10px 0 4px; }
.meta, .note { color: var(--mute); } .note { font-size: 13px; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; vertical-align: top; text-align: left; }
th { background: var(--bg); position: sticky; top: 0; z-index: 1; }
table.small td, table.small th { padding: 3px 8px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#filters { position: sticky; top: 0; background: #fff; z-index: 2; padding: 8px 0; border-bottom: 1px solid var(--line);
           display: flex; flex-wrap: wrap; gap: 12px; align-items: center; }
#filters label { white-space: nowrap; }
#items th { position: static; }  /* the filters stay on top instead */
#items tr[hidden], .hide { display: none; }
img.thumb { width: 96px; height: 96px; object-fit: contain; background: #eee; border: 1px solid var(--line);
            cursor: zoom-in; }
img.partner { width: 64px; height: 64px; opacity: .85; margin-left: 4px; }
td.img { white-space: nowrap; } td.q { max-width: 320px; } td.ref { max-width: 180px; }
td.mc { max-width: 260px; font-size: 13px; }
.ans { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 7.5em; overflow: auto; }
.v { font-weight: 600; margin-top: 2px; } .v.ok { color: var(--ok); } .v.bad { color: var(--bad); }
.v.none { color: var(--mute); }
.why { color: var(--mute); font-size: 12px; overflow-wrap: anywhere; }
.id { color: var(--mute); font-size: 11px; font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
.failed { font-weight: 700; } .failed.all { color: var(--bad); }
a.group, button.linkish { color: #0969da; background: none; border: 0; padding: 0; cursor: pointer; font: inherit;
                          text-decoration: underline; }
.fool { display: flex; flex-wrap: wrap; gap: 8px; } .fool figure { margin: 0; width: 160px; font-size: 12px; }
.fool .ans { max-height: 4.5em; }
th.fig { text-align: right; } th.fig .unit { color: var(--mute); font-weight: 400; font-size: 11px; }
/* Figures: a row per figure, a column per model; names and sources wrap, so the table fits the window */
table.figures { max-width: 100%; } table.figures th { position: static; overflow-wrap: anywhere; }
table.figures tr > th:first-child { text-align: left; } table.figures tr:first-child th + th { text-align: right; }
table.figures th.fig .unit { display: inline; margin-left: 4px; }
table.figures td.source { max-width: 320px; overflow-wrap: anywhere; font-size: 12px; }
details.legend { margin: 6px 0 12px; } details.legend summary { cursor: pointer; color: #0969da; }
.fool img.thumb { width: 120px; height: 90px; }
#lightbox { position: fixed; inset: 0; background: rgba(0,0,0,.85); display: flex; gap: 16px; align-items: center;
            justify-content: center; z-index: 10; padding: 24px; cursor: zoom-out; }
#lightbox figure { margin: 0; color: #fff; text-align: center; max-width: 48vw; }
#lightbox img { max-width: 100%; max-height: 85vh; background: #fff; }
svg text { font: 12px system-ui, sans-serif; fill: #1f2328; }
svg.ci { display: block; margin: 2px 0 0 auto; }
#comparisons tr.nd td { color: var(--mute); } #comparisons tr[hidden] { display: none; }
.cfilters { margin: 6px 0; display: flex; gap: 12px; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var IMG = JSON.parse($("vh-images").textContent);
  var N = parseInt(document.body.getAttribute("data-models"), 10);
  var groups = {};
  document.querySelectorAll("img[data-img]").forEach(function (el) {
    var e = IMG[el.getAttribute("data-img")];
    if (e) { el.src = e[0]; }
  });
  var rows = Array.prototype.slice.call(document.querySelectorAll("#items tbody tr"));
  rows.forEach(function (r) { if (r.dataset.group) { groups[r.dataset.group] = true; } });
  function apply() {
    var mode = $("f-mode").value, kind = $("f-kind").value, model = $("f-model").value;
    var wrong = $("f-wrong").checked, every = $("f-all").checked, group = $("f-group").value.trim();
    var exact = Object.prototype.hasOwnProperty.call(groups, group);
    $("colstyle").textContent = model === "" ? ""
      : ".mc:not(.m" + model + "), .mh:not(.m" + model + ") { display: none; }";
    var shown = 0;
    rows.forEach(function (r) {
      var d = r.dataset, w = d.wrong ? d.wrong.split(" ") : [];
      var ok = (!mode || d.mode === mode) && (!kind || d.kind === kind);
      if (ok && group) { ok = exact ? d.group === group : (d.group || "").indexOf(group) >= 0; }
      if (ok && wrong) { ok = model === "" ? w.length > 0 : w.indexOf(model) >= 0; }
      if (ok && every) { ok = N > 0 && parseInt(d.failed, 10) === N; }
      r.hidden = !ok;
      if (ok) { shown += 1; }
    });
    $("shown").textContent = String(shown);
  }
  ["f-mode", "f-kind", "f-model", "f-wrong", "f-all"].forEach(function (id) {
    $(id).addEventListener("change", apply);
  });
  $("f-group").addEventListener("input", apply);
  $("f-clear").addEventListener("click", function () {
    ["f-mode", "f-kind", "f-model", "f-group"].forEach(function (id) { $(id).value = ""; });
    $("f-wrong").checked = false; $("f-all").checked = false; apply();
  });
  function closeBox() { var b = $("lightbox"); if (b) { b.parentNode.removeChild(b); } }
  function openBox(keys, captions) {
    closeBox();
    var box = document.createElement("div");
    box.id = "lightbox";
    keys.forEach(function (k, i) {
      var e = IMG[k]; if (!e) { return; }
      var fig = document.createElement("figure"), im = document.createElement("img");
      var cap = document.createElement("figcaption");
      im.src = e[1]; im.className = "full"; cap.textContent = captions[i] || "";
      fig.appendChild(im); fig.appendChild(cap); box.appendChild(fig);
    });
    document.body.appendChild(box);
  }
  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (t.closest("#lightbox")) { closeBox(); return; }
    var g = t.closest("[data-set-group]");
    if (g) {
      ev.preventDefault(); $("f-group").value = g.getAttribute("data-set-group"); apply();
      $("items").scrollIntoView(); return;
    }
    var s = t.closest("[data-show-mode]");
    if (s) { ev.preventDefault(); $("f-mode").value = s.getAttribute("data-show-mode"); $("f-all").checked = true;
             apply();
             $("items").scrollIntoView(); return; }
    var im = t.closest("img[data-img]");
    if (im) {
      var keys = (im.getAttribute("data-full") || im.getAttribute("data-img")).split(" ");
      openBox(keys, keys.length > 1 ? ["this image", "the other image of its pair group"] : [""]);
    }
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { closeBox(); } });
  function applyComparisons() {
    var mode = $("c-mode").value, told = $("c-told").checked;
    document.querySelectorAll("#comparisons tbody tr").forEach(function (r) {
      r.hidden = !((!mode || r.dataset.mode === mode) && (!told || !r.classList.contains("nd")));
    });
  }
  if ($("c-mode")) {
    $("c-mode").addEventListener("change", applyComparisons);
    $("c-told").addEventListener("change", applyComparisons);
  }
  apply();
})();
"""
