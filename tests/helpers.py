"""Plain helpers shared by several test files (fixtures shared by several files live in conftest.py).

- `PHOTOS`, `write_photos(folder, names)`: scikit-image sample photos, thumbnailed to at most 96 px, saved as
  `<name>.png` (idempotent). Not `vhmine.demo.write_sample_photos`: that one writes every sample photo at full
  size, and the curation tests need small files and a chosen subset (the pairs' made-up gaps come from the
  files' hashes).
- `write_pairs(run_dir, photos, ...)`: a runs/<run>/pairs.parquet and run.json as `vhmine mine` writes them,
  over all pairs of `photos`, ranked by a made-up gap.
- `free_port()`: a free TCP port on 127.0.0.1.
- `seed_store(url, tmp_path, ...)`: a store seeded with the pairs of a few photos, and four workers
  (alice, bob, carol (admin), dave); returns (store, {worker: token}).
- `counting_annotation(item, a, b)`: a counting.how_many annotation of "cats" answering `a` / `b` for the
  item's two images.
- `make_ready_store(tmp_path)`: a store with 12 ready instances (counting and color).
- `make_published_store(tmp_path)`: a store whose items came every way a datasheet tells apart: alice wrote counting
  and color from scratch, bob verified a model draft of existence ("fake-vlm", prompt "draft@v1#test"), bob reviewed
  alice's counting items blind (disagreeing on one), and a blind solver ("blind-llm", "blind@v1#abcd1234") answered
  counting's yes/no questions. Returns (store, {mode: [instance ids]}).
- `write_tiny_bench(tmp_path, questions)`: six items over two random 8 px images (o1, o2 counting OEQ; y1, y2
  counting YNQ; y3, y4 color YNQ) exported in the vlmevalkit format to tmp_path/bench; `questions` overrides
  an item's question by id.
- `interrupt_when(proc, ready)`: Ctrl-C to a command's process group once `ready()` holds.
- `canned_lmms(answers)`: an lmms-eval model answering each document from `answers` by its id.
- `unit_rows(rows)`: rows scaled to unit length (in float64), as float32.
- `row_directions(draw, rng, n, d, e)`: (clip, dino) rows for a hypothesis strategy: random, clustered or duplicated.
- `clip_tokenizer(folder)`, `tiny_sd_pipeline(root, inpaint=False)`: the real CLIP BPE tokenizer built offline, and
  a random-weight Stable Diffusion (or inpainting) pipeline saved with save_pretrained (conftest's `tiny_sd`).
- `CHROMIUM`, `CHROMIUM_ARGS`: Debian's chromium and its flags (conftest's `chromium`, one browser per session).
- `NO_APP_EXTRA`: a sitecustomize.py that hides the app extra from the Python that loads it.
- `Workdir(root, base_url)`: a folder where `vhmine` runs through its real command line (test_pipeline, test_tars).
- `tiny_owlvit(folder)`: a random-weight Owl-ViT (seeded, 64 px input, small weights so that its boxes sit
  near the patches they come from) and its processor, saved with save_pretrained into `folder`.
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "coins", "moon", "page", "clock", "horse")


def write_photos(folder: Path, names=PHOTOS) -> list[Path]:
    import numpy as np
    import skimage.data
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n in names:
        p = folder / f"{n}.png"
        if not p.exists():
            img = Image.fromarray(np.asarray(getattr(skimage.data, n)()))
            img.thumbnail((96, 96))
            img.save(p)
        out.append(p)
    return out


def write_pairs(run_dir: Path, photos: list[Path], n_pairs: int | None = None, shuffle: bool = False) -> Path:
    """runs/<run>/pairs.parquet + run.json over all pairs of `photos` (ranked by a made-up gap)."""
    import pandas as pd

    rows = []
    for a, b in itertools.combinations(photos, 2):
        sa, sb = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b))
        clip = 0.9 + (int(sa[:4], 16) % 100) / 1000
        dino = 0.2 + (int(sb[:4], 16) % 300) / 1000
        rows.append(
            {
                "image_id_a": sa[:16],
                "image_id_b": sb[:16],
                "sha256_a": sa,
                "sha256_b": sb,
                "path_a": str(a.resolve()),
                "path_b": str(b.resolve()),
                "clip_sim": clip,
                "dino_sim": dino,
                "gap": clip - dino,
                "categories_a": [] if a.stem == "page" else [a.stem],
                "categories_b": [] if b.stem == "page" else [b.stem],
            }
        )
    df = pd.DataFrame(rows).sort_values("gap", ascending=False, kind="stable").reset_index(drop=True)
    df.insert(0, "rank", range(1, len(df) + 1))
    if n_pairs is not None:
        df = df.head(n_pairs)
    if shuffle:
        df = df.sample(frac=1.0, random_state=3).reset_index(drop=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    df.to_parquet(run_dir / "pairs.parquet")
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "index": "photos",
                "clip_threshold": 0.9,
                "dino_threshold": 0.55,
                "encoders": {"clip": "tiny", "dino": "tiny"},
                "vhmine_version": "0.1.0",
            }
        )
    )
    return run_dir / "pairs.parquet"


def unwritable_folders(tmp_path: Path) -> list[Path]:
    """Folders this user cannot write in: one under a file, one on /sys (refused even to root), and a
    read-only folder where permissions bind (not for root)."""
    import os

    (tmp_path / "a-file").write_text("not a folder")
    out = [tmp_path / "a-file" / "sub"]
    if Path("/sys").is_dir():
        out.append(Path("/sys/vhmine-test-out"))
    if os.geteuid() != 0:
        ro = tmp_path / "read-only"
        ro.mkdir()
        ro.chmod(0o555)
        out.append(ro / "sub")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_store(url, tmp_path, per_mode=2, photos=("astronaut", "coffee", "rocket", "horse")):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(url)
    pairs = write_pairs(tmp_path / "runs" / "t", write_photos(tmp_path / "photos", photos))
    seed_pairs(store, pairs, per_mode=per_mode)
    tokens = {w: C.add_worker(store, w, admin=(w == "carol")) for w in ("alice", "bob", "carol", "dave")}
    return store, tokens


def annotate_color(store, worker: str) -> None:
    """`worker` writes the next color item (a cup: red on image A, white on B) and confirms its yes/no drafts."""
    from vhmine import curate as C

    item = C.next_item(store, worker, "color")
    a, b = (v.id for v in item.images)
    answers = {a: "red", b: "white"}
    C.save_annotation(store, worker, item.task_id, C.Annotation("color.what_color", {"object": "cup"}, answers=answers))
    C.confirm_drafts(store, worker, [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, worker)])


def counting_annotation(item, a="3", b="2"):
    from vhmine import curate as C

    ids = [v.id for v in item.images]
    return C.Annotation("counting.how_many", {"object": "cats"}, answers={ids[0]: a, ids[1]: b})


def make_ready_store(tmp_path: Path, url=None):
    """A store with 12 ready instances: counting and color, each 2 OEQ + 4 YNQ over one pair.

    Truths: counting A has 3 cats, B 2; color A's cup is red, B's blue. A model answering "yes" to every
    YNQ is right on the two "yes" questions of a mode and hallucinates on the two "no" ones.
    """
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(url or tmp_path / "store.db")  # `url`: another store, e.g. a PostgreSQL database
    pairs = write_pairs(tmp_path / "runs" / "t", write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket")))
    seed_pairs(store, pairs, per_mode=1, modes=["counting", "color"])
    C.add_worker(store, "alice")
    for mode, ann in (
        ("counting", ("counting.how_many", {"object": "cats"}, "3", "2")),
        ("color", ("color.what_color", {"object": "cup"}, "red", "blue")),
    ):
        item = C.next_item(store, "alice", mode)
        a, b = (v.id for v in item.images)
        saved = C.save_annotation(
            store, "alice", item.task_id, C.Annotation(ann[0], ann[1], answers={a: ann[2], b: ann[3]})
        )
        C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
    return store


def make_published_store(tmp_path: Path):
    import json as _json

    from vhmine import curate as C
    from vhmine.rules.draft_check import parse_draft
    from vhmine.store import Pair, Task

    store, _ = seed_store(tmp_path / "published.db", tmp_path, per_mode=1, photos=("astronaut", "coffee", "rocket"))
    for mode, ann in (
        ("counting", ("counting.how_many", {"object": "cats"}, "3", "2")),
        ("color", ("color.what_color", {"object": "cup"}, "red", "blue")),
    ):
        item = C.next_item(store, "alice", mode)
        a, b = (v.id for v in item.images)
        saved = C.save_annotation(
            store, "alice", item.task_id, C.Annotation(ann[0], ann[1], answers={a: ann[2], b: ann[3]})
        )
        C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
    with store.session(write=False) as s:
        t = s.query(Task).filter_by(mode="existence").order_by(Task.priority, Task.id).first()
        p = s.get(Pair, t.pair_id)
        task_id, images = t.id, [p.image_a, p.image_b]
    raw = _json.dumps(
        {
            "template": "existence.what_is",
            "slots": {"where": "on the table"},
            "answer_a": "a cup",
            "answer_b": "a spoon",
        }
    )
    did = C.work.record_draft(
        store,
        task_id,
        model="fake-vlm",
        endpoint=None,
        prompt="draft@v1#test",
        raw=raw,
        content=parse_draft(raw, "existence", images),
    )
    assert C.work.next_verify_item(store, "bob", "existence") is not None
    C.work.accept_draft(store, "bob", did)
    ids = {m: [r.id for r in C.ready_instances(store, m)] for m in ("counting", "color", "existence")}
    for k, r in enumerate(C.ready_instances(store, "counting")):
        said = ("yes" if r.truth else "no") if r.kind == "YNQ" else r.answers[0]
        if k == 0:  # one disagreement
            said = "7" if r.kind == "OEQ" else ("no" if r.truth else "yes")
        C.work.save_review(store, "bob", r.id, said)
        if r.kind == "YNQ":
            record_blind(store, r, "yes", bool(r.truth))
    return store, ids


def record_blind(store, r, answer: str, correct: bool) -> None:
    """blind-llm's answer to the ready instance `r` without its image (prompt blind@v1#abcd1234, scored by rule)."""
    from vhmine import curate as C

    group = C.work.blind_group_key(r.mode, r.kind, r.pair_id, r.question, r.id)
    C.work.record_blind_answer(
        store,
        r.id,
        model="blind-llm",
        endpoint=None,
        prompt="blind@v1#abcd1234",
        answer=answer,
        correct=correct,
        scorer="rule:vhtest",
        group=group,
    )


def flag_color_questions(store) -> None:
    """blind-llm right without the image on every color yes/no question: every one of them flagged."""
    from vhmine import curate as C

    for r in C.ready_instances(store, "color", "YNQ"):
        record_blind(store, r, "yes" if r.truth else "no", True)
    C.work.refresh_blind_flags(store, "blind-llm", None, "blind@v1#abcd1234")


TINY_BENCH_QUESTIONS = {
    "o1": "How many cats are there in the picture?",
    "o2": "How many cats are there in the picture?",
    "y1": "Are there exactly 3 cats in the picture?",
    "y2": "Are there exactly 3 cats in the picture?",
    "y3": "Is the car red?",
    "y4": "Is the car blue?",
}


def write_group_bench(tmp_path: Path) -> Path:
    """tmp_path/bench: six items on two photos (counting: a pair group of open and one of yes/no questions; color: two
    yes/no), hf."""
    from vhmine.bench import BenchItem, Benchmark, assign_groups
    from vhmine.export.job import write_benchmark

    a, b = (str(p) for p in write_photos(tmp_path / "photos", ("astronaut", "coffee")))
    items = [
        BenchItem("o1", "counting", "OEQ", "How many cats are there?", ("3",), None, a, "A", "p:OEQ", {"pair_id": "p"}),
        BenchItem(
            "o2", "counting", "OEQ", "How many cats are there?", ("4", "5"), None, b, "B", "p:OEQ", {"pair_id": "p"}
        ),
        BenchItem(
            "y1", "counting", "YNQ", "Are there exactly 3 cats?", ("Yes",), True, a, "A", "p:YNQ", {"pair_id": "p"}
        ),
        BenchItem(
            "y2", "counting", "YNQ", "Are there exactly 3 cats?", ("No",), False, b, "B", "p:YNQ", {"pair_id": "p"}
        ),
        BenchItem("y3", "color", "YNQ", "Is the car red?", ("Yes",), True, a, "A", None),
        BenchItem("y4", "color", "YNQ", "Is the car blue?", ("No",), False, b, "B", None),
    ]
    write_benchmark(assign_groups(Benchmark("tiny", items)), tmp_path / "bench", "hf")
    return tmp_path / "bench"


def write_tiny_bench(tmp_path: Path, questions: dict | None = None) -> Path:
    """Six items over two images (A: 3 cats, red car; B: not), written as vlmevalkit into tmp_path/bench."""
    import numpy as np
    from PIL import Image

    from vhmine.bench import BenchItem, Benchmark
    from vhmine.export.job import write_benchmark

    rng = np.random.default_rng(1)
    paths = []
    for i in range(2):
        p = tmp_path / f"im{i}.png"
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(p)
        paths.append(str(p))
    q = {**TINY_BENCH_QUESTIONS, **(questions or {})}
    items = [
        BenchItem("o1", "counting", "OEQ", q["o1"], ("3",), None, paths[0], "A", "p:OEQ"),
        BenchItem("o2", "counting", "OEQ", q["o2"], ("4", "5"), None, paths[1], "B", "p:OEQ"),
        BenchItem("y1", "counting", "YNQ", q["y1"], ("Yes",), True, paths[0], "A", "p:YNQ"),
        BenchItem("y2", "counting", "YNQ", q["y2"], ("No",), False, paths[1], "B", "p:YNQ"),
        BenchItem("y3", "color", "YNQ", q["y3"], ("Yes",), True, paths[0], "A", None),
        BenchItem("y4", "color", "YNQ", q["y4"], ("No",), False, paths[1], "B", None),
    ]
    write_benchmark(Benchmark("tiny", items), tmp_path / "bench", "vlmevalkit")
    return tmp_path / "bench"


def tiny_owlvit(folder: Path) -> Path:
    """A random-weight Owl-ViT (2 layers, 64 px input, seeded) and its processor, saved into `folder`."""
    import torch
    from transformers import OwlViTConfig, OwlViTForObjectDetection, OwlViTImageProcessor, OwlViTProcessor

    tok = clip_tokenizer(folder.parent / f"{folder.name}-tok")
    cfg = OwlViTConfig(
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "max_position_embeddings": 77,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "image_size": 64,
            "patch_size": 16,
        },
        projection_dim=32,
        initializer_factor=0.01,
    )  # near-zero box offsets: boxes on the 4x4 patches
    torch.manual_seed(0)
    OwlViTForObjectDetection(cfg).save_pretrained(folder)
    proc = OwlViTProcessor(
        image_processor=OwlViTImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 64, "width": 64}),
        tokenizer=tok,
    )
    proc.save_pretrained(folder)
    return folder


# answers on which VHTest's character prefix and a first-word reader part ways, plus the plain ones
TRICKY = [
    "Yes",
    "yes.",
    "YES!",
    "Yes?",
    "Yesterday there was a cat.",
    "yes-no",
    " yes",
    "\nNo.",
    "No, two.",
    "Nope",
    "Not sure",
    "Nothing is there",
    "no",
    "N",
    "Ye",
    "Maybe",
    "I think yes",
    "- Yes",
    "",
    "Yes, but not red.",
]


# --- VHTest: Evaluation/LLaVA/llava_ynq_version.py, transcribed ------------------------------------------

vh_mode_list = ["counting", "shape", "color", "orientation", "size", "position", "OCR", "existence"]


def classify_response(outputs):
    lower_case_start = outputs[:3].lower()

    if lower_case_start == "yes":
        return "y"
    else:
        lower_case_start = outputs[:2].lower()
        if lower_case_start == "no":
            return "n"
        else:
            return "wrong_format"


SIGNED_OUT = (
    r"the sign-in of 'alice' is no longer valid \(the token was replaced or the worker deactivated\): nothing saved;"
    r" sign in again with the current token"
)


def stored_task(store, task_id):
    from vhmine.store import Task

    with store.session() as s:
        return s.get(Task, task_id)


def logged_actions(store, worker, kind):
    from vhmine.store import Action

    with store.session() as s:
        return s.query(Action).filter(Action.worker == worker, Action.kind == kind).order_by(Action.id).all()


def embed_options(images, indexes, models, shard_size=3, **kw):
    """EmbedOptions for a quiet, small-shard embed with the tiny encoders `models` (clip_spec, dino_spec)."""
    from vhmine.embed.job import EmbedOptions

    clip, dino = models
    return EmbedOptions(
        images=images,
        indexes=indexes,
        clip_model=clip,
        dino_model=dino,
        workers=0,
        batch_size=4,
        shard_size=shard_size,
        progress=False,
        **kw,
    )


def sha_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def copy_photos(folder: Path, photos_dir: Path, names=("astronaut", "cat", "chelsea", "coffee")) -> Path:
    """A small collection; cat.png and chelsea.png are the same bytes (one image, two paths)."""
    import shutil

    from PIL import Image as PILImage

    folder.mkdir(parents=True)
    for n in names:
        img = PILImage.open(photos_dir / f"{n}.png")
        img.thumbnail((64, 64))
        img.save(folder / f"{n}.png")
    shutil.copy(folder / "cat.png", folder / "chelsea.png")
    return folder


def ready_store_from_run(db: Path, run_dir: Path, per_mode=3):
    """A store seeded from a real `vhmine mine` run, with every pair of it annotated (ready instances)."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(db)
    seed_pairs(store, run_dir / "pairs.parquet", per_mode=per_mode, modes=["counting"])
    C.add_worker(store, "alice")
    while (item := C.next_item(store, "alice", "counting")) is not None:
        ids = [v.id for v in item.images]
        C.save_annotation(
            store,
            "alice",
            item.task_id,
            C.Annotation("counting.how_many", {"object": "cats"}, answers=dict(zip(ids, ["3", "2"]))),
        )
        C.confirm_drafts(
            store,
            "alice",
            [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "alice", "counting")],
        )
    return store


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, " ".join(text.split())) is not None


def probed_store(tmp_path, srv):
    """A probed store (YNQ by rule: the all-yes victim is wrong on the 'no' questions), workers bob and carol."""
    from vhmine import curate as C
    from vhmine import llm as L
    from vhmine.models.probe import ProbeOptions, probe

    store = make_ready_store(tmp_path)
    probe(
        store,
        ProbeOptions(
            L.LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "cache.db", progress=False),
            kinds=["YNQ"],
        ),
    )
    for w in ("bob", "carol"):
        C.add_worker(store, w)
    return store


def mode_responses(store, mode):
    from sqlalchemy import select

    from vhmine.store import Instance, Response

    with store.session(write=False) as s:
        return s.execute(
            select(Response.id, Response.verdict)
            .join(Instance, Instance.id == Response.instance_id)
            .where(Instance.mode == mode)
            .order_by(Response.id)
        ).all()


def answer_details(folder: Path, model: str) -> dict[str, dict]:
    return {d["id"]: d for d in map(json.loads, (folder / f"answers-{model}.jsonl").read_text().splitlines())}


def run_vhmine(*words: str, cwd):
    """`python -m vhmine.cli WORDS` in `cwd` as a user runs it (a subprocess; wide help, offline hub)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, COLUMNS="200", HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *words], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


# --- WebDataset shards as img2dataset writes them ------------------------------------------------------


def jpeg_bytes(photo) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.open(photo).convert("RGB").save(buf, "JPEG", quality=90)
    return buf.getvalue()


def write_tar(path, samples) -> None:
    """samples: (key, {ext: bytes}) in order, as img2dataset writes them ({key}.jpg, {key}.json, {key}.txt)."""
    import io
    import tarfile

    with tarfile.open(path, "w") as tf:
        for key, files in samples:
            for ext, data in files.items():
                info = tarfile.TarInfo(f"{key}{ext}")
                info.size, info.mtime = len(data), 1_700_000_000
                tf.addfile(info, io.BytesIO(data))


def wds_sample(key, photo, caption):
    meta = {"key": key, "url": f"https://example.org/{key}.jpg", "caption": caption, "status": "success"}
    return key, {".jpg": jpeg_bytes(photo), ".json": json.dumps(meta).encode(), ".txt": caption.encode()}


# --- a synthetic index -------------------------------------------------------------------------------


def row_directions(draw, rng, n: int, d: int, e: int):
    """(clip, dino) float64 rows for a hypothesis strategy (draw: its draw, rng: a numpy Generator it seeded):
    random directions, clusters of near copies (DINOv2 clustered alike in half the rows), or exact duplicates
    of earlier rows; unscaled, not normalised."""
    import numpy as np
    from hypothesis import strategies as st

    kind = draw(st.sampled_from(["random", "clusters", "duplicates"]))
    clip, dino = rng.standard_normal((n, d)), rng.standard_normal((n, e))
    if kind == "clusters" and n:
        centre = rng.integers(0, draw(st.integers(1, 6)), n)
        spread = draw(st.sampled_from([1e-4, 0.05, 0.3]))
        clip = rng.standard_normal((6, d))[centre] + spread * clip
        dino = np.where(rng.random((n, 1)) < 0.5, rng.standard_normal((6, e))[centre] + spread * dino, dino)
    if kind == "duplicates" and n > 1:
        src = rng.integers(0, n, n // 2)
        clip[n - len(src) :], dino[n - len(src) :] = clip[src], dino[src]
    return clip, dino


def unit_rows(rows):
    import numpy as np

    rows = np.asarray(rows, dtype=np.float64)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def make_index(indexes, name, clip, dino, *, root, categories=None, keys=None, created=None, encoders=None):
    """An index of len(clip) images with the given vectors (real PNGs, so the gallery can show them).
    keys: one int per row naming its image (its id, sha256 and file follow from it) [default: the row
    number]: an index grown, shrunk or changed keeps the keys of the images it keeps. created: the
    manifest's `created`; encoders: its encoders' specs (clip, dino)."""
    import numpy as np
    import pandas as pd
    from PIL import Image

    from vhmine.index import write_index

    n = len(clip)
    keys = list(range(n)) if keys is None else [int(k) for k in keys]
    root.mkdir(parents=True, exist_ok=True)
    for k in keys:
        Image.fromarray(np.full((24, 32, 3), (k * 37) % 255, np.uint8)).save(root / f"img{k:03d}.png")
    images = pd.DataFrame(
        {
            "image_id": [f"{k:016x}"[::-1] for k in keys],  # ids whose order differs from row order
            "path": [f"img{k:03d}.png" for k in keys],
            "sha256": [f"{k:064x}" for k in keys],
            "width": [32] * n,
            "height": [24] * n,
            "coco_id": pd.array([100 + k for k in keys], dtype="Int64"),
            "categories": categories or [["cat"] if k % 2 else [] for k in keys],
        }
    )
    specs = encoders or ("test-clip", "test-dino")
    write_index(
        indexes / name,
        images,
        clip,
        dino,
        skipped=pd.DataFrame({"path": [], "reason": []}),
        manifest={
            "name": name,
            "root": str(root),
            **({"created": created} if created else {}),
            "encoders": {
                "clip": {"spec": specs[0], "dim": clip.shape[1]},
                "dino": {"spec": specs[1], "dim": dino.shape[1]},
            },
        },
    )
    return images


# --- a command stopped with Ctrl-C -------------------------------------------------------------------


def interrupt_when(proc, ready, timeout: float = 120, said=None) -> None:
    """Ctrl-C, as a terminal sends it (SIGINT to the process group of `proc`, started with
    start_new_session=True), once `ready()` holds. said: what to show if the job ended first [default:
    that it did]."""
    import os
    import signal
    import time

    deadline = time.time() + timeout
    while time.time() < deadline and not ready() and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, said() if said else "the job ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)


# --- lmms-eval ----------------------------------------------------------------------------------------


def canned_lmms(answers: dict):
    """An lmms-eval model (lmms_eval.api.model.lmms) that answers each document by its "id" from `answers`,
    and keeps in `.seen` what it was given for it: (context, visuals). Set `.task_dict` to {task name:
    dataset} before evaluating, as simple_evaluate does."""
    from lmms_eval.api.model import lmms

    class Canned(lmms):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def loglikelihood(self, requests):
            raise NotImplementedError

        def generate_until_multi_round(self, requests):
            raise NotImplementedError

        def generate_until(self, requests):
            out = []
            for r in requests:
                context, _, doc_to_visual, doc_id, task, split = r.args
                doc = self.task_dict[task][split][doc_id]
                self.seen[doc["id"]] = (context, doc_to_visual(doc))
                out.append(answers[doc["id"]])
            return out

    return Canned()


# --- a full disk, for real: a tiny tmpfs in a user and mount namespace of its own ----------------------------


def on_a_full_disk(folder, size: str, argv: list[str], *, cwd, timeout: float = 300):
    """Run argv (with a wide, offline vhmine environment) where `folder` is a fresh tmpfs of `size` bytes
    (e.g. "16k"): `unshare --user --map-root-user --mount` mounts it in a namespace of the command's own, so
    no root is needed and nothing outside sees it. Writes past `size` fail with ENOSPC, as on a full disk.
    Returns the CompletedProcess, with `.left`: the paths the command left on that tmpfs. Skips the test where
    unprivileged user namespaces are not allowed."""
    import os
    import shlex
    import shutil
    import subprocess

    import pytest

    if (
        not shutil.which("unshare")
        or subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True).returncode
    ):
        pytest.skip("unprivileged user namespaces (unshare --user --mount) are not available here")
    os.makedirs(folder, exist_ok=True)
    at = shlex.quote(str(folder))
    script = (
        f"mount -t tmpfs -o size={size} tmpfs {at} || exit 99; {shlex.join(argv)}; rc=$?; "
        f"echo '{_LEFT}'; find {at} -mindepth 1 -printf '%P\\n'; exit $rc"
    )
    env = dict(os.environ, COLUMNS="200", HF_HUB_OFFLINE="1")
    r = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    r.stdout, _, left = r.stdout.partition(_LEFT + "\n")
    r.left = sorted(left.split())  # what the command left on that disk
    return r


_LEFT = "--- left on the full disk:"


# --- generated benchmarks and answers, for the eval properties ------------------------------------------

ANSWER_FATES = ("right", "wrong", "unreadable", "missing")


def bench_from_spec(spec, name="gen"):
    """A Benchmark from `spec`: one (mode, kind, paired, truth_a, truth_b) per question; a paired question is asked of
    both images of its pair (items `q<k>a` on image A<k>, `q<k>b` on B<k>), else of A<k> only; pair groups assigned."""
    from vhmine.bench import BenchItem, Benchmark, assign_groups

    items = []
    for k, (mode, kind, paired, ta, tb) in enumerate(spec):
        pair = f"p{k}:{kind}" if paired else None
        for side, truth in (("a", ta), ("b", tb))[: 2 if paired else 1]:
            if kind == "YNQ":
                items.append(
                    BenchItem(
                        f"q{k}{side}",
                        mode,
                        kind,
                        f"Is there a cat {k}?",
                        ("Yes" if truth else "No",),
                        truth,
                        None,
                        f"{side.upper()}{k}",
                        pair,
                    )
                )
            else:
                items.append(
                    BenchItem(
                        f"q{k}{side}",
                        mode,
                        kind,
                        f"How many cats {k}?",
                        (str(3 if truth else 2),),
                        None,
                        None,
                        f"{side.upper()}{k}",
                        pair,
                    )
                )
    return assign_groups(Benchmark(name, items))


def answer_text(item, fate: str):
    """An answer to `item` that is right, wrong or unreadable; None for "missing"."""
    if fate == "missing":
        return None
    if item.kind == "YNQ":
        return {
            "right": "Yes." if item.truth else "No.",
            "wrong": "No." if item.truth else "Yes.",
            "unreadable": "I cannot tell.",
        }[fate]
    return {"right": f"There are {item.answers[0]}.", "wrong": "There are 17.", "unreadable": "Hard to say."}[fate]


def readable_bytes(path: Path) -> bytes:
    """A file's bytes and, for containers, the text inside them (xlsx cells, parquet rows, TSV base64 decoded)."""
    import base64
    import csv
    import io
    import sys

    data = path.read_bytes()
    parts = [data]
    if path.suffix == ".xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path)
        parts += [str(c.value).encode() for ws in wb for row in ws.iter_rows() for c in row if c.value is not None]
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        parts.append(json.dumps(t.to_pylist(), default=lambda b: b.hex()).encode())
        parts += [k + b"=" + v for k, v in (t.schema.metadata or {}).items()]
    elif path.suffix == ".tsv":
        csv.field_size_limit(sys.maxsize)
        for row in csv.DictReader(io.StringIO(data.decode()), delimiter="\t"):
            parts += [
                base64.b64decode(v) if k == "image" and len(v) > 64 else v.encode() for k, v in row.items()
            ]  # <= 64: a row index
    return b"\n".join(parts)


def without_intervals(text: str) -> str:
    """report.md or the console summary with each figure's 95% interval (` [53.4, 68.7]`) taken out: the figures as
    they read before intervals were printed, for tests about the figures themselves."""
    import re

    return re.sub(r" \[[-+0-9.]+, [-+0-9.]+\]", "", text)


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


# Debian's chromium, which the browser tests drive through Playwright (the `chromium` fixture of conftest.py)
CHROMIUM = os.environ.get("VHMINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# a sitecustomize.py that hides the app extra (sqlalchemy, alembic, streamlit, psycopg) from the Python that loads it:
# what the base install lacks (README: `pip install vhmine`): a module that raises as a missing package does
NO_APP_EXTRA = """
import sys
class _NoAppExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("sqlalchemy", "alembic", "streamlit", "psycopg"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoAppExtra())
"""


class Workdir:
    """A working folder in which `vhmine` runs through its real command line, as a user would (test_pipeline,
    test_tars): the loopback server's key, its own indexes, a log per command."""

    def __init__(self, root: Path, base_url: str):
        self.root = root
        self.db = root / "vhmine.db"
        self.base_url = base_url
        self.logs = root / "logs"
        self.logs.mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VHMINE_"))}
        from openai_server import API_KEY

        self.env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            OPENAI_API_KEY=API_KEY,
            VHMINE_INDEXES=str(root / "indexes"),
            OMP_NUM_THREADS="2",
            PYTHONUNBUFFERED="1",
        )
        self.n = 0

    def vhmine(self, *args: str, db: bool = True, timeout: int = 120) -> subprocess.CompletedProcess:
        """Run `vhmine ARGS` in the workdir; keep its output in logs/ (scanned for the key later)."""
        cmd = [sys.executable, "-m", "vhmine.cli", *args] + (["--db", str(self.db)] if db else [])
        t0 = time.time()
        r = subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)
        self.n += 1
        (self.logs / f"{self.n:02d}-{args[0]}.log").write_text(
            f"$ {' '.join(cmd)}\n# rc {r.returncode}, {time.time() - t0:.1f} s\n{r.stdout}\n--- stderr\n{r.stderr}"
        )
        assert r.returncode == 0, f"vhmine {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def store(self):
        from vhmine.store import open_store

        return open_store(self.db)
