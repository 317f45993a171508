"""Benchmark file formats: one module per format, each with `write(bench, folder)` and `read(path)`.

Reads and writes benchmark files only through those modules; this file is the registry (which
formats exist, what each holds) and the resolver that names the valid formats when given an
unknown one. A format module is imported only when it is asked for. Every reader passes each image
path it reads through `confined_image`, so a benchmark file can only point at files inside its own
folder (or the `--images` folder a user named), never elsewhere on the machine.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from vhmine.errors import FormatError, InputError

ENCODING = "utf-8-sig"  # how every reader opens a benchmark's text: UTF-8, with or without a Windows editor's BOM
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class FormatSpec:
    name: str
    module: str
    kinds: tuple[str, ...]  # which instance kinds it can hold
    writes: str  # what the benchmark folder holds, for --help and the manifest
    exportable: bool = True  # False: read-only in practice (a foreign benchmark's own layout)


_FORMATS = (
    FormatSpec(
        "vhtest",
        "vhtest",
        ("OEQ", "YNQ"),
        "OEQ_Benchmark/<mode>.xlsx, YNQ_Benchmark/<mode>.xlsx, Images/<mode>/<mode>_<k>.png",
    ),
    FormatSpec(
        "vlmevalkit",
        "vlmevalkit",
        ("OEQ", "YNQ"),
        "<name>_<kind>.tsv: index, image (base64), question, answer, category",
    ),
    FormatSpec(
        "hf",
        "hf",
        ("OEQ", "YNQ"),
        "data/oeq/ and data/ynq/test-00000-of-00001.parquet with an Image column, README.md a dataset card"
        " (datasets.load_dataset reads the folder)",
    ),
    FormatSpec("pope", "pope", ("YNQ",), "questions.jsonl (question_id, image, text, label) and images/"),
    FormatSpec(
        "llava",
        "llava",
        ("OEQ", "YNQ"),
        "train.json and test.json (LLaVA conversations, seeded 80/20 split by image group) and images/",
    ),
    FormatSpec(
        "hallusionbench", "hallusionbench", ("YNQ",), "HallusionBench.json (HallusionBench's fields) and images/"
    ),
    FormatSpec(
        "lmms-eval",
        "lmms_eval",
        ("OEQ", "YNQ"),
        "data/<kind>.parquet, vhmine_ynq.yaml, vhmine_oeq.yaml, vhmine.yaml (group) and utils.py: an lmms-eval"
        " --include_path folder",
    ),
    FormatSpec(
        "mmvp",
        "mmvp",
        ("YNQ",),
        "Questions.csv (Index, Question, Options, Correct Answer; rows 2k-1 and 2k a pair) and MMVP Images/<Index>.jpg",
    ),
)


# formats whose readers take `images=`, the folder their image paths resolve in (`--images`); the others carry theirs
TAKES_IMAGES = ("pope", "hallusionbench", "llava")


def format_names() -> tuple[str, ...]:
    return tuple(f.name for f in _FORMATS)


def get_format(name: str) -> FormatSpec:
    key = (name or "").strip().lower()
    for f in _FORMATS:
        if f.name == key:
            return f
    raise InputError(f"unknown format {name!r}: choose one of {', '.join(format_names())}")


def load_module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{get_format(name).module}")


def write(name: str, bench, folder: Path, **options) -> None:
    """Write `bench` in format `name` into the (existing, empty) `folder`."""
    load_module(name).write(bench, Path(folder), **options)


def next_steps(name: str, out: str, bench) -> list[str]:
    """The commands that run the benchmark written to `out` (a path as shown to the user) in its harness,
    for the formats one runs in a harness (lmms-eval, vlmevalkit); [] for the others."""
    hook = getattr(load_module(name), "next_steps", None)
    return hook(out, bench) if hook else []


def read(name: str, path: Path, **options):
    """Read a benchmark of format `name` from `path` (its folder, or its file)."""
    return load_module(name).read(Path(path), **options)


def detect(path: Path) -> str:
    """The format of a benchmark folder (its manifest says) or file (its shape says)."""
    path = Path(path)
    if path.is_dir():
        man = path / "manifest.json"
        if man.is_file():
            try:
                fmt = json.loads(man.read_text(encoding=ENCODING))["format"]
            except (ValueError, KeyError, TypeError):
                raise FormatError(f"{man}: no 'format' field: is this a vhmine export? give --format") from None
            return get_format(fmt).name
        if (path / "Questions.csv").is_file() and (path / "MMVP Images").is_dir():
            return "mmvp"
        if (path / "OEQ_Benchmark").is_dir() or (path / "YNQ_Benchmark").is_dir():
            return "vhtest"
        if list(path.glob("*.tsv")):
            return "vlmevalkit"
        if (path / "vhmine.yaml").is_file() and (path / "utils.py").is_file():
            return "lmms-eval"
        if (path / "data").is_dir():
            return "hf"
        if (path / "train.json").is_file():
            return "llava"
        if (path / "HallusionBench.json").is_file():
            return "hallusionbench"
        if (path / "questions.jsonl").is_file():
            return "pope"
        raise FormatError(f"{path}: no manifest.json and no known layout: give --format ({', '.join(format_names())})")
    if not path.is_file():
        raise InputError(f"benchmark {path} does not exist")
    if path.name == "Questions.csv":
        return "mmvp"
    if path.suffix == ".jsonl":
        return "pope"
    if path.suffix == ".tsv":
        return "vlmevalkit"
    with open(path, "rb") as f:
        head = f.read(4096).removeprefix(BOM).lstrip()  # a BOM (Windows editors) is no content
    if head.startswith(b"["):
        return "hallusionbench"
    if head.startswith(b"{"):
        return "pope"  # POPE's own files are JSON lines under a .json name
    raise FormatError(f"{path}: not a benchmark file vhmine knows: give --format ({', '.join(format_names())})")


def load(path: Path, fmt: str | None = None, **options):
    """Read a benchmark, detecting its format when `fmt` is None."""
    return read(fmt or detect(path), path, **options)


def identity(path: Path, bench, fmt: str) -> dict:
    """What names a benchmark in a report, the same from any folder and with no path of this machine: its name
    (a vhmine export's manifest's, else the reader's), format, items and a sha256 of its manifest.json (a vhmine
    export), of its file (a benchmark given as a file), or else of every file in its folder (names and bytes)."""
    import hashlib

    from vhmine.images import sha256_file

    path = Path(path)
    man = path / "manifest.json" if path.is_dir() else None
    name = bench.name
    if man is not None and man.is_file():
        try:
            name = str(json.loads(man.read_text(encoding=ENCODING)).get("name") or name)
        except (ValueError, AttributeError, OSError):
            pass
        of, digest = "manifest.json", sha256_file(man)
    elif not path.is_dir():
        of, digest = path.name, sha256_file(path)
    else:
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}\n".encode())
        of, digest = "every file", h.hexdigest()
    return {"name": name, "format": fmt, "items": len(bench), "sha256": digest, "sha256_of": of}


# --- helpers the format modules share --------------------------------------------------------------


def item_extras(item) -> dict:
    """Everything a format has no column for, so that a round trip loses nothing."""
    return {
        "id": item.id,
        "mode": item.mode,
        "kind": item.kind,
        "answers": list(item.answers),
        "truth": item.truth,
        "image_id": item.image_id,
        "pair_id": item.pair_id,
        "group_id": item.group_id,
        "meta": item.meta,
    }


def item_from_extras(e, question: str, image, where: str, image_data=None):
    """The BenchItem that `item_extras` recorded, read back; FormatError naming `where` if the record is broken."""
    from vhmine.bench import BenchItem

    try:
        return BenchItem(
            e["id"],
            e["mode"],
            e["kind"],
            question,
            tuple(e["answers"]),
            e["truth"],
            image,
            e["image_id"],
            e["pair_id"],
            e["meta"],
            image_data,
            e.get("group_id"),
        )  # no group_id: before pair groups
    except (KeyError, TypeError) as err:
        raise FormatError(
            f"{where}: not a vhmine item (no {err} in its vhmine record): fix or delete the record, "
            "or export the benchmark again"
        ) from None


def confined_image(value, base: Path, where: str, field: str) -> str | None:
    """`value`, an image path read from a benchmark (`where`: file and row; `field`: its column), checked to
    resolve inside `base` (the benchmark's folder, or the --images folder): `base / value` with `..` and
    symlinks resolved. A path that leaves it (absolute, `..`, a link out) is refused, so a crafted benchmark
    cannot make `eval --model` read and upload another file of this machine. Empty: None (no image)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise FormatError(f"{where}, field {field}: {value!r} is not an image path")
    root = Path(base).resolve()
    try:
        target = (root / value).resolve()  # an absolute value replaces root here, and is checked the same way
    except (ValueError, OSError, RuntimeError) as err:  # a NUL byte, a symlink loop
        raise FormatError(f"{where}, field {field}: {value!r} is not a usable image path ({err})") from None
    if not target.is_relative_to(root):
        raise InputError(
            f"{where}, field {field}: image path {value!r} leads outside {root} (to {target}): a benchmark's "
            "image paths must stay inside its folder, or inside the folder given with --images; "
            "fix the row, or move the images there"
        )
    return value


def image_ext(data: bytes) -> str:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return ".png"
    if data[:3] == b"\xff\xd8\xff":
        return ".jpg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return ".img"


def copy_images(bench, folder: Path, sub: str = "images") -> dict[str, str]:
    """Each distinct image once, as `<sub>/<image id><ext>`; returns item id -> relative path."""
    out: dict[str, str] = {}
    written: dict[str, str] = {}
    (folder / sub).mkdir(parents=True, exist_ok=True)
    for it in bench:
        if it.image is None and it.image_data is None:
            continue
        key = it.image_id or it.id
        if key not in written:
            data = bench.image_bytes(it)
            rel = f"{sub}/{_safe(key)}{image_ext(data)}"
            (folder / rel).write_bytes(data)
            written[key] = rel
        out[it.id] = written[key]
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))
