"""`signed_in(token)`: the curation app (vhmine/apps/curate.py) in Streamlit's AppTest, signed in with `token` as a
worker does it (the Token field, then Sign in), no exception shown. The store comes from VHMINE_DB, which the test
sets."""

from pathlib import Path

APP = str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py")


def signed_in(token: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at
