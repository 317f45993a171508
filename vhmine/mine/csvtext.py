"""pairs.csv's bytes from the pairs table, as pandas' `DataFrame.to_csv(index=False)` writes them (with the
categories joined by |, as the run's csv has always held them), built a column at a time in pyarrow and numpy:
no Python runs per row (pandas' writer formats and quotes every field of every row in a loop: 0.46 CPU-s
for a 50,000-row run's 53,574 pairs, against a few hundredths here).

Reads the pyarrow Table it is given (mine.write converts the pairs frame once, for the parquet file and this);
writes into the binary file it is given. tests/mine/run/test_write.py pins the bytes against pandas' own.
"""

from __future__ import annotations

import csv
import io
import os
import re

import numpy as np

# where a float's shortest repr is positional and pyarrow's cast writes the same digits (with no ".0" for an
# integral one): checked against numpy's str over 4.6 million values (test_write: 350,000); the rest through numpy
_PLAIN = (1e-4, 1e6)


def write_csv(table, f, *, header: bool = True) -> None:
    """The table into binary file f as to_csv(index=False) writes it: a header line (through the csv module
    itself), then each row's fields joined by commas, each row ending in os.linesep (to_csv's
    lineterminator): integers as they are, NA as nothing, a float as numpy's str (repr's shortest digits),
    a list's strings joined with |, and a field quoted where Python's csv module quotes it (QUOTE_MINIMAL).
    The rows' text is built as one buffer and written as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    eol = os.linesep
    if header:
        out = io.StringIO()
        csv.writer(out, lineterminator=eol).writerow(table.column_names)
        f.write(out.getvalue().encode("utf-8"))
    if not table.num_rows:
        return
    text = pa.large_string()
    fields = [csv_fields(table.column(k), eol) for k in range(table.num_columns)]
    fields[-1] = pc.binary_join_element_wise(fields[-1], pa.scalar(eol, text), pa.scalar("", text))  # the row's end
    lines = pc.binary_join_element_wise(*fields, pa.scalar(",", text))
    lines = pa.concat_arrays(lines.chunks) if isinstance(lines, pa.ChunkedArray) else lines
    at = np.frombuffer(lines.buffers()[1], np.int64)[lines.offset : lines.offset + len(lines) + 1]
    f.write(memoryview(lines.buffers()[2])[at[0] : at[-1]])  # the rows' text lies end to end in one buffer


def csv_fields(col, eol: str = os.linesep):
    """One column (pyarrow, of a pairs table's types) as the text of its csv fields: large_string, no nulls."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = pa.concat_arrays(col.chunks) if col.num_chunks != 1 else col.chunk(0)
    t = col.type
    if pa.types.is_float64(t):
        return _floats(col)
    if pa.types.is_floating(t):  # numpy's str of a float32 has its own digits
        return _numpy_floats(col.to_numpy(zero_copy_only=False))
    if pa.types.is_list(t) or pa.types.is_large_list(t):  # categories (images.parquet's lists)
        col = pc.binary_join(col.cast(pa.list_(pa.string())), "|")
    elif not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)):
        raise TypeError(f"pairs.csv: no csv text for a column of type {t}")
    text = pc.fill_null(pc.cast(col, pa.large_string()), pa.scalar("", pa.large_string()))
    return _quoted(text, eol)


def _floats(col):
    """A float64 column's text as numpy's str writes each value (NaN as ""): pyarrow's cast where it writes
    the same digits, numpy's str for the rest (values under 1e-4 or from 1e6 on, NaN, infinities)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    x = col.to_numpy(zero_copy_only=False)
    size = np.abs(x)
    plain = ((size >= _PLAIN[0]) & (size < _PLAIN[1])) | (x == 0)
    text = pc.cast(col, pa.large_string())
    whole = plain & (x == np.trunc(x))  # "1.0" where pyarrow writes "1"
    if whole.any():
        tail, empty = pa.scalar(".0", pa.large_string()), pa.scalar("", pa.large_string())
        text = pc.if_else(pa.array(whole), pc.binary_join_element_wise(text, tail, empty), text)
    if not plain.all():
        rest = _numpy_floats(x[~plain])
        text = pc.replace_with_mask(text, pa.array(~plain), rest)
    return text


def _numpy_floats(x: np.ndarray):
    """numpy's str of each float (what to_csv writes without a float_format), NaN as ""."""
    import pyarrow as pa

    text = x.astype(str)
    text[np.isnan(x)] = ""
    return pa.array(text, pa.large_string())


def _quoted(text, eol: str):
    """Each field quoted (its quotes doubled) where the csv module quotes it: it holds a character of
    _specials(eol). The column's bytes are looked at first: most columns (ids, digests, paths) hold none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    specials = _specials(eol)
    data = text.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    if not np.isin(raw, np.frombuffer(specials.encode("utf-8"), np.uint8)).any():  # (UTF-8: ASCII bytes are ASCII)
        return text
    need = pc.match_substring_regex(text, "[" + "".join(re.escape(c) for c in specials) + "]")
    quote, empty = pa.scalar('"', pa.large_string()), pa.scalar("", pa.large_string())
    quoted = pc.binary_join_element_wise(quote, pc.replace_substring(text, '"', '""'), quote, empty)
    return pc.if_else(need, quoted, text)


_SPECIALS: dict[str, str] = {}


def _specials(eol: str) -> str:
    """The characters that make Python's csv module quote a field, with this line terminator: the comma, the
    quote, the terminator's own, and on newer Pythons any carriage return or newline. Asked of the csv module
    itself (once): the file stays to_csv's on any Python."""
    if eol not in _SPECIALS:
        said = []
        for ch in dict.fromkeys(',"\r\n' + eol):
            buf = io.StringIO()
            csv.writer(buf, lineterminator=eol).writerow(["a" + ch, "b"])
            if buf.getvalue().startswith('"'):
                said.append(ch)
        _SPECIALS[eol] = "".join(said)
    return _SPECIALS[eol]
