"""What lmms-eval (0.7.3, the real package) prints as accuracy's standard error for vhmine's lmms-eval export, and how
vhmine's Wilson interval relates to it: lmms-eval's Stderr_CLT is s = sd / sqrt(n) with the sample standard
deviation (Bessel's n - 1), i.e. sqrt(p (1 - p) / (n - 1)) for 0/1 scores, so its interval is the normal one,
p +- 1.96 s. Wilson's bounds b solve |p - b| = 1.96 sqrt(b (1 - b) / n) instead: close to the normal bounds for a
share well inside (0, 1) (within a point and a half here, at 60% of 60), pulled towards 1/2 for small n, and not
empty where every answer is right (s = 0 there)."""

import math

import numpy as np
import pytest
from harness_standins import _run_lmms_eval
from PIL import Image

from vhmine.bench import BenchItem, Benchmark
from vhmine.eval import intervals as I
from vhmine.export.job import write_benchmark

Z = 1.959963984540054


@pytest.fixture(scope="module")
def lmms_results(tmp_path_factory):
    """60 yes/no questions in two modes, a canned model right on 36 (60%) overall and on every `ocr` one."""
    root = tmp_path_factory.mktemp("lmms-stderr")
    img = root / "im.png"
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(img)
    items, answers = [], {}
    for k in range(60):
        mode, truth = ("ocr" if k < 10 else "counting"), k % 2 == 0
        items.append(
            BenchItem(f"y{k}", mode, "YNQ", f"Is there {k} of it?", ("Yes" if truth else "No",), truth, str(img), "im")
        )
        right = k < 36
        answers[f"y{k}"] = ("Yes" if truth else "No") if right else ("No" if truth else "Yes")
    write_benchmark(Benchmark("stderr", items), root / "vh", "lmms-eval")
    return _run_lmms_eval(root / "vh", root / "logs", answers=answers)["results"]


@pytest.mark.slow
def test_lmms_eval_prints_accuracys_standard_error_as_sd_over_sqrt_n(lmms_results):
    task = lmms_results["vhmine_ynq"]
    p, n = task["accuracy,none"], 60
    assert p == pytest.approx(0.6)
    s = task["accuracy_stderr_clt,none"]
    assert s == pytest.approx(math.sqrt(p * (1 - p) / (n - 1)), rel=1e-12)  # numpy std(ddof=1) / sqrt(n)
    # the other metrics are no mean of a 0/1 per item: lmms-eval prints no standard error for them
    assert task["precision_stderr_clt,none"] == "N/A" and task["accuracy_stderr,none"] == "N/A"


@pytest.mark.slow
def test_wilson_against_lmms_evals_normal_interval(lmms_results):
    p, s, n = lmms_results["vhmine_ynq"]["accuracy,none"], lmms_results["vhmine_ynq"]["accuracy_stderr_clt,none"], 60
    normal = (p - Z * s, p + Z * s)
    w = I.wilson(round(p * n), n)
    # each interval's defining equation
    for b in (w.lo, w.hi):
        assert abs(p - b) == pytest.approx(Z * math.sqrt(b * (1 - b) / n), rel=1e-9)
    assert normal[1] - p == pytest.approx(p - normal[0])  # symmetric about p; Wilson's is not
    assert w.hi - p < p - w.lo  # pulled towards 1/2
    assert abs(w.lo - normal[0]) < 0.005 and abs(w.hi - normal[1]) < 0.015
    assert (round(100 * w.lo, 1), round(100 * w.hi, 1)) == (47.4, 71.4)
    assert (round(100 * normal[0], 1), round(100 * normal[1], 1)) == (47.5, 72.5)


def test_where_every_answer_is_right_lmms_evals_interval_is_empty_and_wilsons_is_not():
    # a mode all right (ocr: 10 of 10): sd 0, so lmms-eval's p +- 1.96 s is [1, 1]; Wilson's is [0.72, 1]
    scores = np.ones(10)
    s = np.std(scores, ddof=1) / np.sqrt(10)  # evaluator_utils.calculate_clt_aggregate_metric's formula
    assert s == 0
    w = I.wilson(10, 10)
    assert w.hi == 1.0 and w.lo == pytest.approx(10 / (10 + Z * Z)) and round(w.lo, 2) == 0.72
