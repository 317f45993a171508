"""mine/join/vnni.py and vnni.c, the fused products kernel: every pair at or above the threshold listed with its
exact product (against numpy's int64 products) for any shape, padding and row slice, including products equal
to the threshold and more pairs than the kernel's list holds; find_pairs through it in threads, with the
diagonal's strips, equal to the float64 brute force; the packed operands' cache bounded; a machine that cannot
build it says why. (test_kernels checks its products, as every kernel's, at the ends of the range.)"""

import numpy as np
import pytest
from helpers import unit_rows
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.join import kernels, vnni
from vhmine.mine.join.products import Operands
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_new_pairs, find_pairs

pytestmark = pytest.mark.skipif("vnni" not in kernels.available("cpu"), reason="no fused VNNI kernel here")


def _listed(x: np.ndarray, y: np.ndarray, thresh: int, start: int = 0):
    """vnni.search's pairs of x[start:] (packed, then sliced) and y as {(row, column): product}."""
    import torch

    flat, vals = vnni.search(vnni.pack_left(torch.from_numpy(x))[start:], vnni.pack(torch.from_numpy(y)), thresh)
    assert flat.dtype == np.int32 and len(flat) == len(vals)
    got = {(int(f) // len(y), int(f) % len(y)): int(v) for f, v in zip(flat, vals)}
    assert len(got) == len(flat)  # each pair once
    return got


def _wanted(x: np.ndarray, y: np.ndarray, thresh: int):
    prod = x.astype(np.int64) @ y.astype(np.int64).T
    return {(int(i), int(j)): int(prod[i, j]) for i, j in np.argwhere(prod >= thresh)}


@given(
    m=st.integers(1, 150),
    n=st.integers(1, 200),
    k=st.integers(1, 70),
    seed=st.integers(0, 2**16),
    quantile=st.floats(0.0, 1.0),
    start=st.integers(0, 12),
)
def test_search_lists_exactly_the_pairs_at_or_above_the_threshold_property(m, n, k, seed, quantile, start):
    # ragged shapes (rows not a multiple of 4 or 64, widths not of 4), a slice of the packed rows, and the
    # threshold on a product's own value: equality counts
    rng = np.random.default_rng(seed)
    x = rng.integers(-127, 128, (m, k)).astype(np.int8)
    y = rng.integers(-127, 128, (n, k)).astype(np.int8)
    start = min(start // 4 * 4, (m - 1) // 4 * 4)
    prod = x[start:].astype(np.int64) @ y.astype(np.int64).T
    thresh = int(np.quantile(prod, quantile, method="nearest"))
    assert _listed(x, y, thresh, start) == _wanted(x[start:], y, thresh)


@given(n=st.integers(1, 300), k=st.integers(1, 40), seed=st.integers(0, 2**16), panel=st.integers(0, 4))
def test_packed_panels_cut_at_a_panels_edge_are_the_packing_of_those_rows(n, k, seed, panel):
    # the diagonal's strips search the right rows from a panel's edge on, without packing them again
    import torch

    rng = np.random.default_rng(seed)
    x, y = rng.integers(-127, 128, (9, k)).astype(np.int8), rng.integers(-127, 128, (n, k)).astype(np.int8)
    start = min(64 * panel, (n - 1) // 64 * 64)
    cut = vnni.pack(torch.from_numpy(y))[start:]
    assert len(cut) == n - start
    flat, vals = vnni.search(vnni.pack_left(torch.from_numpy(x)), cut, -(2**30))  # every product
    got = np.zeros((9, n - start), np.int64)
    got[np.divmod(flat, n - start)] = vals
    assert np.array_equal(got, x.astype(np.int64) @ y[start:].astype(np.int64).T)


def test_packed_panels_refuse_a_cut_inside_a_panel_or_short_of_the_end():
    import torch

    panels = vnni.pack(torch.zeros(200, 8, dtype=torch.int8))
    for bad in (slice(32, None), slice(64, 128), slice(0, None, 2)):
        with pytest.raises(ValueError, match="multiple of 64 to the end"):
            panels[bad]


def test_more_pairs_than_the_kernels_list_holds_are_all_listed():
    # identical rows: every one of 512 x 384 products equals the threshold, three times vnni.MAX_HITS
    x = np.full((512, 96), 3, np.int8)
    y = np.full((384, 96), -2, np.int8)
    x[:, 0] = y[:, 0] = 127
    got = _listed(x, y, int(x[0].astype(int) @ y[0].astype(int)))
    assert len(got) == 512 * 384 > vnni.MAX_HITS
    assert got == _wanted(x, y, int(x[0].astype(int) @ y[0].astype(int)))


def test_products_written_when_asked_equal_int64_at_the_ends_of_the_range():
    import torch

    p = kernels.probe_rows(127, 200, rows=70)  # all +127, all -127, alternating signs: sums near 2^22
    out = torch.empty(70, 70, dtype=torch.int32)
    vnni.mm(vnni.pack_left(torch.from_numpy(p)), vnni.pack(torch.from_numpy(p)), out)
    assert np.array_equal(out.numpy().astype(np.int64), p.astype(np.int64) @ p.astype(np.int64).T)


@pytest.mark.parametrize("workers", [1, 2])
def test_find_pairs_through_the_fused_kernel_equals_brute_force(workers):
    # near-duplicate rows across the whole range, so candidates fall in every piece, on the diagonal's strips
    # (1,300 rows, 512-row blocks: strips of 256 rows) and in a band of new rows
    rng = np.random.default_rng(7)
    base = rng.normal(size=(650, 40))
    base[:, 5] += 6
    x = np.concatenate([base, base + 0.25 * rng.normal(size=base.shape)])
    clip, dino = unit_rows(x), unit_rows(rng.normal(size=(len(x), 12)))
    want = brute_force_pairs(clip, dino, 0.97, 0.4)
    assert len(want) > 200
    stats: dict = {}
    got = find_pairs(clip, dino, 0.97, 0.4, kernel="vnni", block_size=512, workers=workers, stats=stats)
    assert stats["kernel"]["name"] == "vnni"
    assert_same_pairs(got, want)
    new = np.arange(3, len(x), 7)
    band = find_new_pairs(clip, dino, new, 0.97, 0.4, kernel="vnni", block_size=512, workers=workers)
    touched = np.isin(want.i, new) | np.isin(want.j, new)
    assert_same_pairs(band, _subset(want, touched))


def _subset(pairs, keep):
    return type(pairs)(*(getattr(pairs, f)[keep] for f in ("i", "j", "clip_sim", "dino_sim")))


def test_the_packed_operands_cache_reuses_a_packing_and_stays_within_its_bytes():
    import torch

    rows = torch.from_numpy(np.random.default_rng(1).integers(-127, 128, (640, 64)).astype(np.int8))
    calls = []

    def pack(t):
        calls.append(len(t))
        return vnni.pack(t)

    ops = Operands(limit=3 * 64 * 64)  # three packings of 64 rows of width 64
    first = ops.get(pack, "right", rows[:64])
    assert ops.get(pack, "right", rows[:64]) is first and calls == [64]  # reused, not packed again
    assert ops.get(pack, "left", rows[:64]) is not first  # a side of its own
    for s in range(64, 640, 64):
        ops.get(pack, "right", rows[s : s + 64])
    assert ops.bytes <= 3 * 64 * 64 and len(ops.held) == 3
    assert ops.get(pack, "right", rows[:64]) is not first  # dropped, least recently used: packed anew
    # a packing is of its rows' values: another tensor at the same length is another entry
    assert ops.get(pack, "right", rows[64:128].clone()) is not ops.get(pack, "right", rows[64:128])


def test_a_compiler_that_fails_is_said_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a command that exits 1: no library is built
    monkeypatch.setenv(vnni.LIB_ENV, str(tmp_path / "vnni.so"))
    vnni.library.cache_clear()
    try:
        with pytest.raises(kernels.Unavailable, match=r"^vnni\.c did not compile: "):
            kernels.build("vnni", "cpu")
        assert not list(tmp_path.iterdir())  # nothing half-written where the library would be
        monkeypatch.delenv("CC")
        assert kernels.build("vnni", "cpu").name == "vnni" and (tmp_path / "vnni.so").is_file()
    finally:
        vnni.library.cache_clear()
