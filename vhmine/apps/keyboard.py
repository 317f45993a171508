"""The worker's keyboard on every page: nothing typed is lost to a shortcut or to a page still drawing.

Writes nothing on the server; draws (once per page run, installed once per browser tab) a script in the app's page
that:
- commits the field being typed in before a shortcut acts (Alt/Ctrl + a letter or digit). Streamlit takes a text
  field's value when the field loses focus (or on Enter / Ctrl+Enter), but its shortcuts (Alt+D, Alt+E, Alt+J ...)
  click their button without that, so the click saw the field's old text. The script blurs the field first: its
  value is sent, then the click.
- keeps the keys typed while no field has the keyboard and the page is still running (after Sign in, a shortcut or
  a click, before the landing script of page_helpers.show_landing puts the keyboard on the next item's field), and
  types them into that field when it lands there; keys that land nowhere (the page put the keyboard on a button,
  or on nothing) are refused on screen, never half-taken.
page_helpers.show_landing calls `window.vhLanded(el)` once it focused its target.
"""

from __future__ import annotations

import streamlit as st

KEYS_SCRIPT = r"""<script>(() => {
  if (window.vhKeys) return;
  window.vhKeys = true;
  const TYPES = ['text', 'password', 'search', 'email', 'url', 'tel', 'number', ''];
  const editable = el => !!el && !el.readOnly && !el.disabled &&
    ((el.tagName === 'INPUT' && TYPES.includes(el.type)) || el.tagName === 'TEXTAREA');
  const running = () => !!document.querySelector('[data-testid=stApp][data-test-script-state=running]');
  // 1. a shortcut pressed in a field: the field gives up the keyboard first, which sends its text, then the
  // shortcut's click (Streamlit's handler runs after this capturing one) is sent with that text in place
  window.addEventListener('keydown', e => {
    const el = document.activeElement;
    if (!editable(el) || e.repeat) return;
    const mod = e.altKey || e.ctrlKey || e.metaKey;
    if (e.key === 'Enter' && (mod || (el.tagName === 'INPUT' && el.closest('[data-testid=stForm]')))) {
      // Ctrl+Enter, or Enter in a form: the field sends its text itself; it gives up the keyboard just after, so
      // that what is typed next waits for the page's landing instead of going into a field about to be replaced
      setTimeout(() => { if (document.activeElement === el) el.blur(); }, 0);
      held.from = el;  // keys that reach it before it lets go (input comes before timers) are kept too
      held.since = Date.now();
      return;
    }
    if (!mod || e.key.length !== 1) return;  // plain typing, arrows, Tab: the field's own
    if (e.ctrlKey && !e.altKey && 'acvxyz'.includes(e.key.toLowerCase())) return;  // editing keys stay the field's
    el.blur();
    held.since = Date.now();
  }, true);
  // 2. keys typed on no field while the page runs (or just ran an action) are kept for the field it lands on
  const held = {text: '', since: 0, from: null};
  const note = () => {
    let box = document.getElementById('vh-keys-note');
    if (!box) {
      box = document.createElement('div');
      box.id = 'vh-keys-note';
      box.setAttribute('role', 'alert');
      box.style.cssText = 'position:fixed;bottom:16px;right:16px;z-index:100000;max-width:420px;padding:10px 14px;' +
        'border-radius:6px;background:#fff3cd;color:#5c4400;border:1px solid #e0c46c;font:14px sans-serif';
      document.body.appendChild(box);
    }
    return box;
  };
  const refuse = () => {
    if (!held.text) return;
    const box = note();
    box.textContent = 'Not typed anywhere: "' + held.text + '" (keys pressed before the page was ready). ' +
      'Type them again where they belong.';
    clearTimeout(box.vhHide);
    box.vhHide = setTimeout(() => box.remove(), 8000);
    held.text = '';
  };
  const waiting = () => running() || Date.now() - held.since < 1500;
  window.addEventListener('keydown', e => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.key.length !== 1) return;
    const el = document.activeElement;
    if (editable(el) && !(el === held.from && waiting())) return;  // a field has the keyboard: the key is its own
    if (e.key === ' ' && el && el.closest('button, [role=button], label')) return;  // Space presses what has focus
    if (!waiting() && !held.text) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    held.text += e.key;
    held.since = Date.now();
  }, true);
  // any click or Enter that starts an action opens the window in which typed keys are kept
  window.addEventListener('click', () => { held.since = Date.now(); }, true);
  window.addEventListener('keydown', e => { if (e.key === 'Enter') held.since = Date.now(); }, true);
  window.vhLanded = el => {
    held.from = null;
    if (!held.text) return;
    if (editable(el) && document.activeElement === el) {
      const text = held.text;
      held.text = '';
      if (!document.execCommand('insertText', false, text)) {
        const set = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), 'value').set;
        set.call(el, el.value + text);
        el.dispatchEvent(new Event('input', {bubbles: true}));
      }
    } else {
      refuse();
    }
  };
  // keys kept while no landing came (an error, a page that lands nowhere): refused once the page is idle, never
  // typed into whatever field happens to have the keyboard
  setInterval(() => {
    if (held.text && !waiting()) {
      held.from = null;
      refuse();
    }
  }, 250);
})();</script>"""


def keep_keys() -> None:
    """Draw the keyboard script (it installs itself once per tab: a page run draws it again at no cost)."""
    st.html(KEYS_SCRIPT, unsafe_allow_javascript=True)
