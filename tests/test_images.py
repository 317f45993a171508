"""vhmine.images: a real corpus of broken and odd files, built in tmp_path, through decode_rgb."""

from __future__ import annotations

import io
import os
import struct
import warnings
import zlib

import numpy as np
import pytest
import skimage.data
from PIL import Image

from vhmine.errors import InputError
from vhmine.images import IMAGE_SUFFIXES, BadImage, decode_rgb, list_images, sha256_bytes


def encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def reason(data: bytes, **kw) -> str:
    with pytest.raises(BadImage) as info:
        decode_rgb(data, **kw)
    assert str(info.value) == info.value.reason
    return info.value.reason


def pixels(im: Image.Image) -> np.ndarray:
    assert im.mode == "RGB"
    return np.asarray(im).astype(int)


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def png_claiming(width: int, height: int) -> bytes:
    """A 1-bit PNG whose IHDR claims width x height, with only a few rows of real data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + (width + 7) // 8) * 4)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", rows) + png_chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    return Image.fromarray(skimage.data.astronaut())


# --- files that are not usable images -------------------------------------------------------


def test_zero_byte_file(tmp_path):
    path = tmp_path / "empty.jpg"
    path.write_bytes(b"")
    assert reason(path.read_bytes()) == "empty file (0 bytes)"


def test_text_named_jpg(tmp_path):
    path = tmp_path / "notes.jpg"
    path.write_text("shopping list\n- eggs\n")
    assert reason(path.read_bytes()) == "not an image (cannot identify format): looks like text"


def test_html_saved_as_png(tmp_path):
    path = tmp_path / "photo.png"
    path.write_text("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head></html>\n")
    r = reason(path.read_bytes())
    assert r.startswith("not an image (cannot identify format)")
    assert "HTML" in r


def test_git_lfs_pointer():
    data = b"version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 12345\n"
    assert "git lfs pull" in reason(data)


def test_random_binary():
    data = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    assert reason(data) == "not an image (cannot identify format)"


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
@pytest.mark.parametrize("keep", [0.3, 0.9])
def test_truncated(astronaut, fmt, keep):
    data = encode(astronaut, fmt)
    assert decode_rgb(data).size == (512, 512)
    # A truncated file must fail, not come back grey-padded.
    assert reason(data[: int(len(data) * keep)]) == "truncated file"


def test_jpeg_missing_only_its_end_marker(astronaut):
    data = encode(astronaut, "JPEG")
    assert data.endswith(b"\xff\xd9")
    assert reason(data[:-2]) == "truncated file"


# --- the pixel-count guard ------------------------------------------------------------------


def test_header_claiming_huge_size_is_rejected_before_decoding():
    data = png_claiming(40000, 40000)
    assert len(data) < 1000
    saved = Image.MAX_IMAGE_PIXELS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PIL's DecompressionBombWarning must not fire either
        r = reason(data)
    assert r == "too large: 40000x40000 = 1600000000 pixels > --max-pixels 89478485"
    assert Image.MAX_IMAGE_PIXELS == saved


def test_max_pixels_is_ours(astronaut):
    data = encode(astronaut, "PNG")
    assert reason(data, max_pixels=100_000) == "too large: 512x512 = 262144 pixels > --max-pixels 100000"
    assert decode_rgb(data, max_pixels=512 * 512).size == (512, 512)


def test_pil_global_limit_neither_used_nor_changed(astronaut, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    data = encode(astronaut, "JPEG")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert decode_rgb(data).size == (512, 512)
    reason(b"garbage")
    assert Image.MAX_IMAGE_PIXELS == 1000


def test_webp_size_checked_before_pil_opens_it(astronaut):
    for kw in ({}, {"lossless": True}, {"save_all": True, "append_images": [astronaut]}):
        data = encode(astronaut, "WEBP", **kw)
        assert reason(data, max_pixels=1000) == "too large: 512x512 = 262144 pixels > --max-pixels 1000"


# --- modes into 8-bit RGB -------------------------------------------------------------------


def test_real_photo_roundtrip(astronaut):
    ref = np.asarray(astronaut).astype(int)
    out = pixels(decode_rgb(encode(astronaut, "PNG")))
    assert np.array_equal(out, ref)
    jpeg = pixels(decode_rgb(encode(astronaut, "JPEG", quality=95)))
    assert np.abs(jpeg - ref).mean() < 3


def test_16bit_png_is_scaled_not_clipped(tmp_path):
    levels = np.arange(256, dtype=np.uint16) * 257  # 0, 257, ..., 65535: exact multiples
    path = tmp_path / "depth16.png"
    Image.fromarray(levels.reshape(16, 16)).save(path)
    src = Image.open(path)
    assert src.mode.startswith("I;16")
    # What we guard against: PIL's own conversion clips everything above 255.
    assert np.asarray(src.convert("RGB"))[0, 1, 0] == 255
    out = pixels(decode_rgb(path.read_bytes()))
    assert np.array_equal(out[..., 0].ravel(), np.arange(256))
    assert np.array_equal(out[..., 0], out[..., 2])


def test_16bit_big_endian_and_rounding():
    values = np.array([[0, 128, 32896, 65535]], dtype=np.uint16)  # 32896 / 257 = 128 exactly
    im = Image.fromarray(values.astype(">u2"))
    assert im.mode == "I;16B"
    out = pixels(decode_rgb(encode(im, "TIFF")))
    assert out[0, :, 0].tolist() == [0, 0, 128, 255]


def test_32bit_int_and_float_modes():
    ints = Image.fromarray(np.array([[0, 1000, 65535]], dtype=np.int32))
    assert ints.mode == "I"
    assert pixels(decode_rgb(encode(ints, "TIFF")))[0, :, 0].tolist() == [0, 4, 255]
    unit = Image.fromarray(np.array([[0.0, 0.5, 1.0]], dtype=np.float32))
    assert unit.mode == "F"
    assert pixels(decode_rgb(encode(unit, "TIFF")))[0, :, 1].tolist() == [0, 128, 255]
    wide = Image.fromarray(np.array([[-10.0, 0.0, 10.0]], dtype=np.float32))
    assert pixels(decode_rgb(encode(wide, "TIFF")))[0, :, 1].tolist() == [0, 128, 255]


def test_grayscale_and_one_bit():
    gray = Image.fromarray(np.array([[0, 77, 200, 255]], dtype=np.uint8))
    out = pixels(decode_rgb(encode(gray, "PNG")))
    assert out[0].tolist() == [[v, v, v] for v in (0, 77, 200, 255)]
    bits = Image.fromarray(np.array([[False, True, True, False]]))
    assert bits.mode == "1"
    assert pixels(decode_rgb(encode(bits, "PNG")))[0, :, 0].tolist() == [0, 255, 255, 0]


def test_rgba_transparent_goes_on_white():
    rgba = np.array([[[255, 0, 0, 0], [0, 0, 255, 255], [255, 0, 0, 128]]], dtype=np.uint8)
    out = pixels(decode_rgb(encode(Image.fromarray(rgba, "RGBA"), "PNG")))
    assert out[0, 0].tolist() == [255, 255, 255]  # fully transparent: white, not black or red
    assert out[0, 1].tolist() == [0, 0, 255]
    assert out[0, 2].tolist() == [255, 127, 127]  # half red over white


def test_gray_with_alpha():
    la = Image.fromarray(np.array([[[0, 0], [0, 255]]], dtype=np.uint8), "LA")
    assert pixels(decode_rgb(encode(la, "PNG")))[0].tolist() == [[255, 255, 255], [0, 0, 0]]


def test_palette_with_and_without_transparency():
    pal = Image.new("P", (3, 1))
    pal.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (256 - 3) * 3)
    pal.putdata([0, 1, 2])
    plain = pixels(decode_rgb(encode(pal, "PNG")))
    assert plain[0].tolist() == [[0, 0, 0], [255, 0, 0], [0, 255, 0]]
    see_through = pixels(decode_rgb(encode(pal, "PNG", transparency=0)))
    assert see_through[0].tolist() == [[255, 255, 255], [255, 0, 0], [0, 255, 0]]


def test_rgb_png_with_transparent_colour_key():
    rgb = Image.fromarray(np.array([[[10, 20, 30], [200, 0, 0]]], dtype=np.uint8))
    out = pixels(decode_rgb(encode(rgb, "PNG", transparency=(10, 20, 30))))
    assert out[0].tolist() == [[255, 255, 255], [200, 0, 0]]


def test_cmyk_jpeg():
    cmyk = Image.new("CMYK", (48, 16))
    cmyk.paste((0, 0, 0, 0), (0, 0, 16, 16))  # white
    cmyk.paste((255, 0, 0, 0), (16, 0, 32, 16))  # cyan
    cmyk.paste((0, 0, 0, 255), (32, 0, 48, 16))  # black
    data = encode(cmyk, "JPEG", quality=95)
    assert Image.open(io.BytesIO(data)).mode == "CMYK"
    out = pixels(decode_rgb(data))
    for x, want in ((8, (255, 255, 255)), (24, (0, 255, 255)), (40, (0, 0, 0))):
        assert np.abs(out[8, x] - np.array(want)).max() <= 8, (x, out[8, x])


def test_cmyk_jpeg_with_broken_icc_profile_falls_back():
    cmyk = Image.new("CMYK", (16, 16), (255, 0, 0, 0))
    out = pixels(decode_rgb(encode(cmyk, "JPEG", quality=95, icc_profile=b"not a profile")))
    assert np.abs(out[8, 8] - np.array([0, 255, 255])).max() <= 8


def test_exif_rotated_jpeg():
    im = Image.new("RGB", (64, 32), (255, 0, 0))
    im.paste((0, 0, 255), (32, 0, 64, 32))  # left red, right blue
    exif = Image.Exif()
    exif[0x0112] = 6  # shown rotated 90 degrees clockwise
    out = decode_rgb(encode(im, "JPEG", quality=95, exif=exif.tobytes()))
    assert out.size == (32, 64)
    arr = pixels(out)
    assert np.abs(arr[8, 16] - [255, 0, 0]).max() < 10  # the left half is now on top
    assert np.abs(arr[56, 16] - [0, 0, 255]).max() < 10


@pytest.mark.parametrize("at_least", [64, 100, 256, 511, 512, 2000])
def test_a_jpeg_decoded_for_a_thumbnail_is_smaller_but_never_below_the_size_asked(astronaut, at_least):
    """at_least: libjpeg's scaled decoding (1/2, 1/4, 1/8) where the longer side stays >= at_least; the
    picture is the full one's, reduced (a thumbnail made from it is within a few levels of one from the full)."""
    data = encode(astronaut, "JPEG", quality=92)  # 512 x 512
    full, small = decode_rgb(data), decode_rgb(data, at_least=at_least)
    assert full.size == (512, 512)
    want = 512 // max(s for s in (1, 2, 4, 8) if 512 // s >= at_least) if at_least < 512 else 512
    assert small.size == (want, want) and max(small.size) >= min(at_least, 512)
    a, b = full.copy(), small.copy()
    a.thumbnail((64, 64))
    b.thumbnail((64, 64))
    assert a.size == b.size and np.abs(pixels(a) - pixels(b)).mean() < 4
    # a PNG has no scaled decoding: it comes whole; an EXIF-turned JPEG comes upright at the size asked
    assert decode_rgb(encode(astronaut, "PNG"), at_least=64).size == (512, 512)
    wide = astronaut.resize((512, 256))
    exif = Image.Exif()
    exif[0x0112] = 6
    turned = decode_rgb(encode(wide, "JPEG", quality=92, exif=exif.tobytes()), at_least=100)
    assert turned.size == (64, 128)  # a quarter (the longer side 128 >= 100), then turned upright


def test_animated_images_give_first_frame():
    red, blue = Image.new("RGB", (8, 8), (255, 0, 0)), Image.new("RGB", (8, 8), (0, 0, 255))
    for fmt in ("GIF", "PNG", "WEBP"):
        kw = {"lossless": True} if fmt == "WEBP" else {}
        data = encode(red, fmt, save_all=True, append_images=[blue], duration=100, **kw)
        assert getattr(Image.open(io.BytesIO(data)), "n_frames", 1) == 2, fmt
        out = pixels(decode_rgb(data))
        assert out[4, 4].tolist() == [255, 0, 0], fmt


def test_result_is_detached_rgb(astronaut):
    out = decode_rgb(encode(astronaut, "JPEG"))
    assert isinstance(out, Image.Image) and out.mode == "RGB"
    out.resize((10, 10))  # fully loaded: usable after the source bytes are gone


# --- listing and hashing --------------------------------------------------------------------


def test_list_images(tmp_path):
    for rel in (
        "b.jpg",
        "a/z.PNG",
        "a/y.jpeg",
        "a-b.webp",
        "c/d/e.JpG",
        "notes.txt",
        ".hidden.jpg",
        ".cache/x.jpg",
        "c/.thumbs/t.jpg",
    ):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    got = [p.relative_to(tmp_path).as_posix() for p in list_images(tmp_path)]
    assert got == sorted(["a-b.webp", "a/y.jpeg", "a/z.PNG", "b.jpg", "c/d/e.JpG"])
    assert all(p.is_relative_to(tmp_path) for p in list_images(tmp_path))
    assert IMAGE_SUFFIXES == (".jpg", ".jpeg", ".png", ".webp")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_list_images_symlink_loop_and_dangling_link(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.jpg").write_bytes(b"x")
    (tmp_path / "sub" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "missing.jpg")
    got = [p.relative_to(tmp_path).as_posix() for p in list_images(tmp_path)]
    assert got == ["sub/a.jpg"]


def test_list_images_missing_folder(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        list_images(tmp_path / "nope")


def test_sha256_bytes():
    assert sha256_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_bytes(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_is_named_even_when_another_library_made_pil_lenient(astronaut, fmt, monkeypatch):
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # what importing lmms-eval does
    data = encode(astronaut, fmt)
    assert reason(data[: int(len(data) * 0.5)]) == "truncated file"
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # their setting is left as it was
