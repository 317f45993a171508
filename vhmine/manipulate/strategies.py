"""The three AutoHallusion edits: abnormal object insertion, paired object insertion, correlated object removal.

Reads the scene image and, for insertions, a donor image whose object is cut out with its mask (no
diffusion, so no artefacts); for removal, an inpainting backend fills the object's box enlarged by 20%
(the paper's `remove_obj_mask`): `diffusers:<hub id or folder>`, a diffusers inpainting pipeline, or
`openai:<model>`, an OpenAI-compatible image edit (`images.edit` with the image and a mask whose
transparent part is repainted) through vhmine.llm. Either way only the masked pixels change: the
backend's picture is pasted back inside the mask. Writes nothing: an `Edit` holds the edited image,
the edit mask and the objects after the edit (the spatial truth's boxes); vhmine.manipulate.run saves
and queues it.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field

from vhmine.errors import InputError
from vhmine.images import open_scene_image
from vhmine.manipulate.scenes import Scene, SceneObject

STRATEGIES = ("abnormal", "paired", "removal")
INSERT_FRACTION = 0.35  # the pasted object's longer side, as a share of the scene's shorter side
ENLARGE = 0.2  # the removal mask: the object's box enlarged by this much (AutoHallusion's enlarge_ratio)
_BAD_BACKEND = (
    "unknown inpainting backend {spec!r}: use diffusers:<hub id or local folder> (e.g. "
    "diffusers:stabilityai/stable-diffusion-2-inpainting) or openai:<image edit model> (e.g. openai:gpt-image-1)"
)


@dataclass
class Edit:
    strategy: str
    scene: Scene
    image: object  # PIL RGB, the edited image
    mask: object  # PIL L, 255 where pixels changed
    target: str  # the inserted (abnormal, paired) or removed (removal) object
    asked: str  # the object the existence questions ask about (paired: the absent partner)
    target_box: tuple  # the inserted object's box after pasting, or the removed object's box
    objects: list[SceneObject] = field(default_factory=list)  # the scene's objects after the edit
    donor: dict | None = None  # {"image_id", "sha256", "object"} of an insertion's source
    backend: str = "cut-paste"


def _cutout(donor: Scene, obj: SceneObject):
    """(RGBA crop of the object, with its mask as alpha) from the donor image."""

    with open_scene_image(donor.path) as im:
        rgb = im.convert("RGB")
    alpha = obj.mask(rgb.size)
    box = tuple(int(round(v)) for v in obj.box)
    crop = rgb.crop(box).convert("RGBA")
    crop.putalpha(alpha.crop(box))
    return crop


def _overlap(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def _place(size: tuple[int, int], obj_size: tuple[int, int], taken: list) -> tuple[int, int]:
    """Top-left corner on a 3x3 grid that overlaps the scene's boxes least (first such, so deterministic)."""
    W, H = size
    w, h = obj_size
    spots = [(int(fx * (W - w)), int(fy * (H - h))) for fy in (0.5, 0.1, 0.9) for fx in (0.1, 0.9, 0.5)]
    return min(spots, key=lambda p: sum(_overlap((p[0], p[1], p[0] + w, p[1] + h), t) for t in taken))


def insert(strategy: str, scene: Scene, donor: Scene, obj: SceneObject, asked: str | None = None) -> Edit:
    """Paste `obj` cut from `donor` into `scene` (abnormal: ask about it; paired: ask about `asked`)."""
    from PIL import Image

    piece = _cutout(donor, obj)
    side = INSERT_FRACTION * min(scene.width, scene.height)
    k = side / max(piece.width, piece.height)
    piece = piece.resize((max(1, round(piece.width * k)), max(1, round(piece.height * k))), Image.LANCZOS)
    with open_scene_image(scene.path) as im:
        base = im.convert("RGB")
    x, y = _place(base.size, piece.size, [o.box for o in scene.objects])
    base.paste(piece, (x, y), piece)
    mask = Image.new("L", base.size, 0)
    mask.paste(piece.getchannel("A"), (x, y))
    box = (float(x), float(y), float(x + piece.width), float(y + piece.height))
    new = SceneObject(obj.name, box, 1.0)
    return Edit(
        strategy,
        scene,
        base,
        mask,
        obj.name,
        asked or obj.name,
        box,
        [o for o in scene.objects if o.name != obj.name] + [new],
        {"image_id": donor.image_id, "sha256": donor.sha256, "object": obj.name},
    )


def removal_mask(scene: Scene, obj: SceneObject):
    from PIL import Image, ImageDraw

    x0, y0, x1, y1 = obj.box
    dx, dy = (x1 - x0) * ENLARGE / 2, (y1 - y0) * ENLARGE / 2
    m = Image.new("L", (scene.width, scene.height), 0)
    ImageDraw.Draw(m).rectangle(
        [max(0, x0 - dx), max(0, y0 - dy), min(scene.width, x1 + dx), min(scene.height, y1 + dy)], fill=255
    )
    return m


class Inpainter:
    """A diffusers inpainting pipeline (by hub id or local folder), loaded once."""

    def __init__(self, spec: str, device: str | None = None, steps: int = 30, guidance: float = 7.5, seed: int = 0):
        kind, sep, source = (spec or "").partition(":")
        if kind != "diffusers" or not source:
            raise InputError(_BAD_BACKEND.format(spec=spec))
        try:
            import torch
            from diffusers import AutoPipelineForInpainting
        except ModuleNotFoundError as err:
            raise InputError(f"inpainting needs {err.name}: pip install 'vhmine[generate]'") from None
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float16 if self.device.startswith("cuda") else torch.float32
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*torch_dtype.*", category=FutureWarning)
                self.pipe = AutoPipelineForInpainting.from_pretrained(source, torch_dtype=dtype)
        except Exception as err:
            raise InputError(
                f"cannot load inpainting pipeline {source!r} ({type(err).__name__}: {str(err)[:300]}): give "
                "a folder saved with save_pretrained, or a hub id that is downloaded"
            ) from None
        self.pipe.to(self.device)
        self.pipe.set_progress_bar_config(disable=True)
        self.spec, self.steps, self.guidance, self.seed = f"diffusers:{source}", steps, guidance, seed

    def params(self) -> dict:
        return {
            "device": self.device,
            "steps": self.steps,
            "guidance": self.guidance,
            "seed": self.seed,
            "pipeline": type(self.pipe).__name__,
        }

    def fill(self, image, mask, prompt: str):
        """The image with the masked area repainted; pixels outside the mask are kept as they were."""
        from PIL import Image

        w, h = (max(8, v // 8 * 8) for v in image.size)
        gen = self.torch.Generator(device="cpu").manual_seed(self.seed)
        out = self.pipe(
            prompt=prompt,
            image=image.resize((w, h)),
            mask_image=mask.resize((w, h)),
            height=h,
            width=w,
            num_inference_steps=self.steps,
            guidance_scale=self.guidance,
            generator=gen,
        ).images[0]
        return Image.composite(out.resize(image.size), image, mask)


class OpenAIInpainter:
    """An OpenAI-compatible image edit (`openai:<model>`, e.g. gpt-image-1 or dall-e-2) through an `LLM` client."""

    def __init__(self, spec: str, llm):
        self.model = spec.partition(":")[2]
        self.llm, self.spec = llm, f"openai:{self.model}"

    def params(self) -> dict:
        return {"model": self.model, "api": "images.edit"}

    def fill(self, image, mask, prompt: str):
        """The endpoint's repainting of the masked area, resized to the image; raises LLMError when the edit fails."""
        from PIL import Image, ImageOps

        from vhmine.llm import ImageEditRequest

        alpha_mask = Image.new("RGBA", image.size, (0, 0, 0, 255))
        alpha_mask.putalpha(ImageOps.invert(mask))  # OpenAI repaints where the mask is transparent
        ans = self.llm.image_edit(ImageEditRequest(prompt, png_bytes(image), png_bytes(alpha_mask), model=self.model))
        with Image.open(io.BytesIO(ans.png)) as im:
            out = im.convert("RGB").resize(image.size, Image.LANCZOS)
        return Image.composite(out, image, mask)


def make_inpainter(
    spec: str | None, llm=None, device: str | None = None, steps: int = 30, guidance: float = 7.5, seed: int = 0
):
    """The removal backend `spec` names: diffusers:<hub id or folder> or openai:<model> (through `llm`)."""
    kind, _, source = (spec or "").partition(":")
    if kind == "openai" and source:
        return OpenAIInpainter(spec, llm)
    return Inpainter(spec, device, steps, guidance, seed)


def png_bytes(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def remove(scene: Scene, obj: SceneObject, inpainter) -> Edit:
    """Mask out `obj` and let the inpainter fill the scene without it."""

    with open_scene_image(scene.path) as im:
        base = im.convert("RGB")
    mask = removal_mask(scene, obj)
    others = [o for o in scene.objects if o.name != obj.name]
    prompt = "a photo of " + (", ".join(o.name for o in others[:5]) or "the background") + f", with no {obj.name}"
    out = inpainter.fill(base, mask, prompt)
    return Edit("removal", scene, out, mask, obj.name, obj.name, tuple(obj.box), others, None, inpainter.spec)
