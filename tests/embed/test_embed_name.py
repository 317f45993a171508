"""`vhmine embed --name`: a name outside what its own message names (letters, digits, '.', '-', '_', starting with a
letter or digit) is refused in one line before anything is read or written (issue 43: a space was accepted)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vhmine.cli import app


@pytest.mark.parametrize("name", ["my photos", "a/b", ".hidden", "-dash", "tab\there", "é"])
def test_a_name_the_message_does_not_allow_is_refused(tmp_path, name):
    images = tmp_path / "imgs"
    images.mkdir()
    indexes = tmp_path / "indexes"
    r = CliRunner().invoke(app, ["embed", str(images), "--name", name, "--indexes", str(indexes)])
    assert r.exit_code != 0
    assert f"--name {name!r}: use letters, digits, '.', '-' and '_'" in " ".join(r.output.split()), r.output
    assert not indexes.exists()  # nothing written


def test_a_plain_name_passes_the_check(tmp_path):
    images = tmp_path / "imgs"
    images.mkdir()
    r = CliRunner().invoke(app, ["embed", str(images), "--name", "coco.val-2017_a", "--indexes", str(tmp_path / "i")])
    assert "--name" not in r.output and "no images found" in r.output, r.output  # past the name, to the empty folder
