"""A predictions file's text, read exactly: JSON whose objects hold each key once, and a one-line error for a
file that is not UTF-8.

Reads nothing itself (the readers hand it their text or catch its error); writes nothing. `loads` is
json.loads refusing an object with a duplicate key (json keeps the last one silently: one of two answers
to the same item would be scored and the other dropped); `not_utf8` is the FormatError for a file that
is not UTF-8, naming it and saying how to convert it. `ENCODING` is how every reader opens a file: UTF-8, a
leading byte-order mark (Notepad, Excel's "CSV UTF-8") skipped. `json_lines` reads a JSON-lines file (lmms-eval's
samples, MMVP's answers) through `loads`, line by line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from vhmine.errors import FormatError

ENCODING = "utf-8-sig"  # UTF-8, with or without the BOM Windows editors and Excel's CSV put first


class DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(f"the key {key!r} appears twice in one object")
        self.key = key


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


def loads(text: str, where: str):
    """json.loads(text), with FormatError naming `where` for an object that holds a key twice."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except DuplicateKey as err:
        raise FormatError(f"{where}: {err}: give each item's answer once") from None


def not_utf8(path: Path, err: UnicodeDecodeError) -> FormatError:
    bad = err.object[err.start : err.start + 1].hex() if isinstance(err.object, (bytes, bytearray)) else "?"
    return FormatError(
        f"{path}: not UTF-8 text (byte 0x{bad} cannot be decoded): save it as UTF-8, e.g. "
        f"`iconv -f latin1 -t utf-8 {path.name} > utf8-{path.name}`, and pass that file"
    )


def json_lines(path: Path, what: str) -> Iterator[tuple[int, str, object]]:
    """(line number, "PATH, line N", the line's JSON value) for each non-blank line of a JSON-lines file, through
    `loads`; FormatError naming the line for one that is not JSON, saying that `what` (e.g. "MMVP's answers
    file") has one JSON object per line."""
    with open(path, encoding=ENCODING) as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {n}"
            try:
                rec = loads(line, where)
            except FormatError:
                raise
            except ValueError as err:
                raise FormatError(f"{where}: not JSON ({err.args[0]}): {what} has one JSON object per line") from None
            yield n, where, rec
