"""VHTest's own benchmark layout, so that its published evaluation scripts run on our output unchanged.

Writes (and reads back) a folder with one sheet per mode: `OEQ_Benchmark/<mode>.xlsx` (columns
`Image`, `Question`, `Reference_Answer`) and `YNQ_Benchmark/<mode>.xlsx` (`Image`, `image_path`,
`yes_or_no_question`, `yes_or_no_ground_truth` = y / n), images at `Images/<mode>/<mode>_<k>.png`.
VHTest's YNQ script reads the image name from `image_path` while its OEQ script reads `Image`, so
YNQ sheets carry both. Extra columns, `vhmine_id`, `group_id` (the pair group; empty outside one) and
`vhmine_item` (JSON), make the round trip lossless; VHTest's scripts ignore them. Reading needs only the columns
VHTest's scripts read (OEQ: `Image`, `Question`; YNQ: `image_path`, `yes_or_no_question`, `yes_or_no_ground_truth`), so
a folder as VHTest publishes it imports; `Reference_Answer` is read when present (else the OEQ item has no
reference answer) and any other column is kept in the item's meta under `extras`. Needs openpyxl
(`pip install 'vhmine[export]'`).
"""

from __future__ import annotations

import json
from pathlib import Path

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark, question_key
from vhmine.errors import FormatError
from vhmine.formats import confined_image, item_extras, item_from_extras

VHTEST_MODES = ("counting", "shape", "color", "orientation", "size", "position", "OCR", "existence")
# the columns VHTest's scripts read (llava_oeq_version.py, llava_ynq_version.py): all a sheet needs
COLUMNS = {OEQ: ("Image", "Question"), YNQ: ("image_path", "yes_or_no_question", "yes_or_no_ground_truth")}
ANSWER = "Reference_Answer"  # OEQ reference answers: written by vhmine, read when a sheet has them
OURS = {
    OEQ: (ANSWER, "vhmine_id", "group_id", "vhmine_item"),
    YNQ: ("Image", "vhmine_id", "group_id", "vhmine_item"),
}  # not extras
FOLDER = {OEQ: "OEQ_Benchmark", YNQ: "YNQ_Benchmark"}


def sheet_name(mode: str) -> str:
    """VHTest's spelling of a mode ("ocr" -> "OCR"); other names made file-safe."""
    if mode.lower() == "ocr":
        return "OCR"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in mode)


def _mode_of(sheet: str) -> str:
    return "ocr" if sheet == "OCR" else sheet


def _needs_openpyxl() -> None:
    try:
        import openpyxl  # noqa: F401
    except ModuleNotFoundError:
        raise FormatError("the vhtest format (.xlsx sheets) needs openpyxl: pip install 'vhmine[export]'") from None


def _png(data: bytes) -> bytes:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return data  # already PNG: the bytes are kept, so checksums match the source
    from vhmine.images import encode_as

    return encode_as(data, "PNG")  # CMYK, 16-bit, float...: as RGB, or RGBA where it has alpha


def write(bench: Benchmark, folder: Path) -> None:
    import pandas as pd

    _needs_openpyxl()
    for mode in bench.modes():
        sheet = sheet_name(mode)
        items = [it for it in bench if it.mode == mode]
        # image k: the mode's distinct images in image-id order, so names do not depend on row order
        keys = sorted({it.image_id or it.id for it in items if it.image is not None or it.image_data is not None})
        names = {k: f"{sheet}_{i}.png" for i, k in enumerate(keys)}
        img_dir = folder / "Images" / sheet
        img_dir.mkdir(parents=True, exist_ok=True)
        done: set[str] = set()
        for it in items:
            key = it.image_id or it.id
            if key in names and key not in done:
                (img_dir / names[key]).write_bytes(_png(bench.image_bytes(it)))
                done.add(key)
        for kind in (OEQ, YNQ):
            rows = []
            for it in sorted(
                (i for i in items if i.kind == kind), key=lambda i: (names.get(i.image_id or i.id, ""), i.id)
            ):
                image = names.get(it.image_id or it.id, "")
                extra = json.dumps(item_extras(it), ensure_ascii=False, sort_keys=True)
                if kind == OEQ:
                    rows.append(
                        {
                            "Image": image,
                            "Question": it.question,
                            "Reference_Answer": " or ".join(it.answers),
                            "vhmine_id": it.id,
                            "group_id": it.group_id or "",
                            "vhmine_item": extra,
                        }
                    )
                else:
                    if it.truth is None:
                        raise FormatError(
                            f"item {it.id} ({mode}) is a yes/no question without a truth: fix it in the app"
                        )
                    rows.append(
                        {
                            "Image": image,
                            "image_path": image,
                            "yes_or_no_question": it.question,
                            "yes_or_no_ground_truth": "y" if it.truth else "n",
                            "vhmine_id": it.id,
                            "group_id": it.group_id or "",
                            "vhmine_item": extra,
                        }
                    )
            if rows:
                (folder / FOLDER[kind]).mkdir(parents=True, exist_ok=True)
                pd.DataFrame(rows).to_excel(folder / FOLDER[kind] / f"{sheet}.xlsx", index=False)


def _cell(v) -> str:
    import pandas as pd

    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def read(path: Path) -> Benchmark:
    import pandas as pd

    _needs_openpyxl()
    root = Path(path)
    items: list[BenchItem] = []
    sheets = [(k, p) for k in (OEQ, YNQ) for p in sorted((root / FOLDER[k]).glob("*.xlsx"))]
    if not sheets:
        raise FormatError(f"{root}: no OEQ_Benchmark/*.xlsx or YNQ_Benchmark/*.xlsx: not a VHTest benchmark folder")
    for kind, sheet_path in sheets:
        df = pd.read_excel(sheet_path)  # exactly as VHTest's scripts read it
        missing = [c for c in COLUMNS[kind] if c not in df.columns]
        if missing:
            raise FormatError(f"{sheet_path}: no column {missing[0]!r} (a {kind} sheet has {', '.join(COLUMNS[kind])})")
        sheet = sheet_path.stem
        extras = [c for c in df.columns if c not in COLUMNS[kind] + OURS[kind]]  # kept with each item
        for idx, row in df.iterrows():
            where = f"{sheet_path}, row {idx + 2}"  # Excel's row number: header is row 1
            column = COLUMNS[kind][0]
            image = _cell(row[column])
            rel = confined_image(Path("Images", sheet, image).as_posix(), root, where, column) if image else None
            extra = _cell(row.get("vhmine_item"))
            if extra:
                try:
                    e = json.loads(extra)
                except ValueError as err:
                    raise FormatError(
                        f"{where}, field vhmine_item: not a vhmine item ({err}): delete the cell to read the row as"
                        " plain VHTest"
                    ) from None
                items.append(item_from_extras(e, _cell(row[COLUMNS[kind][1]]), rel, f"{where}, field vhmine_item"))
                continue
            question = _cell(row[COLUMNS[kind][1]])
            if not question:
                raise FormatError(f"{where}, field {COLUMNS[kind][1]}: empty question")
            iid = f"{kind.lower()}:{sheet}:{image}:{question_key(question)}"
            meta = {
                "source": "vhtest",
                "sheet": str(sheet_path.name),
                **({"extras": {str(c): _cell(row[c]) for c in extras}} if extras else {}),
            }
            if kind == OEQ:
                ans = _cell(row[ANSWER]) if ANSWER in df.columns else None
                if ans == "":
                    raise FormatError(f"{where}, field {ANSWER}: empty reference answer")
                items.append(
                    BenchItem(
                        iid,
                        _mode_of(sheet),
                        OEQ,
                        question,
                        (ans,) if ans else (),
                        None,
                        rel,
                        f"{sheet}/{image}",
                        None,
                        meta,
                    )
                )
            else:
                gt = _cell(row["yes_or_no_ground_truth"]).strip().lower()
                if gt not in ("y", "n", "yes", "no"):
                    raise FormatError(f"{where}, field yes_or_no_ground_truth: {gt!r} is not y or n")
                truth = gt.startswith("y")
                items.append(
                    BenchItem(
                        iid,
                        _mode_of(sheet),
                        YNQ,
                        question,
                        ("Yes" if truth else "No",),
                        truth,
                        rel,
                        f"{sheet}/{image}",
                        None,
                        meta,
                    )
                )
    return Benchmark(root.name, items, root, str(root))
