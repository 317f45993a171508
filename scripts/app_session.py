"""A scripted worker in `vhmine curate`, for scripts/bench_app.py: the browser session, timed per action, and the
library calls the same actions need, timed in this process (the store's own cost: the baseline).

Reads the page through playwright (Debian's chromium) and the store through vhmine.curate; writes the store only
through the app (the session) or the library (on a copy, for the baseline), and adds the admin worker `bench`.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

MODES = ("existence", "shape", "color", "orientation", "ocr", "size", "position", "counting")
SESSION_MODES = ("existence", "color", "counting", "size")  # the modes a pass switches between
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
# per mode: the slots of its first (open) template, and an answer for image A and for image B
FILLS = {
    "existence": ({"where": "on the table"}, ("a cup", "a spoon")),
    "shape": ({"object": "cup"}, ("round", "square")),
    "color": ({"object": "cup"}, ("red", "blue")),
    "orientation": ({"object": "car"}, ("left", "right")),
    "ocr": ({"object": "sign"}, ("STOP", "GO")),
    "size": ({"a": "cup", "b": "plate"}, ("cup", "plate")),
    "position": ({"a": "cup", "b": "plate"}, ("to the left of", "to the right of")),
    "counting": ({"object": "cups"}, ("3", "2")),
}

# installed before the page's own scripts: the time of the last input event, and the script runs seen
INIT = """
window.__vh = {t0: 0, runs: 0, msgs: 0, lastMsg: 0};
const Socket = window.WebSocket;  // every message from the server counted: a fragment's quick run flips no state
window.WebSocket = function (...args) {
  const ws = new Socket(...args);
  ws.addEventListener('message', () => { window.__vh.msgs++; window.__vh.lastMsg = performance.now(); });
  return ws;
};
window.WebSocket.prototype = Socket.prototype;
Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
for (const kind of ['pointerdown', 'keydown']) {
  document.addEventListener(kind, () => { window.__vh.t0 = performance.now(); }, true);
}
const hook = setInterval(() => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app) return;
  clearInterval(hook);
  let last = app.getAttribute('data-test-script-state');
  new MutationObserver(() => {
    const now = app.getAttribute('data-test-script-state');
    if (now === 'running' && last !== 'running') window.__vh.runs++;
    last = now;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}, 5);
"""

# the time (performance.now()) at which the page is idle and shows what the action leads to, else false
READY = """
({cond, arg, runs}) => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-stale=true]')) return false;
  if (![...document.images].every(i => i.complete)) return false;
  const texts = sel => [...document.querySelectorAll(sel)].map(e => e.innerText.trim());
  const item = () => texts('[data-testid=stCaptionContainer]').find(t => /^item \\S+; yours until/.test(t));
  let ok = false;
  if (cond === 'signin') ok = !!document.querySelector('input[type=password]');
  else if (cond === 'item') ok = !!item() && item().split(';')[0] !== arg;
  else if (cond === 'drafts') ok = [...document.querySelectorAll('button')]
    .some(b => b.innerText.trim().startsWith('Confirm'));
  else if (cond === 'mode') ok = texts('h2').some(t => t.startsWith('Annotate: ' + arg)) && !!item();
  else if (cond === 'admin') ok = texts('h2,h3')  // main's last section, or this tree's first
    .some(t => t.startsWith('Drafts: time saved') || t.startsWith('Worker time'));
  else if (cond === 'rerun') ok = window.__vh.msgs > runs;
  return ok ? performance.now() : false;
}
"""


@dataclass(frozen=True)
class Sample:
    kind: str
    ms: float
    reruns: int  # script runs the server started (new_session messages)
    cpu_ms: float  # the server's CPU time
    served_ms: float  # from the action to the server's last message: what is left (ms - served_ms) is the page's


def library_annotation(item, k: int = 0):
    """The annotation the scripted worker types for `item`, as a library call (the prefill and the baseline)."""
    from vhmine import curate as C
    from vhmine.rules import modes as M

    slots, (a, b) = FILLS[item.mode]
    tpl = M.get_mode(item.mode).templates_of(M.OEQ)[0]
    ids = [v.id for v in item.images]
    return C.Annotation(tpl.id, dict(slots), answers={ids[0]: a, ids[1]: b})


def add_bench_worker(db: Path) -> str:
    from vhmine import curate as C
    from vhmine.store import open_store

    with open_store(f"sqlite:///{db}") as store:
        return C.add_worker(store, "bench", admin=True)


# --- the baseline: the store's calls, in this process ------------------------------------------------------


def library_floor(db: Path, copy: Path, items: int) -> dict[str, list[float]]:
    """ms per action kind of the library calls a page run of that action makes (a copy of the store `db`)."""
    from vhmine import curate as C
    from vhmine.store import open_store

    shutil.copy(db, copy)
    token = add_bench_worker(copy)
    out: dict[str, list[float]] = {}

    def timed(kind, fn):
        t = time.perf_counter()
        got = fn()
        out.setdefault(kind, []).append(1000 * (time.perf_counter() - t))
        return got

    with open_store(f"sqlite:///{copy}") as store:
        me = C.sign_in(store, token)

        def page_run(mode):  # what every run of the annotate page reads
            C.people.check_session(store, me)
            C.progress(store)
            C.progress(store)
            return C.pending_drafts(store, me, mode) or C.next_item(store, me, mode)

        timed("sign in", lambda: (C.sign_in(store, token), C.people.chosen_mode(store, me), page_run("existence")))
        for k in range(items):
            mode = SESSION_MODES[(k // 2) % len(SESSION_MODES)]
            item = timed("mode switch", lambda m=mode: (C.people.choose_mode(store, me, m), page_run(m))[1])
            timed("field edit", lambda m=mode: page_run(m))
            timed(
                "save",
                lambda m=mode, it=item: (C.save_annotation(store, me, it.task_id, library_annotation(it)), page_run(m)),
            )
            kept = [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, me, mode)]
            nxt = timed("confirm", lambda m=mode, ds=kept: (C.confirm_drafts(store, me, ds), page_run(m))[1])
            timed("skip", lambda m=mode, it=nxt: (C.skip(store, me, it.task_id), page_run(m)))
        for _ in range(2):  # the admin page's first section: progress, held items, worker time
            timed(
                "admin overview",
                lambda: (
                    C.list_workers(store, by=me),
                    C.people.log_mark(store),
                    C.progress(store),
                    C.people.worker_time(store, 150, by=me),
                ),
            )
    return out


# --- the session in the browser ----------------------------------------------------------------------------


class Timer:
    """Times actions on `page`: from the action's input event to READY, settled; counts the server's runs and CPU."""

    def __init__(self, page, server_pid: int, settle_ms: int):
        import psutil

        self.page, self.settle_ms = page, settle_ms
        self.server = psutil.Process(server_pid)
        self.sessions = 0
        self.samples: list[Sample] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if isinstance(payload, bytes):
            try:
                msg = ForwardMsg.FromString(payload)
            except Exception:  # noqa: BLE001  (a frame of another kind: not counted)
                return
            if msg.WhichOneof("type") == "new_session":
                self.sessions += 1

    def _cpu(self) -> float:
        t = self.server.cpu_times()
        return 1000 * (t.user + t.system)

    def _watch(self, args: dict, since_input: bool) -> None:
        """Start a watcher in the page that notes when READY first holds (after an input event, when
        `since_input`): the page's own clock, whatever the driver's scheduling on a loaded machine."""
        self.page.evaluate(
            """([ready, args, sinceInput]) => {
          const check = eval(ready), since = performance.now();
          window.__vh.readyAt = null;
          const tick = () => {
            if (window.__vh.readyAt !== null) return;
            const t = (!sinceInput || window.__vh.t0 >= since) ? check(args) : false;
            if (t !== false) { window.__vh.readyAt = t; return; }
            requestAnimationFrame(tick);
          };
          requestAnimationFrame(tick);
        }""",
            [READY, args, since_input],
        )

    def _ready_at(self) -> float:
        return self.page.wait_for_function(
            "window.__vh.readyAt !== null ? window.__vh.readyAt : false", polling=50, timeout=120_000
        ).json_value()

    def run(self, kind: str, action, cond: str, arg: str = "", *, from_navigation: bool = False) -> float:
        """Do `action()`, wait until the page shows `cond`, and record the time taken; returns the time."""
        counter = "msgs" if cond == "rerun" else "runs"
        runs = self.page.evaluate(f"window.__vh ? window.__vh.{counter} : 0") if not from_navigation else 0
        args = {"cond": cond, "arg": arg, "runs": runs}
        cpu, sessions = self._cpu(), self.sessions
        if not from_navigation:
            self._watch(args, since_input=True)
        action()
        t0 = 0.0 if from_navigation else self.page.evaluate("window.__vh.t0")
        while True:
            if from_navigation:
                done = self.page.wait_for_function(READY, arg=args, polling="raf", timeout=120_000).json_value()
            else:
                done = self._ready_at()
            seen = self.page.evaluate("window.__vh.msgs")
            self.page.wait_for_timeout(self.settle_ms)  # a rerun that follows (st.rerun) counts in this action
            if self.page.evaluate("window.__vh.msgs") == seen:
                break
            if not from_navigation:  # more came: ready again after it
                self._watch(args, since_input=False)
        last = self.page.evaluate("window.__vh.lastMsg")
        self.samples.append(Sample(kind, done - t0, self.sessions - sessions, self._cpu() - cpu, min(last, done) - t0))
        return done - t0


def button(page, label: str):
    """The button labelled `label` (its keyboard shortcut, where it has one, is part of its name)."""
    return page.get_by_role("button", name=re.compile(rf"^{re.escape(label)}( |$)")).first


def _current_item(page) -> str:
    for t in page.get_by_test_id("stCaptionContainer").all_inner_texts():
        if t.startswith("item ") and "; yours until" in t:
            return t.split(";")[0]
    return ""


def _annotate(timer: Timer, page, mode: str) -> None:
    slots, answers = FILLS[mode]
    for name, value in slots.items():
        box = page.get_by_label(f"{{{name}}}", exact=True)
        box.fill(value)
        timer.run("field edit", lambda b=box: b.press("Tab"), "rerun")
    for role, value in zip("AB", answers, strict=True):
        area = page.get_by_label(f"Reference answer(s) for image {role}, one per line", exact=True)
        area.fill(value)
        timer.run("field edit", lambda a=area: a.press("Tab"), "rerun")
    timer.run("save", lambda: button(page, "Save").click(), "drafts")
    old = _current_item(page)
    timer.run("confirm", lambda: button(page, "Confirm").click(), "item", old)


def session(
    url: str, token: str, server_pid: int, chromium: str, items: int, settle_ms: int, db: Path
) -> tuple[list[Sample], float]:
    """One pass: page load, sign in, `items` items annotated (a Skip after every second, a mode switch before every
    second), the admin overview twice. Returns the samples and the app's waits per ready instance made (s)."""
    from playwright.sync_api import sync_playwright

    from vhmine import curate as C
    from vhmine.store import open_store

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(120_000)
            page.add_init_script(INIT)
            timer = Timer(page, server_pid, settle_ms)
            timer.run("page load", lambda: page.goto(url, timeout=120_000), "signin", from_navigation=True)
            page.get_by_label("Token", exact=True).fill(token)
            timer.run("sign in", lambda: button(page, "Sign in").click(), "item")
            sidebar = page.get_by_test_id("stSidebar")
            mode = "existence"
            for k in range(items):
                want = SESSION_MODES[(k // 2) % len(SESSION_MODES)]
                if want != mode:
                    sidebar.get_by_test_id("stSelectbox").click()
                    option = page.get_by_role("option", name=want, exact=True)
                    timer.run("mode switch", option.click, "mode", want)
                    mode = want
                _annotate(timer, page, mode)
                if k % 2 == 1:
                    old = _current_item(page)
                    timer.run("skip", lambda: button(page, "Skip").click(), "item", old)
            waits = sum(s.ms for s in timer.samples if s.kind not in ("page load", "sign in"))
            for _ in range(2):
                timer.run("admin overview", lambda: sidebar.get_by_text("Admin", exact=True).click(), "admin")
                old = ""
                sidebar.get_by_text("Annotate", exact=True).click()
                page.wait_for_function(READY, arg={"cond": "item", "arg": old, "runs": 0}, polling="raf")
        finally:
            browser.close()
    with open_store(f"sqlite:///{db}") as store:
        made = sum(1 for r in C.ready_instances(store, locate=False) if r.created_by == "bench")
    return timer.samples, waits / 1000 / max(made, 1)
