"""MMVP's layout: `Questions.csv` (Index, Question, Options, Correct Answer) and `MMVP Images/<Index>.jpg`.

Reads MMVP's own folder (tsb0601/MMVP's README: 300 rows; rows 2k-1 and 2k are a pair, one question asked of two
images) and the folders `write` makes; writes one. A row's image is `MMVP Images/<row number>.jpg`: MMVP's
evaluate_mllm.py opens the row's position + 1, so `Index` must count 1, 2, 3, ... MMVP's own rows are read as open
questions shown as MMVP shows them (`Question` + " " + `Options`), the correct option's text as the reference
answer and the row's cells in `meta` (the mmvp rule grades against `Correct Answer`, vhmine.rules.mmvp); ids
`mmvp:<Index>`, pairs `mmvp:pair<k>`. `write` takes yes/no questions in pairs (the two items of a `pair_id`, on two
images: `paired_items` finds them and what is left over, `pairs_only` leaves the rest out, as the export does) as
two-option questions `(a) Yes (b) No` answered `(a)` or `(b)`, a pair in rows 2k-1 and 2k; images as JPEG (another
format converted: quality 95, no chroma subsampling); and a `vhmine` column (the item's other fields as JSON) for a
lossless round trip, which MMVP's scripts ignore (they read columns by name). Image paths stay inside the folder
(formats.confined_image).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark, with_items
from vhmine.errors import FormatError
from vhmine.formats import confined_image, image_ext, item_extras, item_from_extras
from vhmine.rules import LETTERS, YES_NO_OPTIONS

FILE = "Questions.csv"
IMAGE_FOLDER = "MMVP Images"
COLUMNS = ("Index", "Question", "Options", "Correct Answer")
EXTRA = "vhmine"
MODE = "MMVP"
JPEG_QUALITY = 95
_OPTION = re.compile(r"\(([a-z])\)\s*(.*?)\s*(?=\([a-z]\)|$)", re.IGNORECASE | re.DOTALL)


def paired_items(bench: Benchmark) -> tuple[list[tuple[BenchItem, BenchItem]], list[BenchItem]]:
    """(pairs, the items in none): a pair is the two items sharing a `pair_id`, on two images, in benchmark order."""
    by_pair: dict[str, list[BenchItem]] = {}
    for it in bench:
        if it.pair_id is not None:
            by_pair.setdefault(it.pair_id, []).append(it)
    pairs = []
    for items in by_pair.values():
        if len(items) == 2 and (items[0].image_id or items[0].image) != (items[1].image_id or items[1].image):
            pairs.append((items[0], items[1]))
    inside = {it.id for p in pairs for it in p}
    first = {it.id: k for k, it in enumerate(bench)}
    pairs.sort(key=lambda p: first[p[0].id])
    return pairs, [it for it in bench if it.id not in inside]


def pairs_only(bench: Benchmark) -> tuple[Benchmark, int]:
    """`bench` with the items in no pair left out (benchmark order kept), and how many were: what the mmvp export
    writes, as MMVP's layout holds pairs only."""
    pairs, left = paired_items(bench)
    inside = {it.id for p in pairs for it in p}
    return with_items(bench, [it for it in bench if it.id in inside]), len(left)


def _jpeg(data: bytes) -> bytes:
    """The image as JPEG: JPEG bytes kept as they are (checksums match the source), others converted."""
    if image_ext(data) == ".jpg":
        return data
    from vhmine.images import encode_as

    return encode_as(data, "JPEG", quality=JPEG_QUALITY, subsampling=0)  # 4:4:4: no colour blur


def write(bench: Benchmark, folder: Path) -> None:
    bad = [it for it in bench if it.kind != YNQ or it.truth is None]
    if bad:
        raise FormatError(
            f"item {bad[0].id} is not a yes/no question with a truth: the mmvp format holds two-option "
            "questions, which vhmine writes from yes/no ones (--kind ynq)"
        )
    pairs, left = paired_items(bench)
    if left:
        raise FormatError(
            f"{len(left)} item(s) are not one of a pair of two images asked the same question (first: "
            f"{left[0].id}): MMVP's layout pairs rows 2k-1 and 2k, so it holds pairs only (vhmine export "
            "--format mmvp leaves the others out and says how many)"
        )
    no_image = [it for p in pairs for it in p if it.image is None and it.image_data is None]
    if no_image:
        raise FormatError(f"item {no_image[0].id} has no image: every MMVP row has its picture")
    (folder / IMAGE_FOLDER).mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    out = csv.DictWriter(buf, fieldnames=[*COLUMNS, EXTRA], lineterminator="\n")
    out.writeheader()
    for k, it in enumerate((it for p in pairs for it in p), start=1):
        (folder / IMAGE_FOLDER / f"{k}.jpg").write_bytes(_jpeg(bench.image_bytes(it)))
        out.writerow(
            {
                "Index": k,
                "Question": it.question,
                "Options": YES_NO_OPTIONS,
                "Correct Answer": LETTERS[0] if it.truth else LETTERS[1],
                EXTRA: json.dumps(item_extras(it), ensure_ascii=False),
            }
        )
    (folder / FILE).write_text(buf.getvalue(), encoding="utf-8")


def options_of(text: str) -> dict[str, str]:
    """`(a) Open (b) Closed` -> {"(a)": "Open", "(b)": "Closed"}."""
    return {f"({m.group(1).lower()})": m.group(2) for m in _OPTION.finditer(text or "")}


def _rows(path: Path) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a BOM (a spreadsheet's CSV) is read
            rd = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (rd.fieldnames or [])]
            if missing:
                raise FormatError(
                    f"{path}: no column {missing[0]!r} (MMVP's Questions.csv has "
                    f"{', '.join(COLUMNS)}; this one has {', '.join(rd.fieldnames or []) or 'none'})"
                )
            return list(rd)
    except UnicodeDecodeError as err:
        raise FormatError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}): save it as UTF-8") from None
    except csv.Error as err:
        raise FormatError(f"{path}: not a CSV file ({err})") from None


def _native(row: dict, n: int, image: str, where: str) -> BenchItem:
    for col in COLUMNS[1:]:
        if not (row.get(col) or "").strip():
            raise FormatError(
                f'{where}, field {col}: empty (MMVP\'s evaluate_mllm.py shows Question + " " + Options '
                "and its grader is given the Correct Answer: every row needs all three)"
            )
    question, options, correct = row["Question"], row["Options"], row["Correct Answer"]
    text = options_of(options).get(correct.strip().lower())
    meta = {"source": "mmvp", "index": n, "question": question, "options": options, "correct_answer": correct}
    return BenchItem(
        f"mmvp:{n}",
        MODE,
        OEQ,
        f"{question} {options}",
        (text or correct,),
        None,
        image,
        f"mmvp:{n}",
        f"mmvp:pair{(n + 1) // 2}",
        meta,
    )


def read(path: Path) -> Benchmark:
    path = Path(path)
    folder, file = (path, path / FILE) if path.is_dir() else (path.parent, path)
    if not file.is_file():
        raise FormatError(f"{file} does not exist: not an MMVP folder ({FILE} and {IMAGE_FOLDER}/)")
    rows = _rows(file)
    if len(rows) % 2:
        raise FormatError(f"{file}: {len(rows)} rows, and rows 2k-1 and 2k are pairs: the last row has no partner")
    items = []
    for n, row in enumerate(rows, start=1):
        where = f"{file}, row {n + 1}"  # the header is row 1, as a spreadsheet numbers them
        if (row.get("Index") or "").strip() != str(n):
            raise FormatError(
                f"{where}, field Index: {row.get('Index')!r} is not the row's number {n}: MMVP's scripts "
                f"open {IMAGE_FOLDER}/<row number>.jpg, so Index must count 1, 2, 3, ..."
            )
        image = confined_image(f"{IMAGE_FOLDER}/{n}.jpg", folder, where, "Index")
        extra = row.get(EXTRA)
        if extra:
            try:
                record = json.loads(extra)
            except ValueError as err:
                raise FormatError(f"{where}, field {EXTRA}: not JSON ({err})") from None
            items.append(item_from_extras(record, row["Question"], image, f"{where}, field {EXTRA}"))
        else:
            items.append(_native(row, n, image, where))
    return Benchmark(folder.name, items, folder, str(file))
