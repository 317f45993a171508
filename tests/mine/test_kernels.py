"""mine/kernels.py: every products kernel exact (against int64 products and, through find_pairs, against
the float64 brute force), at the ends of its range where int16 pairs would saturate; the choice of the
fastest by measurement; the per-machine cache; --kernel through `vhmine mine` into run.json."""

import json
import math
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays
from typer.testing import CliRunner

from vhmine.cli import app
from vhmine.errors import InputError
from vhmine.mine import kernels
from vhmine.mine.kernels import KERNELS, Kernel, available, build, choose, exact, levels_of, probe_rows
from vhmine.mine.quantise import fast_pass, qmax_for
from vhmine.mine.simsearch import assert_same_pairs, brute_force_pairs, find_pairs
from helpers import make_index, unit_rows

HERE = sorted(available("cpu"))  # the kernels this machine's libraries offer on its CPU


def test_the_cpu_offers_the_portable_kernels_and_names_the_rest():
    assert {"fbgemm", "blas-f32", "torch-f32"} <= set(HERE) or "fbgemm" not in HERE
    assert {"blas-f32", "torch-f32"} <= set(HERE)
    with pytest.raises(InputError, match=r"--kernel nope: not a products kernel; use one of auto, int-mm, fbgemm"):
        build("nope", "cpu")
    with pytest.raises(kernels.Unavailable):
        build("blas-f32", "meta")  # numpy's BLAS only on the CPU
    for name in set(KERNELS) - set(HERE):  # (bf16 without AMX, say) said in one line, as --kernel's error
        with pytest.raises(InputError, match=rf"--kernel {name}: not offered on this machine \(.+\); use --kernel auto"):
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
    assert_same_pairs(find_pairs(clip, dino, cmin, kernel=name, block_size=64, workers=1),
                      brute_force_pairs(clip, dino, cmin))


def test_a_forced_kernel_that_is_not_exact_here_is_refused(monkeypatch):
    import torch

    def wrong(a, b, out=None):  # a kernel whose library went wrong: off by one somewhere
        res = torch.mm(a.float(), b.float()).to(torch.int32)
        res[0, 0] += 1
        return out.copy_(res) if out is not None else res

    monkeypatch.setattr(torch, "_int_mm", wrong)
    clip = _sign_rows(100, 16, 0)
    with pytest.raises(InputError, match="--kernel int-mm: its products are not exact on this machine; use --kernel auto"):
        find_pairs(clip, clip, 0.9, kernel="int-mm")
    # the default passes it over and stays exact
    st_: dict = {}
    assert_same_pairs(find_pairs(clip, clip, 0.9, stats=st_, block_size=64), brute_force_pairs(clip, clip, 0.9))
    assert st_["kernel"]["name"] != "int-mm" and st_["kernel"]["gmac_per_s"].get("int-mm", 0) is None


def _fake(name: str, gmacs: float, calls: list, cap: int = 127) -> Kernel:
    """A kernel of known speed: it computes the true product, then burns this thread's CPU until the
    work at `gmacs` GMAC/s would be done (thread time: a busy machine does not stretch it)."""
    import torch

    def mm(a, b, out):
        calls.append(name)
        t0 = time.thread_time()
        out.copy_(torch.mm(a.float(), b.float().T))
        while time.thread_time() - t0 < a.shape[0] * b.shape[0] * a.shape[1] / gmacs / 1e9:
            pass
        return out

    return Kernel(name, "cpu", cap, "float32", lambda t: t, lambda t: t, mm)


MACHINE = {"cpu": "Test CPU 9000", "cores": 2, "flags": ["avx2"], "torch": "2.0", "numpy": "2.0"}


def test_calibration_picks_the_fastest_of_fakes_with_known_rates(tmp_path):
    calls: list = []
    fakes = {"slow": _fake("slow", 0.5, calls), "fast": _fake("fast", 8.0, calls), "mid": _fake("mid", 2.0, calls)}
    t0 = time.perf_counter()
    c = choose("cpu", 64, candidates=fakes, cache=tmp_path / "k.json", identity=MACHINE)
    assert time.perf_counter() - t0 < 1.5  # well under a second of calibration, on a quiet machine
    assert c.name == "fast" and c.source == "measured"
    assert c.rates["slow"] < c.rates["mid"] < c.rates["fast"]
    for name, want in (("slow", 0.5), ("mid", 2.0), ("fast", 8.0)):
        assert want / 2 < c.rates[name] < want * 1.5  # measured, near the known rate
    # a kernel whose levels are too few for the rows is passed over, however fast
    fakes["narrow"] = _fake("narrow", 50.0, calls, cap=90)
    c = choose("cpu", 64, candidates=fakes, cache=tmp_path / "k2.json", identity=MACHINE, min_levels=127)
    assert c.name == "fast" and c.rates["narrow"] > c.rates["fast"]
    assert "products kernel: fast (fastest measured here; GMAC/s in one thread: " in c.line()
    rec = c.record()
    assert rec["name"] == "fast" and set(rec["gmac_per_s"]) == {"slow", "mid", "fast", "narrow"}
    assert "/" not in json.dumps(rec)  # no machine path in what run.json keeps


def test_the_cache_is_per_machine_and_measures_again_when_it_changes(tmp_path):
    calls: list = []
    fakes = {"a": _fake("a", 1.0, calls), "b": _fake("b", 4.0, calls)}
    path = tmp_path / "cache" / "kernels.json"
    first = choose("cpu", 64, candidates=fakes, cache=path, identity=MACHINE)
    assert first.source == "measured" and path.is_file()
    n = len(calls)
    again = choose("cpu", 64, candidates=fakes, cache=path, identity=MACHINE)
    assert again.source == "cached" and again.rates == first.rates and len(calls) - n <= 2  # (the exactness probe)
    for change in ({"cpu": "Other CPU"}, {"cores": 64}, {"torch": "2.1"}, {"numpy": "2.1"}, {"flags": ["avx512_vnni"]}):
        n = len(calls)
        c = choose("cpu", 64, candidates=fakes, cache=path, identity={**MACHINE, **change})
        assert c.source == "measured" and len(calls) - n > 4, change
    assert choose("cpu", 64, candidates=fakes, cache=path, identity=MACHINE).source == "cached"
    assert choose("cpu", 128, candidates=fakes, cache=path, identity=MACHINE).source == "measured"  # another width
    # a cache that cannot be read is measured again, and rewritten
    path.write_text("{not json")
    assert choose("cpu", 64, candidates=fakes, cache=path, identity=MACHINE).source == "measured"
    assert json.loads(path.read_text())["entries"]


def test_the_machine_identity_names_what_the_rates_depend_on(monkeypatch, tmp_path):
    m = kernels.machine("cpu")
    assert {"cpu", "cores", "flags", "torch", "numpy", "isa"} <= set(m) and m["cores"] >= 1
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "k.json"))
    assert kernels.cache_path() == tmp_path / "k.json"
    monkeypatch.delenv(kernels.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernels.cache_path() == tmp_path / "xdg" / "vhmine" / "kernels.json"


def test_cli_mine_forces_a_kernel_and_run_json_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.CACHE_ENV, str(tmp_path / "kernels.json"))
    rng = np.random.default_rng(3)
    clip = unit_rows(np.repeat(rng.normal(size=(6, 16)), 5, axis=0) + 0.25 * rng.normal(size=(30, 16)))
    make_index(tmp_path / "idx", "syn", clip, unit_rows(rng.normal(size=(30, 12))), root=tmp_path / "imgs")
    base = ["mine", "--index", "syn", "--indexes", str(tmp_path / "idx"), "--clip", "0.8", "--dino", "0.2"]
    runs = {}
    for name in ("torch-f32", "auto"):
        r = CliRunner().invoke(app, base + ["--kernel", name, "--out", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        runs[name] = json.loads((tmp_path / name / "run.json").read_text())
        assert f"products kernel: {runs[name]['products_kernel']['name']} (" in r.output
    assert runs["torch-f32"]["products_kernel"] == {"name": "torch-f32", "chosen": "forced", "gmac_per_s": {}}
    auto = runs["auto"]["products_kernel"]
    assert auto["chosen"] in ("measured", "cached") and auto["name"] in KERNELS
    assert auto["gmac_per_s"][auto["name"]] == max(v for v in auto["gmac_per_s"].values() if v is not None)
    assert runs["auto"]["counts"] == runs["torch-f32"]["counts"]
    r = CliRunner().invoke(app, base + ["--kernel", "int9"])
    assert r.exit_code == 2 and "--kernel int9: not a products kernel; use one of auto, int-mm" in r.output
