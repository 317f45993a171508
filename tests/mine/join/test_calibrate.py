"""mine/calibrate.py: the choice of the fastest products kernel by measurement (fakes of known speed), the
per-machine cache (measured again when the CPU, cores, flags or library versions change), and --kernel
through `vhmine mine` into the console and run.json."""

import json
import time

import numpy as np
import pytest
from helpers import make_index, unit_rows
from typer.testing import CliRunner

from vhmine.cli import app
from vhmine.mine import local_run
from vhmine.mine.join import calibrate
from vhmine.mine.join.calibrate import choose
from vhmine.mine.join.kernels import KERNELS, Kernel


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


@pytest.mark.parametrize("bad", ["4.0", [4.0], {"gmacs": 4.0}, float("nan")])
def test_a_cached_rate_that_is_not_a_number_is_measured_again(tmp_path, bad):
    """A kernels.json whose rate is a string, a list, a dict (or NaN): edited by hand or by
    another program. It used to end every mine in a TypeError in _fastest; it is measured again, as an
    unreadable file is, and rewritten."""
    calls: list = []
    fakes = {"a": _fake("a", 1.0, calls), "b": _fake("b", 4.0, calls)}
    path = tmp_path / "kernels.json"
    choose("cpu", 64, candidates=fakes, cache=path, identity=MACHINE)
    data = json.loads(path.read_text())
    (entry,) = data["entries"].values()
    entry["rates"]["a"] = bad
    path.write_text(json.dumps(data))
    c = choose("cpu", 64, candidates=fakes, cache=path, identity=MACHINE)
    assert c.source == "measured" and c.name == "b" and isinstance(c.rates["a"], float)
    (entry,) = json.loads(path.read_text())["entries"].values()
    assert all(isinstance(v, float) for v in entry["rates"].values())


def test_a_kernel_cached_as_not_exact_is_measured_again_once_it_is_exact(tmp_path):
    import torch

    calls: list = []
    good = _fake("k", 4.0, calls)

    def wrong(a, b, out):  # the same kernel while its library is broken (or patched by a test)
        out.copy_(torch.mm(a.float(), b.float().T) + 1)
        return out

    path = tmp_path / "k.json"
    first = choose(
        "cpu",
        64,
        candidates={
            "k": Kernel("k", "cpu", 127, "float32", good.left, good.right, wrong),
            "slow": _fake("slow", 1.0, calls),
        },
        cache=path,
        identity=MACHINE,
    )
    assert first.name == "slow" and first.rates["k"] is None
    again = choose("cpu", 64, candidates={"k": good, "slow": _fake("slow", 1.0, calls)}, cache=path, identity=MACHINE)
    assert again.source == "measured" and again.name == "k" and again.rates["k"] > 0


def test_the_machine_identity_names_what_the_rates_depend_on(monkeypatch, tmp_path):
    m = calibrate.machine("cpu")
    assert {"cpu", "cores", "flags", "torch", "numpy", "isa"} <= set(m) and m["cores"] >= 1
    monkeypatch.setenv(calibrate.CACHE_ENV, str(tmp_path / "k.json"))
    assert calibrate.cache_path() == tmp_path / "k.json"
    monkeypatch.delenv(calibrate.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert calibrate.cache_path() == tmp_path / "xdg" / "vhmine" / "kernels.json"


def test_cli_mine_forces_a_kernel_and_run_json_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv(calibrate.CACHE_ENV, str(tmp_path / "kernels.json"))
    rng = np.random.default_rng(3)
    clip = unit_rows(np.repeat(rng.normal(size=(6, 16)), 5, axis=0) + 0.25 * rng.normal(size=(30, 16)))
    make_index(tmp_path / "idx", "syn", clip, unit_rows(rng.normal(size=(30, 12))), root=tmp_path / "imgs")
    base = ["mine", "--index", "syn", "--indexes", str(tmp_path / "idx"), "--clip", "0.8", "--dino", "0.2"]
    runs = {}
    # a run of at most SMALL_PAIRS pairs multiplies them all in float64 without torch: the calibrated
    # choice is seen on a larger run, here by lowering the bound
    r = CliRunner().invoke(app, base + ["--out", str(tmp_path / "small")])
    assert r.exit_code == 0, r.output
    assert "products: every one of the 435 pairs in float64" in r.output
    small = json.loads((tmp_path / "small" / "run.json").read_text())
    assert small["products_kernel"]["name"] == "float64"
    monkeypatch.setattr(local_run, "SMALL_PAIRS", 0)
    for name in ("torch-f32", "auto"):
        r = CliRunner().invoke(app, base + ["--kernel", name, "--out", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        runs[name] = json.loads((tmp_path / name / "run.json").read_text())
        assert f"products kernel: {runs[name]['products_kernel']['name']} (" in r.output
    assert runs["auto"]["counts"] == small["counts"]
    assert runs["torch-f32"]["products_kernel"] == {"name": "torch-f32", "chosen": "forced", "gmac_per_s": {}}
    auto = runs["auto"]["products_kernel"]
    assert auto["chosen"] in ("measured", "cached") and auto["name"] in KERNELS
    assert auto["gmac_per_s"][auto["name"]] == max(v for v in auto["gmac_per_s"].values() if v is not None)
    assert runs["auto"]["counts"] == runs["torch-f32"]["counts"]
    r = CliRunner().invoke(app, base + ["--kernel", "int9"])
    assert r.exit_code == 2 and "--kernel int9: not a products kernel; use one of auto, int-mm, fbgemm" in r.output
