"""mine/join/native.py and pairdots.c, the re-check's arithmetic in C: pair_sims gives the same bits with it as in
numpy (it only forms the exact element products; numpy sums them either way), the float32 products stay within
the screen's proven error bound, the screen keeps the same pairs with the same values either way, rows numpy
would have to copy (not C-contiguous, not float32) go through numpy, and a machine that cannot build the
library re-checks in numpy with nothing half-written."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.join import native, recheck

pytestmark = pytest.mark.skipif(native.pairdots() is None, reason="no C compiler here to build pairdots.c")


def _rows(seed: int, n: int, d: int, spread: float) -> np.ndarray:
    """float32 rows of very different magnitudes (10^-spread to 10^spread), some of them repeated."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) * 10.0 ** rng.uniform(-spread, spread, (n, 1))
    x[rng.integers(0, n, n // 4)] = x[0]
    return x.astype(np.float32)


def _pairs(seed: int, n: int, m: int):
    rng = np.random.default_rng(seed + 1)
    return rng.integers(0, n, m), rng.integers(0, n, m)


@given(
    n=st.integers(1, 40),
    d=st.integers(1, 70),
    m=st.integers(0, 600),
    seed=st.integers(0, 2**16),
    spread=st.floats(0, 6),
)
def test_pair_sims_has_the_same_bits_in_c_and_in_numpy_property(monkeypatch, n, d, m, seed, spread):
    # widths not a multiple of any vector's, batches across the 256-pair chunks, a row with itself
    x = _rows(seed, n, d, spread)
    i, j = _pairs(seed, n, m)
    with_c = recheck.pair_sims(x, i, j)
    assert native.pair_dots(x, i, j) is not None  # (the C path ran)
    with monkeypatch.context() as numpy_only:  # (a context: hypothesis runs many examples in one test)
        numpy_only.setattr(native, "pairdots", lambda: None)
        assert np.array_equal(with_c.view(np.int64), recheck.pair_sims(x, i, j).view(np.int64))


@given(n=st.integers(1, 40), d=st.integers(1, 1100), seed=st.integers(0, 2**16), spread=st.floats(0, 6))
def test_float32_products_stay_within_the_screens_bound_property(n, d, seed, spread):
    x = _rows(seed, n, d, spread)
    i, j = _pairs(seed, n, 300)
    dots = native.pair_dots(x, i, j)
    assert dots.dtype == np.float32 and len(dots) == len(i)
    exact = np.einsum("ij,ij->i", x[i].astype(np.longdouble), x[j].astype(np.longdouble))
    bound = recheck._gamma(d, recheck._U32) * np.einsum("ij,ij->i", np.abs(x[i]), np.abs(x[j]), dtype=np.float64)
    assert np.all(np.abs(dots - exact) <= bound * (1 + 1e-6) + 1e-300)
    assert np.abs(dots - recheck.pair_sims(x, i, j)).max(initial=0) <= recheck._screen_bound(x, i, j)


@given(seed=st.integers(0, 2**16), d=st.integers(1, 90), lo_at=st.integers(0, 99), hi_at=st.integers(0, 99))
def test_the_screen_keeps_the_same_pairs_and_values_in_c_and_in_numpy(monkeypatch, seed, d, lo_at, hi_at):
    # limits set to pairs' own similarities: equality keeps a pair, both ways
    x = _rows(seed, 30, d, 1.0)
    x /= np.linalg.norm(x, axis=1, keepdims=True).clip(1e-30)
    i, j = _pairs(seed, 30, 100)
    sims = recheck.pair_sims(x, i, j)
    lo, hi = sorted((sims[lo_at], sims[hi_at]))
    for values in (False, True):
        keep_c, vals_c = recheck._screen(x, i, j, lo, hi, values=values)
        assert np.array_equal(keep_c, (sims >= lo) & (sims <= hi))
        with monkeypatch.context() as numpy_only:
            numpy_only.setattr(native, "pairdots", lambda: None)
            keep_np, vals_np = recheck._screen(x, i, j, lo, hi, values=values)
        assert np.array_equal(keep_c, keep_np)
        if values:
            assert np.array_equal(vals_c[keep_c], sims[keep_c]) and np.array_equal(vals_np[keep_np], sims[keep_np])


def test_rows_that_c_would_need_copied_go_through_numpy():
    x = _rows(3, 50, 24, 2.0)
    i, j = _pairs(3, 50, 80)
    want = recheck.pair_sims(x, i, j)
    strided = np.zeros((50, 48), np.float32)[:, ::2]  # a view: C would need a copy of every row
    strided[...] = x
    as64 = x.astype(np.float64)
    assert native.pair_dots(strided, i, j) is None and native.pair_dots(as64, i, j) is None
    assert np.array_equal(recheck.pair_sims(strided, i, j), want)
    keep, vals = recheck._screen(strided, i, j, -math.inf, float(np.median(want)), values=True)
    assert np.array_equal(keep, want <= np.median(want)) and np.array_equal(vals[keep], want[keep])


def test_a_machine_that_cannot_build_it_rechecks_in_numpy(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a command that exits 1: no library is built
    monkeypatch.setenv(native.CALIBRATION_ENV, str(tmp_path / "kernels.json"))
    native.pairdots.cache_clear()
    try:
        with pytest.raises(native.NotBuilt, match=r"^pairdots\.c did not compile: "):
            native.build("pairdots", native.PAIRDOTS_FLAGS)
        assert native.pairdots() is None and not list(tmp_path.iterdir())  # nothing half-written
        x = _rows(5, 40, 33, 1.0)
        i, j = _pairs(5, 40, 300)
        assert native.pair_dots(x, i, j) is None
        want = np.einsum("ij,ij->i", x[i].astype(np.float64), x[j])
        assert np.allclose(recheck.pair_sims(x, i, j), want, rtol=1e-12, atol=1e-6)
    finally:
        native.pairdots.cache_clear()
    monkeypatch.delenv("CC")
    assert native.pairdots() is not None and list(tmp_path.glob("pairdots-*.so"))  # built beside that cache
    native.pairdots.cache_clear()


def test_a_cache_folder_that_cannot_be_written_is_said_in_one_line(tmp_path, monkeypatch):
    from vhmine.mine.join import kernels, vnni

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(native.CALIBRATION_ENV, str(tmp_path / "file" / "kernels.json"))  # its folder is a file
    monkeypatch.delenv(vnni.LIB_ENV, raising=False)
    native.pairdots.cache_clear()
    vnni.library.cache_clear()
    try:
        with pytest.raises(native.NotBuilt, match=r"^pairdots\.c could not be built in file/: ") as why:
            native.build("pairdots", native.PAIRDOTS_FLAGS)
        assert "\n" not in str(why.value)
        assert native.pairdots() is None  # the re-check then runs in numpy
        x = _rows(7, 20, 12, 1.0)
        i, j = _pairs(7, 20, 50)
        assert np.allclose(recheck.pair_sims(x, i, j), np.einsum("ij,ij->i", x[i].astype(np.float64), x[j]))
        if "vnni" in kernels.KERNELS and vnni.cpu(("avx512_vnni",))[1]:
            with pytest.raises(kernels.Unavailable, match=r"^vnni\.c could not be built in file/: "):
                kernels.build("vnni", "cpu")
    finally:
        native.pairdots.cache_clear()
        vnni.library.cache_clear()


def test_a_library_that_does_not_load_is_said_in_one_line(tmp_path, monkeypatch):
    bad = tmp_path / "pairdots.so"
    bad.write_bytes(b"not a shared object")
    monkeypatch.setenv("VHMINE_TEST_PAIRDOTS", str(bad))
    with pytest.raises(native.NotBuilt, match=r"^pairdots\.so did not load: "):
        native.build("pairdots", native.PAIRDOTS_FLAGS, env="VHMINE_TEST_PAIRDOTS")
