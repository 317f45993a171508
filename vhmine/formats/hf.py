"""A Hugging Face dataset folder: `datasets.load_dataset(FOLDER)` reads it, images decoded.

Writes (and reads back, with pyarrow alone) one parquet file per kind, `data/oeq/test-00000-of-00001.parquet` and
`data/ynq/test-00000-of-00001.parquet` (so that a dataset card's configs can name each kind's file: `datasets`
and Croissant select files, not rows; exports before this wrote one `data/test-00000-of-00001.parquet`, which
still reads back): columns `id`, `mode`,
`kind`, `question`, `answers` (list), `truth` (bool, empty for OEQ), `image` (the Image feature's
struct of bytes and file name), `image_id`, `pair_id`, `meta` (JSON), `group_id` (the pair group,
vhmine.bench.assign_groups;
empty outside one; files written before it have no such column and read back without groups). The `datasets` feature
types are stored in the parquet schema's "huggingface" metadata, as `datasets` itself writes them. The reader takes
images from the bytes only and never opens a path a file names.
"""

from __future__ import annotations

import json
from pathlib import Path

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark
from vhmine.errors import FormatError
from vhmine.formats import image_ext

DATA = {OEQ: "data/oeq/test-00000-of-00001.parquet", YNQ: "data/ynq/test-00000-of-00001.parquet"}  # kind -> its file
LEGACY_PARQUET = "data/test-00000-of-00001.parquet"  # every item in one file: what exports before per-kind files wrote
_STR = {"dtype": "string", "_type": "Value"}
FEATURES = {
    "id": _STR,
    "mode": _STR,
    "kind": _STR,
    "question": _STR,
    "answers": {"feature": _STR, "_type": "Sequence"},
    "truth": {"dtype": "bool", "_type": "Value"},
    "image": {"_type": "Image"},
    "image_id": _STR,
    "pair_id": _STR,
    "meta": _STR,
    "group_id": _STR,
}
OPTIONAL = ("group_id",)  # columns an earlier vhmine did not write


def write(bench: Benchmark, folder: Path) -> None:
    for kind in bench.kinds():
        write_parquet(bench.select(kind=kind), folder / DATA[kind])


def write_parquet(bench: Benchmark, path: Path) -> None:
    """`bench` as one parquet file at `path` (the columns above); the lmms-eval export writes one per kind."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {k: [] for k in FEATURES}
    for it in bench:
        data = bench.image_bytes(it) if (it.image or it.image_data) else None
        rows["id"].append(it.id)
        rows["mode"].append(it.mode)
        rows["kind"].append(it.kind)
        rows["question"].append(it.question)
        rows["answers"].append(list(it.answers))
        rows["truth"].append(it.truth)
        rows["image"].append(
            None if data is None else {"bytes": data, "path": f"{it.image_id or it.id}{image_ext(data)}"}
        )
        rows["image_id"].append(it.image_id)
        rows["pair_id"].append(it.pair_id)
        rows["meta"].append(json.dumps(it.meta, ensure_ascii=False, sort_keys=True))
        rows["group_id"].append(it.group_id)
    s = pa.string()
    schema = pa.schema(
        [
            ("id", s),
            ("mode", s),
            ("kind", s),
            ("question", s),
            ("answers", pa.list_(s)),
            ("truth", pa.bool_()),
            ("image", pa.struct([("bytes", pa.binary()), ("path", s)])),
            ("image_id", s),
            ("pair_id", s),
            ("meta", s),
            ("group_id", s),
        ],
        metadata={"huggingface": json.dumps({"info": {"features": FEATURES}})},
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows, schema=schema), path)


def read(path: Path) -> Benchmark:
    import pyarrow.parquet as pq

    path = Path(path)
    files = sorted((path / "data").rglob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise FormatError(f"{path}: no data/*.parquet: not a vhmine Hugging Face dataset folder")
    items = []
    for f in files:
        table = pq.read_table(f)
        missing = [c for c in FEATURES if c not in table.column_names and c not in OPTIONAL]
        if missing:
            raise FormatError(f"{f}: no column {missing[0]!r} (expected {', '.join(FEATURES)})")
        for n, r in enumerate(table.to_pylist()):
            try:
                meta = json.loads(r["meta"] or "{}")
            except ValueError:
                raise FormatError(f"{f}, row {n}, field meta: not JSON") from None
            img = r["image"]
            items.append(
                BenchItem(
                    r["id"],
                    r["mode"],
                    r["kind"],
                    r["question"],
                    tuple(r["answers"] or ()),
                    r["truth"],
                    None,
                    r["image_id"],
                    r["pair_id"],
                    meta,
                    img["bytes"] if img else None,
                    r.get("group_id"),
                )
            )
    return Benchmark(path.name, items, path if path.is_dir() else path.parent, str(path))
