"""Images of any mode PIL reads (CMYK, grey, palette, RGBA, 16-bit, grey-alpha...) export in every format
(vhmine.images.encode_as: what a re-encoding format writes), and a `--out` that cannot be written is refused
in one line before any work."""

import io
import time

import numpy as np
import pytest
from helpers import unwritable_folders, write_pairs, write_photos
from hypothesis import given, settings
from hypothesis import strategies as st

from vhmine import curate as C
from vhmine import formats as F
from vhmine.export.job import ExportOptions, export_benchmark

MODES = ("1", "L", "P", "RGB", "RGBA", "LA", "PA", "CMYK", "I;16", "I", "F", "La", "RGBa", "YCbCr")


def _image(mode: str, size: tuple[int, int], seed: int):
    from PIL import Image

    rgb = Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    if mode in ("P", "PA"):
        im = rgb.quantize(16)
        return im.convert("PA") if mode == "PA" else im
    if mode == "I;16":
        return Image.fromarray(np.asarray(rgb.convert("L"), dtype=np.uint16) * 257)  # uint16: I;16
    if mode == "La":
        return rgb.convert("LA").convert("La")
    return rgb.convert(mode)


def _saved(im, fmt: str) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt)
    return buf.getvalue()


# the file types an image can arrive in, for the modes each holds (PIL's writers)
SOURCES = {
    "PNG": ("1", "L", "P", "RGB", "RGBA", "LA", "I;16"),
    "TIFF": ("1", "L", "P", "RGB", "RGBA", "LA", "CMYK", "I;16", "I", "F", "YCbCr", "PA"),
    "JPEG": ("L", "RGB", "CMYK", "YCbCr"),
    "WEBP": ("RGB", "RGBA"),
}
CASES = [(src, mode) for src, modes in SOURCES.items() for mode in modes]


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    case=st.sampled_from(CASES),
    target=st.sampled_from(("PNG", "JPEG", "WEBP")),
    w=st.integers(1, 40),
    h=st.integers(1, 40),
)
def test_any_mode_pil_reads_is_written_as_each_target_format_holds_it(case, target, w, h):
    from PIL import Image

    from vhmine.images import encode_as

    src, mode = case
    data = _saved(_image(mode, (w, h), w * 41 + h), src)
    with Image.open(io.BytesIO(data)) as original:
        had_alpha = original.mode in ("RGBA", "LA", "PA") or "transparency" in original.info
    out = encode_as(data, target)
    with Image.open(io.BytesIO(out)) as im:
        im.load()
        assert im.format == target and im.size == (w, h)
        if had_alpha and target == "WEBP":  # PIL's WebP writer leaves out an alpha that is opaque throughout
            assert im.mode in ("RGB", "RGBA")
        else:
            assert im.mode == ("RGBA" if had_alpha and target != "JPEG" else "RGB")


def test_sixteen_bit_grey_is_scaled_not_clipped_to_white():
    from PIL import Image

    from vhmine.images import encode_as

    grey = Image.fromarray(np.full((4, 4), 128 * 257, dtype=np.uint16))
    assert grey.mode == "I;16"
    with Image.open(io.BytesIO(encode_as(_saved(grey, "PNG"), "PNG"))) as im:
        assert im.convert("RGB").getpixel((0, 0)) == (128, 128, 128)


def _odd_photos(folder):
    """The fixture photos saved as CMYK JPEG, grey, palette, RGBA, 16-bit grey and grey-alpha files."""
    from PIL import Image

    base = write_photos(folder / "rgb", ("astronaut", "coffee", "rocket", "horse", "chelsea", "camera"))
    folder.mkdir(exist_ok=True)
    out = []
    for src, (mode, suffix) in zip(
        base, [("CMYK", "jpg"), ("L", "png"), ("P", "png"), ("RGBA", "png"), ("I;16", "png"), ("LA", "png")]
    ):
        with Image.open(src) as im:
            rgb = im.convert("RGB")
        if mode == "I;16":
            odd = Image.fromarray(np.asarray(rgb.convert("L"), dtype=np.uint16) * 257)  # uint16: I;16
        elif mode == "P":
            odd = rgb.quantize(32)
        else:
            odd = rgb.convert(mode)
        p = folder / f"{src.stem}-{mode.replace(';', '')}.{suffix}"
        odd.save(p)
        out.append(p)
    return out


@pytest.fixture
def odd_store(tmp_path):
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    st_ = open_store(tmp_path / "s.db")
    photos = _odd_photos(tmp_path / "photos")
    seed_pairs(st_, write_pairs(tmp_path / "runs" / "t", photos), per_mode=15, modes=["counting"])
    C.add_worker(st_, "alice")
    while (item := C.next_item(st_, "alice", "counting")) is not None:
        ids = [v.id for v in item.images]
        C.save_annotation(
            st_,
            "alice",
            item.task_id,
            C.Annotation("counting.how_many", {"object": "cats"}, answers=dict(zip(ids, ["3", "2"]))),
        )
        drafts = C.pending_drafts(st_, "alice", "counting")
        C.confirm_drafts(st_, "alice", [C.DraftDecision(d.instance_id, True) for d in drafts])
    yield st_
    st_.close()


def test_a_store_of_cmyk_grey_palette_alpha_and_16_bit_photos_exports_in_every_format(odd_store, tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    names = [n for n in F.format_names() if F.get_format(n).exportable]
    assert len(names) == 8
    for fmt in names:
        out = tmp_path / "b" / fmt
        r = CliRunner().invoke(
            app,
            [
                "export",
                "--db",
                odd_store.url,
                "--out",
                str(out),
                "--format",
                fmt,
                "--allow-unbalanced",
                "--no-near-dups",
            ],
        )
        assert r.exit_code == 0, f"{fmt}: {r.output}"
        assert len(F.load(out)) > 0


def test_export_refuses_an_unwritable_out_at_once_in_one_line(odd_store, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from vhmine.cli import app
    from vhmine.export import job

    def never(*a, **k):
        raise AssertionError("the export did work before checking --out")

    monkeypatch.setattr(job, "unavailable_images", never)
    for folder in unwritable_folders(tmp_path):
        start = time.monotonic()
        r = CliRunner().invoke(app, ["export", "--db", odd_store.url, "--out", str(folder), "--format", "pope"])
        assert r.exit_code != 0 and time.monotonic() - start < 5
        lines = r.output.strip().splitlines()
        assert len(lines) == 1, r.output
        assert lines[0].startswith("error: --out: cannot write in ") or "--out: cannot write in" in lines[0]
        assert "choose a folder you can write" in lines[0] and "disk" not in lines[0]
        with pytest.raises(Exception, match=r"--out: cannot write in .*choose a folder you can write"):
            export_benchmark(odd_store, ExportOptions(out=folder, format="pope"))
