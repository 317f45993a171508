"""The join runs no native code of its own (issue 41: the fused VNNI kernel and the re-check's C were dropped,
each measured to gain the whole mine under 10% on the AVX512-VNNI CPU they were written for): the package holds
no C source or library and loads none (the one ctypes use opens only libraries already mapped into the process,
to set OpenBLAS's threads), and libraries planted where the miner once built and loaded its own (the cache
folder, world-writable here, and the file VHMINE_VNNI_LIB named) never load or run while a mine finds the
brute force's pairs."""

import ast
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import unit_rows

import vhmine
from vhmine.mine.join import rowcheck
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_pairs

PACKAGE = Path(vhmine.__file__).resolve().parent
ROOT = PACKAGE.parent
LOADERS = {"CDLL", "PyDLL", "WinDLL", "LoadLibrary", "dlopen", "cdll", "pydll", "cffi", "load_library"}
# the names the miner built its libraries under, in the cache folder beside kernels.json, until issue 41
OLD_LIBRARIES = ("pairdots-858ef1cffffcb32a.so", "vnni-57e72951ea846e06.so", "pairdots.so", "vnni.so")


def _loader_calls() -> dict:
    """{(file, function): [loader names]} of every use of a native-library loader under vhmine/ (an attribute
    named as one, or an import of cffi or _ctypes), by the function that holds it ("" at module level)."""
    found: dict = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        owner = {}
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    owner.setdefault(node, fn.name)  # (outermost first: a nested function counts as its caller)
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in LOADERS:
                name = node.attr
            elif isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                name = next((m for m in mods if m.split(".")[0] in ("cffi", "_ctypes")), None)
            if name:
                found.setdefault((str(path.relative_to(ROOT)), owner.get(node, "")), set()).add(name)
    return {k: sorted(v) for k, v in found.items()}


def test_the_package_holds_no_native_source_or_library_and_loads_none_of_its_own():
    assert not [p for p in PACKAGE.rglob("*") if p.suffix in (".c", ".h", ".so", ".dll", ".dylib", ".pyd")]
    # the one loader: OpenBLAS's thread setters, found among the libraries already mapped (rowcheck._openblas,
    # behind blas_threads)
    assert _loader_calls() == {("vhmine/mine/join/rowcheck.py", "_openblas"): ["CDLL"]}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "VHMINE_VNNI_LIB" not in text and "-shared" not in text, path  # no env-named library, no build


def test_the_only_library_vhmine_opens_during_a_mine_is_one_already_mapped(monkeypatch):
    import torch  # noqa: F401  (torch, numpy and faiss load their own libraries as they are imported)

    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f if "/" in line}
    opened = []
    real = ctypes.CDLL.__init__

    def spy(self, name, *a, **k):
        caller = Path(sys._getframe(1).f_code.co_filename).resolve()
        if caller.is_relative_to(PACKAGE):
            opened.append(name)
        return real(self, name, *a, **k)

    monkeypatch.setattr(ctypes.CDLL, "__init__", spy)
    rowcheck._openblas.cache_clear()
    try:
        rng = np.random.default_rng(3)
        base = rng.normal(size=(200, 24))
        clip = unit_rows(np.concatenate([base, base + 0.2 * rng.normal(size=base.shape)]))
        dino = unit_rows(rng.normal(size=(len(clip), 8)))
        for kernel in ("blas-f32", "int-mm"):  # (blas-f32 sets OpenBLAS's threads: the ctypes above)
            got = find_pairs(clip, dino, 0.95, 0.5, device="cpu", kernel=kernel, workers=1)
            assert_same_pairs(got, brute_force_pairs(clip, dino, 0.95, 0.5))
    finally:
        rowcheck._openblas.cache_clear()
    assert set(opened) <= mapped, set(opened) - mapped
    assert opened or not any("openblas" in Path(m).name.lower() for m in mapped)  # (the spy saw rowcheck's ctypes)


PLANTED = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void mark(const char* how) {
    FILE* f = fopen(MARK, "a");
    if (f) { fprintf(f, "%s\n", how); fclose(f); }
}
__attribute__((constructor)) static void on_load(void) { mark("loaded"); }
/* the old libraries' functions: each would change the re-check's results (zero products) */
void pair_dots(const float* x, long d, const long* i, const long* j, long n, float* out) {
    mark("pair_dots"); memset(out, 0, n * sizeof(float));
}
void pair_products(const float* x, long d, const long* i, const long* j, long n, double* out) {
    mark("pair_products"); memset(out, 0, n * d * sizeof(double));
}
void vnni_pack(void) { mark("vnni_pack"); }
void vnni_pack_left(void) { mark("vnni_pack_left"); }
long vnni_search(void) { mark("vnni_search"); return 0; }
"""

MINE = """
import numpy as np, sys
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_pairs
rng = np.random.default_rng(5)
base = rng.normal(size=(300, 40)); base[:, 3] += 5
x = np.concatenate([base, base + 0.2 * rng.normal(size=base.shape)])
clip = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
d = rng.normal(size=(len(x), 16)); dino = (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)
want = brute_force_pairs(clip, dino, 0.97, 0.4)
assert len(want) > 50
for kernel in (None, "int-mm"):  # the calibration's choice (it measures every kernel offered here) and one forced
    assert_same_pairs(find_pairs(clip, dino, 0.97, 0.4, device="cpu", kernel=kernel), want)
maps = open("/proc/self/maps").read()
print("PLANTED MAPPED" if sys.argv[1] in maps else "planted not mapped")
"""


@pytest.mark.slow
def test_libraries_planted_in_a_world_writable_cache_folder_never_run(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler here to build the planted library")
    cache = tmp_path / "cache"
    folder = cache / "vhmine"  # where the miner built and loaded its libraries (beside kernels.json)
    folder.mkdir(parents=True)
    for p in (cache, folder):
        p.chmod(0o777)  # world-writable: another account could put them there
    mark = tmp_path / "ran.txt"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED)
    lib = tmp_path / "planted.so"
    subprocess.run([cc, f'-DMARK="{mark}"', "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    for name in OLD_LIBRARIES:
        shutil.copy(lib, folder / name)
        (folder / name).chmod(0o777)
    # (the planted library itself runs when loaded: the check that it would be seen)
    check = subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(lib)!r})"], timeout=60)
    assert check.returncode == 0 and mark.read_text() == "loaded\n"
    mark.unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("VHMINE_KERNEL_CACHE", "XDG_CACHE_HOME")}
    env.update(
        XDG_CACHE_HOME=str(cache),
        HOME=str(tmp_path / "home"),
        VHMINE_VNNI_LIB=str(folder / OLD_LIBRARIES[1]),  # the variable that once named a library to load
        PYTHONPATH=str(ROOT),
    )
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MINE), str(folder)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # (vhmine from PYTHONPATH: this checkout)
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "planted not mapped" in res.stdout, res.stdout
    assert not mark.exists(), mark.read_text()
    assert (folder / "kernels.json").is_file()  # (the calibration ran and cached its rates there)
