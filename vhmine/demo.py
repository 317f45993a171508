"""`vhmine demo`: embed and mine a small collection end to end, then point at the pairs and the gallery.

With network: COCO val2017 (first --limit images) through the default encoders. Offline (found out
in seconds, not after hub time-outs): the photos that scikit-image ships, through tiny encoders
with random weights built locally and loaded by the same code as real ones. Pairs from untrained
encoders mean nothing; the offline demo says so and only shows that its two stages, embed and mine (STAGES), run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vhmine.config import DEFAULT_CLIP_MODEL, DEFAULT_DINO_MODEL

COCO_HOST = "images.cocodataset.org"
STAGES = ("embed", "mine")  # what the demo runs: the stages after mine need people, models or extras
DEMO_TOP = 5  # the offline demo's box is the smallest around this many pairs

# scikit-image's bundled photos (no download needed); stereo_motorcycle gives a near-duplicate pair.
SAMPLE_PHOTOS = (
    "astronaut",
    "brick",
    "camera",
    "cat",
    "chelsea",
    "clock",
    "coffee",
    "coins",
    "colorwheel",
    "grass",
    "gravel",
    "horse",
    "hubble_deep_field",
    "immunohistochemistry",
    "logo",
    "moon",
    "page",
    "retina",
    "rocket",
    "text",
)


def write_sample_photos(folder: Path) -> list[Path]:
    """Save scikit-image's sample photos as PNG files (idempotent); returns their paths."""
    import numpy as np
    import skimage.data
    from PIL import Image

    from vhmine.files import atomic_write

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(skimage.data, name)() for name in SAMPLE_PHOTOS}
    left, right, _ = skimage.data.stereo_motorcycle()
    arrays["motorcycle_left"], arrays["motorcycle_right"] = left, right
    out = []
    for name, arr in arrays.items():
        path = folder / f"{name}.png"
        if not path.is_file():
            if arr.dtype == bool:
                arr = arr.astype(np.uint8) * 255
            # temp file and rename: a killed run must not leave a truncated PNG that later runs keep
            atomic_write(path, lambda tmp, a=arr: Image.fromarray(a).save(tmp, format="PNG"))
        out.append(path)
    return out


@dataclass
class DemoResult:
    mode: str  # "coco" or "offline"
    embed_summary: str
    mine_summary: str
    notes: list[str] = field(default_factory=list)
    own_folder: list[str] = field(default_factory=list)  # the closing lines: the same route for one's own images

    def summary(self) -> str:
        return "\n".join([*self.notes, self.embed_summary, self.mine_summary, *self.own_folder])


def own_folder_lines(clip_spec: str, dino_spec: str, *, offline: bool) -> list[str]:
    """How to run the demo's route on one's own folder: the exact `vhmine embed` line with these encoders."""
    from vhmine.files import shown_path

    if not offline:
        return [
            "your own images: vhmine embed FOLDER --name NAME   (the same encoders, now in the Hugging Face cache), "
            "then vhmine mine --index NAME"
        ]
    clip_dir = clip_spec.removeprefix("local-dir:")
    clip, dino = f"local-dir:{shown_path(clip_dir)}", shown_path(dino_spec)
    return [
        f"encoders of this demo (random weights, built here): CLIP {Path(clip_dir).resolve()}, "
        f"DINOv2 {Path(dino_spec).resolve()}",
        f"your own images, offline: vhmine embed FOLDER --name NAME --clip-model {clip} --dino-model {dino}",
        "  then vhmine mine --index NAME (its closing lines say which thresholds find pairs). Real encoders saved "
        "on this machine go in the same places: --clip-model local-dir:DIR (open_clip_config.json + weights) or "
        "ViT-L-14:/path/to/weights.pt, --dino-model DIR (a DINOv2 folder saved with save_pretrained)",
    ]


def run_demo(*, limit: int = 500, offline: bool = False, workdir: Path = Path(".")) -> DemoResult:
    from vhmine.embed import HUB_HOST, EmbedOptions, embed_collection, host_reachable
    from vhmine.mine import MineOptions, mine_index

    workdir = Path(workdir)
    indexes = workdir / "indexes"
    online = not offline and host_reachable(HUB_HOST) and host_reachable(COCO_HOST, 80)
    if online:
        from vhmine.data import download_coco

        coco = download_coco("val2017", workdir / "data" / "coco")
        eres = embed_collection(
            EmbedOptions(
                images=coco.images_dir,
                name="coco-val2017-demo",
                coco_annotations=coco.annotations,
                clip_model=DEFAULT_CLIP_MODEL,
                dino_model=DEFAULT_DINO_MODEL,
                indexes=indexes,
                limit=limit,
            )
        )
        mres = mine_index(MineOptions(index=eres.name, indexes=indexes, out=workdir / "runs" / "demo-coco"))
        return DemoResult(
            "coco",
            eres.summary(),
            mres.summary(),
            own_folder=own_folder_lines(DEFAULT_CLIP_MODEL, DEFAULT_DINO_MODEL, offline=False),
        )

    from vhmine.embed import build_clip, build_dino

    notes = [
        ("offline: --offline given" if offline else f"offline: {HUB_HOST} / {COCO_HOST} unreachable")
        + f"; using scikit-image's {len(SAMPLE_PHOTOS) + 2} sample photos and tiny encoders with RANDOM weights "
        "built locally.",
        f"Pairs from untrained encoders mean nothing: this run only shows that {' and '.join(STAGES)} work. "
        "With network, `vhmine demo` uses COCO val2017 and ViT-L-14 / DINOv2-large.",
    ]
    photos = workdir / "data" / "demo-photos"
    write_sample_photos(photos)
    models = workdir / "data" / "demo-models"
    clip_spec = build_clip(models / "tiny-clip")
    dino_spec = build_dino(models / "tiny-dinov2")
    eres = embed_collection(
        EmbedOptions(
            images=photos,
            name="demo-skimage",
            clip_model=clip_spec,
            dino_model=dino_spec,
            indexes=indexes,
            workers=0,
            batch_size=8,
        )
    )
    clip_t, dino_t = _demo_thresholds(indexes, eres.name, DEMO_TOP)
    mres = mine_index(
        MineOptions(
            index=eres.name,
            indexes=indexes,
            clip=clip_t,
            dino=dino_t,
            out=workdir / "runs" / "demo-offline",
            progress=False,
        )
    )
    # the box is drawn around DEMO_TOP pairs, but other pairs fall inside it too: say both numbers
    notes.append(
        f"thresholds --clip {clip_t:.4f} --dino {dino_t:.4f}: the smallest box that holds the {DEMO_TOP} "
        "pairs CLIP ranks highest relative to DINOv2 (random encoders' cosines are not on CLIP's scale); "
        f"{mres.in_box} pairs fall inside it, those {DEMO_TOP} among them, and {mres.written} are written."
    )
    return DemoResult(
        "offline", eres.summary(), mres.summary(), notes, own_folder_lines(clip_spec, dino_spec, offline=True)
    )


def _demo_thresholds(indexes: Path, name: str, k: int = DEMO_TOP) -> tuple[float, float]:
    """A box that holds the k pairs CLIP ranks highest relative to DINOv2.

    Random encoders' cosines have no calibrated scale (all of them may sit near 1), so the real
    defaults would find nothing; ranks of the similarities are comparable across the two.
    """
    import numpy as np

    from vhmine.index import open_index
    from vhmine.mine import pair_sims

    idx = open_index(indexes, name)
    i, j = np.triu_indices(len(idx.clip), 1)
    clip_sims, dino_sims = pair_sims(idx.clip, i, j), pair_sims(idx.dino, i, j)  # the miner's own sims
    rank_gap = clip_sims.argsort().argsort() - dino_sims.argsort().argsort()
    top = np.argsort(-rank_gap, kind="stable")[:k]
    return float(clip_sims[top].min()), float(dino_sims[top].max())
