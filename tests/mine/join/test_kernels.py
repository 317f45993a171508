"""mine/kernels.py: every products kernel exact (against int64 products and, through find_pairs, against
the float64 brute force), at the ends of its range where int16 pairs would saturate; a kernel that is not
exact, or not offered, is refused when forced and passed over otherwise."""

import math

import numpy as np
import pytest
from helpers import unit_rows
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vhmine.errors import InputError
from vhmine.mine.join import calibrate, kernels
from vhmine.mine.join.kernels import KERNELS, available, build, exact, levels_of, probe_rows
from vhmine.mine.join.quantise import fast_pass, qmax_for
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_pairs

HERE = sorted(available("cpu"))  # the kernels this machine's libraries offer on its CPU


def test_the_cpu_offers_the_portable_kernels_and_names_the_rest():
    assert {"fbgemm", "blas-f32", "torch-f32"} <= set(HERE) or "fbgemm" not in HERE
    assert {"blas-f32", "torch-f32"} <= set(HERE)
    with pytest.raises(InputError, match=r"--kernel nope: not a products kernel; use one of auto, int-mm, fbg"):
        build("nope", "cpu")
    with pytest.raises(kernels.Unavailable):
        build("blas-f32", "meta")  # numpy's BLAS only on the CPU
    for name in set(KERNELS) - set(HERE):  # (bf16 without AMX, say) said in one line, as --kernel's error
        with pytest.raises(
            InputError, match=rf"--kernel {name}: not offered on this machine \(.+\); use --kernel auto"
        ):
            find_pairs(_sign_rows(70, 16, 0), _sign_rows(70, 16, 1), 0.9, kernel=name)


@pytest.mark.parametrize("name", HERE)
def test_each_kernel_is_exact_at_the_ends_of_its_range(name):
    import torch

    k = build(name, "cpu")
    for d in (8, 40, 768):
        lv = k.levels(d)
        assert lv == min(qmax_for(d), 90 if name == "fbgemm" else 127)
        p = probe_rows(lv, d, rows=48)
        assert np.abs(p.astype(int)).max() == lv
        got = k.product(torch.from_numpy(p), torch.from_numpy(p)).numpy().astype(np.int64)
        want = p.astype(np.int64) @ p.astype(np.int64).T
        assert np.array_equal(got, want)
        assert got[0, 0] == lv * lv * d and got[0, 1] == -lv * lv * d  # the largest sums there are
    assert exact(k, "cpu", 768)


@pytest.mark.parametrize("name", HERE)
@given(data=st.data())
def test_each_kernel_equals_int64_products_property(name, data):
    import torch

    k = build(name, "cpu")
    d = data.draw(st.sampled_from([8, 16, 24, 72]))
    lv = k.levels(d)
    ends = st.sampled_from([-lv, lv, 0, 1, -1])  # mostly the ends: where int16 pairs of products saturate
    vals = st.one_of(ends, st.integers(-lv, lv))
    a, b = (data.draw(arrays(np.int8, (data.draw(st.integers(1, 6)), d), elements=vals)) for _ in range(2))
    got = k.product(torch.from_numpy(a), torch.from_numpy(b)).numpy().astype(np.int64)
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64).T)


def _sign_rows(n: int, d: int, seed: int) -> np.ndarray:
    """Rows of equal-magnitude components (+-1/sqrt(d)) in a few sign patterns, a little perturbed: every
    component quantises to the end of the range, and the clusters hold pairs at cosine near 1 and -1."""
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], (6, d))
    signs[1] = -signs[0]
    signs[2, 0::2], signs[2, 1::2] = 1.0, -1.0
    x = signs[rng.integers(0, 6, n)] * (1 + 0.02 * rng.random((n, d)))
    return unit_rows(x).astype(np.float32)


@pytest.mark.parametrize("name", HERE)
def test_find_pairs_with_each_kernel_forced_equals_brute_force_at_the_saturation_edge(name):
    clip = _sign_rows(260, 64, 1)
    dino = unit_rows(np.random.default_rng(2).normal(size=(260, 16))).astype(np.float32)
    fp = fast_pass(clip, 0.95, rotate=False, qmax=levels_of(name, 64))
    assert np.abs(fp.q.astype(int)).max() == levels_of(name, 64)  # the rows reach the ends of the range
    for cmin, dmax in ((0.95, 0.5), (0.999, math.inf)):
        st_: dict = {}
        got = find_pairs(clip, dino, cmin, dmax, block_size=128, kernel=name, stats=st_, workers=2)
        assert st_["kernel"]["name"] == name and st_["kernel"]["chosen"] == "forced"
        want = brute_force_pairs(clip, dino, cmin, dmax)
        assert len(want) > 100
        assert_same_pairs(got, want)


@pytest.mark.parametrize("name", HERE)
def test_find_pairs_with_each_kernel_forced_equals_brute_force_on_spiky_rows(name):
    # CLIP-shaped: a few dominant dimensions, so the turn is on, and thresholds put on a pair's own sim
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 48))
    x[:, 3] += 12
    x[150:] = x[:150] + 0.3 * rng.normal(size=(150, 48))
    clip, dino = unit_rows(x).astype(np.float32), unit_rows(rng.normal(size=(300, 8))).astype(np.float32)
    ref = brute_force_pairs(clip, dino, 0.97)
    cmin = float(ref.clip_sim[len(ref) // 2])
    assert_same_pairs(
        find_pairs(clip, dino, cmin, kernel=name, block_size=64, workers=1), brute_force_pairs(clip, dino, cmin)
    )


def test_a_forced_kernel_that_is_not_exact_here_is_refused(monkeypatch):
    import torch

    def wrong(a, b, out=None):  # a kernel whose library went wrong: off by one somewhere
        res = torch.mm(a.float(), b.float()).to(torch.int32)
        res[0, 0] += 1
        return out.copy_(res) if out is not None else res

    monkeypatch.setattr(torch, "_int_mm", wrong)
    # (this process's memo of an earlier choice, another kernel, would be kept: it is still exact)
    monkeypatch.setattr(calibrate, "_CHOSEN", {})
    clip = _sign_rows(100, 16, 0)
    with pytest.raises(
        InputError, match="--kernel int-mm: its products are not exact on this machine; use --kernel auto"
    ):
        find_pairs(clip, clip, 0.9, kernel="int-mm")
    # the default passes it over and stays exact
    st_: dict = {}
    assert_same_pairs(find_pairs(clip, clip, 0.9, stats=st_, block_size=64), brute_force_pairs(clip, clip, 0.9))
    assert st_["kernel"]["name"] != "int-mm" and st_["kernel"]["gmac_per_s"].get("int-mm", 0) is None
