"""README.md stays true: every `vhmine ...` command it shows names a real command and real options."""

import re
import shlex
from pathlib import Path

import typer.main

from vhmine.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    found = re.findall(r"`(vhmine [^`]+)`", text)  # inline code
    found += [m.strip() for m in re.findall(r"^ {4}(vhmine .+?)(?:\s+#.*)?$", text, flags=re.M)]  # code blocks
    found += [m.strip() for m in re.findall(r"&& (vhmine [^#\n]+)", text)]
    return sorted(set(found))


def test_readme_commands_exist_with_their_options():
    root = typer.main.get_command(app)
    commands = _readme_commands()
    assert any(c.startswith("vhmine embed") for c in commands) and any(c.startswith("vhmine mine") for c in commands)
    for line in commands:
        words = shlex.split(line)[1:]
        cmd, path = root, ["vhmine"]
        while words and hasattr(cmd, "commands") and words[0] in cmd.commands:
            cmd = cmd.commands[words[0]]
            path.append(words.pop(0))
        assert not hasattr(cmd, "commands") or words == ["--help"], f"README: `{line}` names no command"
        known = {"--help"} | {opt for p in cmd.params for opt in (*p.opts, *getattr(p, "secondary_opts", []))}
        for w in words:
            if w.startswith("--"):
                assert w.split("=")[0] in known, f"README: `{line}`: {' '.join(path)} has no option {w}"


def test_readme_uses_only_what_a_clone_has():
    # a new user has no ../shared beside the clone: every path the README shows lives in the repository
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text
    for rel in re.findall(r"(tests/fixtures/[\w./-]+)", text):
        assert (README.parent / rel).exists(), f"README names {rel}, which the repository does not have"
