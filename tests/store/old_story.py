"""The people's actions that the old-store fixtures hold, written against the curation API every vhmine since schema
0002 has (scripts/make_store_fixtures.py runs this file inside each old revision's own code; test_upgrade.py runs
it with today's code, to compare). It must stay plain enough for every era's Python and API.

Reads nothing; writes `<folder>/store.db` (tests/helpers.py make_ready_store: alice's counting and color items on
one pair), then adds bob and carol (an admin) and, where the era has errata: carol accepts bob's flag that
"Are there exactly 3 cats in the picture?" on image A is false (a truth an erratum flipped); and where the era
re-derives (schema 0009 on), the color question's answer on image A red -> green (re-derivation sets "Is the cup
red?" aside and drafts "Is the cup green?"), and alice confirms image B's "Is the cup green?" (no) in her own words.
"""

import importlib.util

OWN = "Would you call what the picture shows here by that name, question B?"  # no template reads it


def _ynq(store, mode, question, truth_of_image):
    from vhmine.store import Instance

    with store.session() as s:
        rows = (
            s.query(Instance)
            .filter_by(mode=mode, kind="YNQ", status="ready", question=question)
            .order_by(Instance.id)
            .all()
        )
        return [r.id for r in rows if r.truth == truth_of_image][0]


def _oeq(store, mode, answer):
    from vhmine.store import Instance

    with store.session() as s:
        return [
            r.id for r in s.query(Instance).filter_by(mode=mode, kind="OEQ", status="ready") if answer in r.answers
        ][0]


def has_errata():
    from vhmine import curate as C

    return hasattr(C, "accept_erratum")


def rederives():
    for m in ("vhmine.curate.derived", "vhmine.curate.decisions.derived"):
        try:
            if importlib.util.find_spec(m) is not None:
                return True
        except ModuleNotFoundError:  # no such package in that era
            pass
    return False


def story(folder, errata=None, rederive=None):
    """Run the story into `folder`; returns the store (open). `errata`, `rederive`: whether to take the steps
    the era's code supports (None: as this code does), so that today's code can tell the same story as an old era."""
    from helpers import make_ready_store

    from vhmine import curate as C

    store = make_ready_store(folder)
    C.add_worker(store, "bob")
    C.add_worker(store, "carol", admin=True)
    if has_errata() if errata is None else errata:
        iid = _ynq(store, "counting", "Are there exactly 3 cats in the picture?", True)
        flag = C.decisions.flag_instance(store, "bob", iid, "image A shows four cats")
        C.decisions.accept_erratum(store, "carol", flag, truth=False, reason="four cats on A")
    if rederives() if rederive is None else rederive:
        flag = C.decisions.flag_instance(store, "bob", _oeq(store, "color", "red"), "the cup on A is green")
        C.decisions.accept_erratum(store, "carol", flag, answers=["green"], reason="green")
        # alice confirms the new draft on image B in her own words (the truth hers, checked on the image)
        with store.session() as s:
            from vhmine.store import Instance

            [b] = [
                i.id for i in s.query(Instance).filter_by(status="draft", question="Is the cup green?") if not i.truth
            ]
        C.confirm_drafts(store, "alice", [C.DraftDecision(b, True, question=OWN, checked=True)])
    return store
