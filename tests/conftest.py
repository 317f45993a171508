"""Shared fixtures: tiny real encoders and a tiny Stable Diffusion pipeline (built once per session,
saved in their real formats), real photos from scikit-image, and a throw-away PostgreSQL server
(`pg_server`, with a fresh database per test from `pg_url`; `pg_own_server`, a server of a test's own, for
a test that restarts it). Hub look-ups are switched off: nothing is downloaded in tests. Plain helpers shared by several
test files are in helpers.py.
"""

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Ray clusters the tests start stay on 127.0.0.1 (Ray otherwise picks the machine's outward address); Ray
# reads this once, when it is first imported, so it is set here before any test module imports it
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# the Ray embed worker exits mid-shard once this file names its shard (vhmine.embed.run.EXIT_MARKER_ENV; the
# `ray_exit_marker` fixture): set before any cluster starts, as its workers take the environment it started in.
# One file a pytest process, set here in each (not inherited from the xdist controller): a local `vhmine embed`
# that a test on another xdist worker runs meanwhile must not find the shard named and exit (status 17)
os.environ["VHMINE_TEST_EXIT_MARKER"] = os.path.join(tempfile.mkdtemp(prefix="vhmine-ray-exit-"), "exit-at-shard")
# the miner's kernel rates are cached per machine; the tests (and the processes they start) keep theirs in a
# folder of their own, never in the user's ~/.cache
os.environ.setdefault("VHMINE_KERNEL_CACHE", os.path.join(tempfile.mkdtemp(prefix="vhmine-kernels-"), "kernels.json"))
# so is the measured embedding precision (vhmine.embed.precision); and the tests embed in fp32 unless they name
# a precision: tiny random encoders crowd unrelated photos within 1e-3 of each other's cosine, about what bf16's
# rounding moves one, so a measured choice would make their thresholds a matter of the machine's speed
os.environ.setdefault("VHMINE_PRECISION_CACHE", os.path.join(tempfile.mkdtemp(prefix="vhmine-precision-"), "p.json"))
os.environ.setdefault("VHMINE_PRECISION", "fp32")
# and the runtime (vhmine.embed.backend): torch unless a test names one, so that where openvino is installed an
# embed does not convert its encoders (seconds); its measurements, too, in a folder of their own
os.environ.setdefault("VHMINE_BACKEND_CACHE", os.path.join(tempfile.mkdtemp(prefix="vhmine-backend-"), "b.json"))
os.environ.setdefault("VHMINE_EMBED_BACKEND", "torch")
# and the benches' instruction peak (scripts/bench_peak.py), with its compiled hand loop beside it
os.environ.setdefault("VHMINE_PEAK_CACHE", os.path.join(tempfile.mkdtemp(prefix="vhmine-peak-"), "peak.json"))

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Property tests run derandomised and bounded ("ci", the default: the same examples every run, so a failure
# reproduces); VHMINE_HYPOTHESIS=long searches wider with fresh randomness. A test may lower max_examples for
# itself (a costly state machine) but never raise it above the profile's.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("VHMINE_HYPOTHESIS", "ci"))

from helpers import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    copy_photos,
    embed_options,
    free_port,
    make_ready_store,
    ready_store_from_run,
    tiny_sd_pipeline,
)
from openai_server import openai_server  # noqa: E402,F401  (the loopback server: a fixture for every test)


@pytest.fixture(scope="session")
def chromium():
    """One headless Debian chromium per test session (per pytest-xdist worker), driven by Playwright: a test opens
    its own context on it (`with chromium.new_context(viewport=...) as ctx:`, a fresh profile: no cookies, storage
    or cache shared with another test) instead of launching a browser of its own."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def ray_exit_marker():
    """The file that makes the Ray embed worker exit mid-shard (vhmine.embed.run.EXIT_MARKER_ENV, set above before any
    Ray cluster starts, so whichever fixture starts it, its workers know the file): a test writes the shard's number
    into it; the worker removes it as it exits. Absent, nothing happens."""
    from vhmine.embed.run import EXIT_MARKER_ENV

    assert EXIT_MARKER_ENV == "VHMINE_TEST_EXIT_MARKER", EXIT_MARKER_ENV  # the name set at the top of this file
    return Path(os.environ[EXIT_MARKER_ENV])


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster (2 CPUs, no dashboard, on 127.0.0.1) for the test session, shut down at its end; yields
    the `ray` module. Every test that uses it runs on one pytest-xdist worker (the "ray" group: see
    pytest_collection_modifyitems), so the cluster starts once. A cluster already started in this process is used
    as it is (and left to whoever started it)."""
    ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """(clip_spec, dino_spec) of tiny random-weight encoders saved as local-dir / save_pretrained folders."""
    from vhmine.embed import tiny

    root = tmp_path_factory.mktemp("models")
    return tiny.build_clip(root / "clip"), tiny.build_dino(root / "dino")


@pytest.fixture(scope="session")
def photos_dir(tmp_path_factory):
    """scikit-image's sample photos as PNG files (cat.png and chelsea.png are the same picture)."""
    from vhmine.demo import write_sample_photos

    folder = tmp_path_factory.mktemp("photos")
    write_sample_photos(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_sd(tmp_path_factory) -> Path:
    """A random-weight Stable Diffusion pipeline (UNet 32/64, tiny VAE and CLIP text model), saved."""
    return tiny_sd_pipeline(tmp_path_factory.mktemp("tiny-sd"))


def _pg_bindir() -> str | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class PgServer:
    """A throw-away PostgreSQL server (initdb + pg_ctl) on 127.0.0.1, that a test may stop, start and restart."""

    def __init__(self):
        self.bindir = _pg_bindir()
        if self.bindir is None:
            pytest.skip(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql"
                " (scripts/ci_services.sh)"
            )
        self.prefix: list[str] = []
        self.root = tempfile.mkdtemp(prefix="vhmine-pg-")
        if os.geteuid() == 0:  # initdb refuses to run as root
            try:
                import pwd

                pw = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip(
                    "running as root and there is no `postgres` user to run the server as (install Debian's postgresql)"
                )
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data, self.host, self.port = os.path.join(self.root, "data"), "127.0.0.1", free_port()
        self._run(f"{self.bindir}/initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        self.start()

    def _run(self, *cmd):
        return subprocess.run(self.prefix + list(cmd), check=True, capture_output=True, text=True, timeout=120)

    def _ctl(self, action: str, *extra: str):
        self._run(
            f"{self.bindir}/pg_ctl",
            "-D",
            self.data,
            "-l",
            os.path.join(self.root, "log"),
            "-w",
            "-t",
            "60",
            *extra,
            action,
        )

    def start(self):
        self._ctl(
            "start",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
        )

    def stop(self, mode: str = "fast"):
        self._ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast"):
        """Stop (every client connection is cut) and start again on the same port and data."""
        self.stop(mode)
        self.start()

    def new_database(self) -> str:
        """The SQLAlchemy URL of a fresh, empty database on this server."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(host=self.host, port=self.port, user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@{self.host}:{self.port}/{name}"

    def close(self):
        subprocess.run(
            self.prefix + [f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server():
    """(host, port) of a PostgreSQL server started for this test session."""
    server = PgServer()
    try:
        yield server.host, server.port
    finally:
        server.close()


@pytest.fixture
def pg_own_server():
    """A PostgreSQL server of this test's own (a PgServer), for tests that stop or restart it."""
    server = PgServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server."""
    import psycopg

    host, port = pg_server
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://postgres@{host}:{port}/{name}"


@pytest.fixture
def reviewed_store(tmp_path):
    """helpers.make_ready_store with two more workers: bob, and carol, an admin (flags and their decisions)."""
    from vhmine import curate as C

    s = make_ready_store(tmp_path)
    C.add_worker(s, "bob")
    C.add_worker(s, "carol", admin=True)
    yield s
    s.close()


@pytest.fixture
def mined(tmp_path, photos_dir, tiny_models):
    """photos/ embedded into idx/p with tiny encoders, every pair mined into runs/r, and a store at
    data/vhmine.db (the default place) seeded from that run with ready instances."""
    from vhmine.embed.job import embed_collection
    from vhmine.mine import MineOptions, mine_index

    photos = copy_photos(tmp_path / "photos", photos_dir)
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="p"))
    mine_index(
        MineOptions(
            index="p", indexes=tmp_path / "idx", clip=-1.0, dino=1.0, out=tmp_path / "runs" / "r", progress=False
        )
    )
    store = ready_store_from_run(tmp_path / "data" / "vhmine.db", tmp_path / "runs" / "r")
    yield tmp_path, photos, store
    store.close()


@pytest.fixture
def two_servers(monkeypatch):
    """Two loopback servers serving the same model name: one says yes to everything, the other no."""
    from openai_server import API_KEY, chat_text, start_server

    a, b = start_server(), start_server()
    a.responder = lambda body: "Yes" if "yes or no" in chat_text(body).lower() else "There are 3."
    b.responder = lambda body: "No" if "yes or no" in chat_text(body).lower() else "There are 9."
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield a, b
    for s in (a, b):
        s.shutdown()
        s.server_close()


# --- running side by side (pytest-xdist, `-n N --dist loadgroup`: scripts/test.sh) ---------------------------------
# A worker takes a whole test file at a time, so a file's module-scoped fixtures are built once and its tests keep
# their order; the tests of one xdist_group go to one worker together (the "ray" group: every test that uses the
# session's `ray_cluster`, so that cluster starts once). Files with slow tests are handed out first, so that the
# longest ones do not start last and keep one worker busy after the others have finished.


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group("ray"))
    if config.getoption("numprocesses", None) or hasattr(config, "workerinput"):
        first: dict[str, int] = {}
        slow: set[str] = set()
        for k, item in enumerate(items):
            first.setdefault(item.nodeid.split("::")[0], k)
            if item.get_closest_marker("slow"):
                slow.add(item.nodeid.split("::")[0])
        # the Ray group first of all, then the files that hold the longest tests (test_gpu's CPU dry run of
        # scripts/gpu_check.sh, 162 s; the whole pipeline, 53 s): started last, they kept one worker busy for
        # minutes after the other had finished
        ray_group = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("xdist_group")}
        longest = ("tests/test_gpu.py", "tests/test_pipeline.py")
        items.sort(
            key=lambda it: (
                it.nodeid.split("::")[0] not in ray_group,
                it.nodeid.split("::")[0] not in longest,
                it.nodeid.split("::")[0] not in slow,
                first[it.nodeid.split("::")[0]],
            )
        )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileOrGroup(LoadGroupScheduling):
        """loadgroup's groups; every other test with the rest of its file (as --dist loadfile)."""

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]
            return nodeid.split("::", 1)[0]

    return FileOrGroup(config, log)
