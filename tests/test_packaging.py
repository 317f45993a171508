"""What `pip install .` (not editable) gives a user: a wheel built from the package, installed into a folder
outside the source tree, runs `vhmine curate`'s app from the installed files alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port, seed_store

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel of a copy of the package (the checkout stays clean), installed with --target."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    shutil.copytree(ROOT / "vhmine", src / "vhmine", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    wheels = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
        check=True,
        cwd=base,
        timeout=300,
    )
    (wheel,) = wheels.glob("vhmine-*.whl")
    target = base / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        cwd=base,
        timeout=300,
    )
    return target


def _env(target: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(target), **extra)
    return env


@pytest.mark.slow
def test_installed_package_has_the_app_and_uses_it(installed, tmp_path):
    code = (
        "import json, vhmine, vhmine.curate.stages.app as a; "
        "print(json.dumps([vhmine.__file__, str(a.default_app_path()), a.default_app_path().is_file()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(installed),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    pkg_file, app_path, exists = json.loads(out.strip().splitlines()[-1])
    assert Path(pkg_file).resolve().is_relative_to(installed.resolve())  # not the checkout's package
    assert Path(app_path).resolve().is_relative_to(installed.resolve()) and exists


@pytest.mark.slow
def test_installed_app_renders_sign_in_from_outside_the_source_tree(installed, tmp_path):
    store, _ = seed_store(tmp_path / "app.db", tmp_path, per_mode=1)
    store.close()
    code = """
import vhmine.curate.stages.app as a
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(str(a.default_app_path()), default_timeout=60)
at.run()
assert not at.exception, at.exception
assert [w.key for w in at.text_input] == ["token"], [w.key for w in at.text_input]
print("signed-out page ok")
"""
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(installed, VHMINE_DB=f"sqlite:///{tmp_path / 'app.db'}"),
    )
    assert res.returncode == 0 and "signed-out page ok" in res.stdout, res.stdout + res.stderr


@pytest.mark.slow
def test_installed_vhmine_curate_serves(installed, tmp_path):
    store, _ = seed_store(tmp_path / "app.db", tmp_path, per_mode=1)
    store.close()
    port = free_port()
    code = "import sys; from vhmine.cli import main; sys.argv[0] = 'vhmine'; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "curate", "--db", f"sqlite:///{tmp_path / 'app.db'}", "--port", str(port)],
        cwd=tmp_path,
        env=_env(installed),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline, health = time.time() + 90, None
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    health = r.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert health == "ok", (proc.poll(), proc.stdout.read() if proc.poll() is not None else "")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the launcher and the Streamlit server it started
        proc.wait(timeout=30)


# --- scripts/install.sh: the torch build that fits the machine ------------------------------------------


def _install_sh(*args, path: str, env_extra=None):
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "PYTHON": sys.executable, **(env_extra or {})}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "install.sh"), *args], capture_output=True, text=True, env=env, timeout=60
    )


def _commands(out: str) -> list[str]:
    return [line[2:] for line in out.splitlines() if line.startswith("+ ")]


@pytest.fixture
def torch_index(tmp_path):
    """A PEP 503 index of CPU wheels on loopback (a real HTTP server): its base URL and the folder it serves, which
    lists torch 2.14.1+cpu and torchvision 0.29.1+cpu and 0.28.0+cpu, as PyTorch's does."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = tmp_path / "index"
    for name, versions in {"torch": ["2.13.0", "2.14.1"], "torchvision": ["0.28.0", "0.29.1"]}.items():
        (root / name).mkdir(parents=True)
        (root / name / "index.html").write_text(
            "".join(
                f'<a href="/whl/{name}-{v}%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl">{name}-{v}+cpu-cp311-cp311-'
                f"manylinux_2_28_x86_64.whl</a><br/>\n"
                for v in versions
            )
        )

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", root
    srv.shutdown()
    srv.server_close()


def test_install_script_picks_cpu_torch_without_a_cuda_gpu_and_keeps_the_pair(tmp_path, torch_index):
    if Path("/proc/driver/nvidia/gpus").exists():
        pytest.skip("this machine has an NVIDIA driver with GPUs")
    url, root = torch_index
    r = _install_sh("--dry-run", "all", path="/usr/bin:/bin", env_extra={"VHMINE_TORCH_INDEX": url})  # no nvidia-smi
    assert r.returncode == 0, r.stderr
    cmds = _commands(r.stdout)
    assert cmds[0] == f"{sys.executable} -m pip install torch==2.14.1+cpu torchvision==0.29.1+cpu --index-url {url}"
    assert cmds[1].startswith(
        f"{sys.executable} -m pip install -e .[all] -c "
    )  # pinned to the CPU builds just installed
    assert len(cmds) == 2 and "no CUDA GPU found" in r.stdout
    assert f"install.sh: PyTorch's CPU index {url} answers and holds torch 2.14.1 with torchvision 0.29.1\n" in r.stdout
    assert "keeping torch==2.14.1+cpu torchvision==0.29.1+cpu" in r.stdout
    # an index that lacks one of the pair: refused, not mixed with another torchvision
    (root / "torchvision" / "index.html").write_text('<a href="torchvision-0.28.0%2Bcpu-cp311.whl">x</a>')
    r = _install_sh("--dry-run", path="/usr/bin:/bin", env_extra={"VHMINE_TORCH_INDEX": url})
    assert r.returncode == 1 and _commands(r.stdout) == []
    assert r.stderr == (
        f"install.sh: PyTorch's CPU index {url} has no torchvision 0.29.1+cpu (install.sh installs torch "
        "2.14.1 with torchvision 0.29.1 only): nothing installed; point VHMINE_TORCH_INDEX at an index "
        "that holds both\n"
    )


def test_install_script_stops_in_one_line_where_the_cpu_index_cannot_be_reached(tmp_path):
    if Path("/proc/driver/nvidia/gpus").exists():
        pytest.skip("this machine has an NVIDIA driver with GPUs")
    url = f"http://127.0.0.1:{free_port()}/whl/cpu"  # nothing listens there
    t = time.monotonic()
    r = _install_sh("--dry-run", "all", path="/usr/bin:/bin", env_extra={"VHMINE_TORCH_INDEX": url})
    assert time.monotonic() - t < 30
    assert r.returncode == 1 and _commands(r.stdout) == []  # nothing installed, no fall-back to PyPI
    assert r.stderr == (
        f"install.sh: PyTorch's CPU index {url} cannot be reached (Connection refused): nothing "
        "installed; set VHMINE_TORCH_INDEX to a mirror of it, or pass --cuda for PyPI's default torch "
        "(a CUDA build, 6.3 GB)\n"
    )


def test_the_pair_check_runs_nms_and_names_a_pair_that_is_not_install_shs(monkeypatch):
    """scripts/torch_pair.py on this machine's torch: the pair works (nms runs); asked for another pair, it says so."""
    import importlib.util

    import torch
    import torchvision

    spec = importlib.util.spec_from_file_location("torch_pair", ROOT / "scripts" / "torch_pair.py")
    pair = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pair)
    build = "cuda" if torch.version.cuda else "cpu"
    monkeypatch.setattr(pair, "TORCH", torch.__version__.split("+")[0])
    monkeypatch.setattr(pair, "TORCHVISION", torchvision.__version__.split("+")[0])
    assert pair.check_installed(build) == (
        f"install.sh: torch {torch.__version__} with torchvision "
        f"{torchvision.__version__}: they work together (torchvision.ops.nms ran)"
        + (" (CPU only)" if build == "cpu" else "")
    )
    monkeypatch.setattr(pair, "TORCHVISION", "0.28.0")  # what PyPI paired with a CPU torch 2.13 in issue 27
    with pytest.raises(SystemExit) as got:
        pair.check_installed(build)
    assert str(got.value) == (
        f"install.sh: torch {torch.__version__} with torchvision {torchvision.__version__} is not "
        f"the pair install.sh installs: reinstall the pair: bash scripts/install.sh --{build} "
        f"(torch {pair.TORCH} with torchvision 0.28.0)"
    )


def test_install_script_keeps_pypi_torch_where_nvidia_smi_lists_a_gpu(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # what nvidia-smi -L prints on a GPU machine
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0000)'\n")
    smi.chmod(0o755)
    r = _install_sh("--dry-run", "app", path=f"{bin_dir}:/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    [cmd] = _commands(r.stdout)
    assert cmd.startswith(f"{sys.executable} -m pip install -e .[app] -c ") and "CUDA GPU is present" in r.stdout
    assert "torch 2.14.1 with torchvision 0.29.1" in r.stdout  # the same pair, from PyPI
    r = _install_sh("--dry-run", "--cpu", path=f"{bin_dir}:/usr/bin:/bin")  # forced: the CPU index is checked first
    assert "PyTorch's CPU index https://download.pytorch.org/whl/cpu" in r.stdout + r.stderr
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2\nexit 9\n"
    )
    r = _install_sh("--dry-run", path=f"{bin_dir}:/usr/bin:/bin")  # a driver without a GPU: CPU
    if not Path("/proc/driver/nvidia/gpus").exists():
        assert "no CUDA GPU found" in r.stdout
    r = _install_sh("--gpu", path="/usr/bin:/bin")
    assert r.returncode == 2 and "unknown option --gpu" in r.stderr
