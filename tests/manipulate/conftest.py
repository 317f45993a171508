"""The manipulate tests' `collection`: the photos of OBJECTS with their COCO annotations, embedded by the
tiny encoders (per test module: the tests of a module share the store it grows)."""

import pytest
from helpers import write_photos
from manipulate_scenes import OBJECTS, _coco


@pytest.fixture(scope="module")
def collection(tmp_path_factory, tiny_models):
    from vhmine.embed.job import EmbedOptions, embed_collection

    root = tmp_path_factory.mktemp("manip")
    write_photos(root / "photos", tuple(n[:-4] for n in OBJECTS))
    coco = _coco(root / "photos")
    clip, dino = tiny_models
    embed_collection(
        EmbedOptions(
            images=root / "photos",
            name="scenes",
            indexes=root / "idx",
            clip_model=clip,
            dino_model=dino,
            workers=0,
            batch_size=8,
            coco_annotations=coco,
            progress=False,
        )
    )
    return root
