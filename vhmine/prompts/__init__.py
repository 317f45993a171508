"""Versioned prompt files: `<name>.v<N>.txt` in this folder, shipped as package data.

Reads only these files. A prompt is never edited in place: a change is a new file with the next
version, so every record that names `<name>@v<N>` (responses, verdicts, descriptions, generations)
keeps pointing at the text that was sent. `load(name)` gives the highest version.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

from vhmine.errors import InputError

FOLDER = Path(__file__).resolve().parent
_FILE = re.compile(r"^(?P<name>[a-z_]+)\.v(?P<version>\d+)\.txt$")


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    text: str

    @property
    def id(self) -> str:
        """What records store: `name@vN` plus the first 8 hex digits of the text's sha256."""
        return f"{self.name}@v{self.version}#{hashlib.sha256(self.text.encode()).hexdigest()[:8]}"

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for _, n, _, _ in string.Formatter().parse(self.text) if n))

    def render(self, **values: object) -> str:
        missing = [s for s in self.slots if s not in values]
        if missing:
            raise InputError(f"prompt {self.id} needs {', '.join(missing)}")
        return self.text.format(**{k: values[k] for k in self.slots}).strip()


def versions(name: str) -> list[int]:
    return sorted(int(m["version"]) for p in FOLDER.iterdir() if (m := _FILE.match(p.name)) and m["name"] == name)


def load(name: str, version: int | None = None) -> Prompt:
    """The prompt `name` at `version` (default: the newest)."""
    have = versions(name)
    if not have:
        names = sorted({m["name"] for p in FOLDER.iterdir() if (m := _FILE.match(p.name))})
        raise InputError(f"no prompt {name!r} in {FOLDER}: choose one of {', '.join(names)}")
    v = have[-1] if version is None else version
    if v not in have:
        raise InputError(f"prompt {name!r} has versions {', '.join(map(str, have))}, not {v}")
    return Prompt(name, v, (FOLDER / f"{name}.v{v}.txt").read_text(encoding="utf-8"))
