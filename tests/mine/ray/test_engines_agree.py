"""The Ray engine's run says what the local engine's says and plots what it plots (issue 44, item 4): the
summary's lines (the caps' `cut` line, the `nearby` lines of a run with no pair in the box, the shared images)
and the scatter's CLIP-alike points (a rectangle's pairs of images in both indexes dropped, as the local
engine drops them), on the same index(es) and options."""

import json

import numpy as np
import pytest
from mine_runs import A_KEYS, B_KEYS, CLIP, SHARED, build, build_named

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

from vhmine import api  # noqa: E402
from vhmine.mine.ray.engine import tile_bytes  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("ray_cluster")]
KEYS = [k for k in range(260) if k % 5 != 4]  # 208 rows: 4 column blocks of 64


@pytest.fixture
def scatters(monkeypatch):
    """The (clip, dino) points each run's scatter.png drew, in the order the runs were written."""
    from vhmine.mine import scatter

    got, real = [], scatter.write_scatter

    def spy(path, clip_sim, dino_sim, *a, **kw):
        got.append(np.sort(np.stack([np.asarray(clip_sim, float), np.asarray(dino_sim, float)], 1), axis=0))
        return real(path, clip_sim, dino_sim, *a, **kw)

    monkeypatch.setattr(scatter, "write_scatter", spy)
    return got


def _both(tmp_path, name, **kw):
    """The local run and the Ray run of one command, and their summaries' lines made comparable (the run
    folder's name, the seconds and the products kernel's line are each engine's own)."""
    local = api.mine(name, out=tmp_path / "local", progress=False, gallery_size=0, **kw)
    far = api.mine(
        name,
        out=tmp_path / "ray",
        progress=False,
        gallery_size=0,
        engine="ray",
        tile_memory=tile_bytes(64, 16, 12),
        **kw,
    )

    def lines(res, out):
        text = res.summary().replace(str(tmp_path / out), "RUN").replace(f"--indexes {tmp_path / 'indexes'}", "")
        text = text.replace(" --engine ray", "")
        return [
            ln.split("; ")[0] if "pairs written to" in ln else ln
            for ln in text.splitlines()
            if not ln.startswith("products")
        ]

    return lines(local, "local"), lines(far, "ray")


@pytest.mark.parametrize("caps", [{"max_per_image": 2}, {"max_per_image": 2, "max_pairs": 40}])
def test_the_caps_cut_line_and_the_scatter_are_the_local_engines(tmp_path, scatters, caps):
    build(tmp_path, KEYS)
    local, far = _both(tmp_path, "col", indexes=tmp_path / "indexes", clip=0.8, dino=0.6, **caps)
    assert any("pairs in the box were cut" in ln for ln in local), local
    assert far == local
    assert len(scatters) == 2 and np.array_equal(scatters[0], scatters[1])


def test_a_run_with_no_pair_in_the_box_says_the_local_engines_nearby_counts(tmp_path, scatters):
    build(tmp_path, KEYS)
    local, far = _both(tmp_path, "col", indexes=tmp_path / "indexes", clip=0.8, dino=-0.9)
    assert any(ln.startswith("0 pairs:") for ln in local) and any(ln.startswith("relax") for ln in local), local
    assert far == local
    meta, meta_local = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("ray", "local"))
    assert meta["nearby"] == meta_local["nearby"]
    assert np.array_equal(scatters[0], scatters[1])


def test_a_rectangle_with_shared_images_plots_the_local_engines_points(tmp_path, scatters):
    a_keys, b_keys = A_KEYS + [k for k in SHARED if k not in A_KEYS], B_KEYS + [k for k in SHARED if k not in B_KEYS]
    build_named(tmp_path, "mine", a_keys)
    build_named(tmp_path, "ref", b_keys)
    local, far = _both(tmp_path, "mine", against="ref", indexes=tmp_path / "indexes", clip=CLIP, dino=1.0)
    assert any("10 image(s) are in both indexes" in ln for ln in local)
    assert far == local
    assert len(scatters[0]) and np.array_equal(scatters[0], scatters[1])  # the shared images' pairs left out
