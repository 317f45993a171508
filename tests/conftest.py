"""Shared fixtures: tiny real encoders and a tiny Stable Diffusion pipeline (built once per session,
saved in their real formats), real photos from scikit-image, and a throw-away PostgreSQL server
(`pg_server`, with a fresh database per test from `pg_url`; `pg_own_server`, a server of a test's own, for
a test that restarts it). Hub look-ups are switched off: nothing is downloaded in tests. Plain helpers shared by several
test files are in helpers.py.
"""

import glob
import gzip
import inspect
import json
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
# the miner's kernel rates are cached per machine; the tests (and the processes they start) keep theirs in a
# folder of their own, never in the user's ~/.cache
os.environ.setdefault("VHMINE_KERNEL_CACHE", os.path.join(tempfile.mkdtemp(prefix="vhmine-kernels-"), "kernels.json"))
# so is the measured embedding precision (vhmine.embed.precision); and the tests embed in fp32 unless they name
# a precision: tiny random encoders crowd unrelated photos within 1e-3 of each other's cosine, about what bf16's
# rounding moves one, so a measured choice would make their thresholds a matter of the machine's speed
os.environ.setdefault("VHMINE_PRECISION_CACHE", os.path.join(tempfile.mkdtemp(prefix="vhmine-precision-"), "p.json"))
os.environ.setdefault("VHMINE_PRECISION", "fp32")

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

from helpers import copy_photos, embed_options, free_port, make_ready_store, ready_store_from_run  # noqa: E402
from openai_server import openai_server  # noqa: E402,F401  (the loopback server: a fixture for every test)


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


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def clip_tokenizer(folder: Path):
    """The real CLIP BPE tokenizer, built offline from the vocabulary file open_clip ships."""
    import open_clip
    from transformers import CLIPTokenizer

    bpe = Path(open_clip.__file__).parent / "bpe_simple_vocab_16e6.txt.gz"
    merges = gzip.open(bpe).read().decode("utf-8").split("\n")[1 : 49152 - 256 - 2 + 1]
    vocab = list(_bytes_to_unicode().values())
    vocab = (
        vocab
        + [v + "</w>" for v in vocab]
        + ["".join(m.split()) for m in merges]
        + ["<|startoftext|>", "<|endoftext|>"]
    )
    if "vocab" in inspect.signature(CLIPTokenizer.__init__).parameters:  # transformers 5: vocab and merges in memory
        return CLIPTokenizer(
            vocab={v: i for i, v in enumerate(vocab)}, merges=[tuple(m.split()) for m in merges], model_max_length=77
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({v: i for i, v in enumerate(vocab)}))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return CLIPTokenizer(
        vocab_file=str(folder / "vocab.json"), merges_file=str(folder / "merges.txt"), model_max_length=77
    )


def tiny_sd_pipeline(root: Path, inpaint: bool = False) -> Path:
    """A random-weight Stable Diffusion pipeline (tiny UNet, VAE and CLIP text model) saved into root/pipe;
    `inpaint`: the inpainting one (a 9-channel UNet: latents, mask and masked image)."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionInpaintPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    tok = clip_tokenizer(root / "tok")
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1 if inpaint else 2,
        sample_size=16 if inpaint else 32,
        in_channels=9 if inpaint else 4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
    )
    vae = AutoencoderKL(
        block_out_channels=[32, 64],
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
    )
    text = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=49406,
            eos_token_id=49407,
            pad_token_id=49407,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=len(tok),
            max_position_embeddings=77,
        )
    )
    sched = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    cls = StableDiffusionInpaintPipeline if inpaint else StableDiffusionPipeline
    pipe = cls(
        vae=vae,
        text_encoder=text,
        tokenizer=tok,
        unet=unet,
        scheduler=sched,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(root / "pipe")
    return root / "pipe"


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
