"""What the manipulate tests share: `OBJECTS` (each photo's made-up COCO objects), `_coco(folder)` (their
instances.json), `_opts(root, strategy, ...)` (ManipulateOptions over the collection), `_store(root)` and
`_victim(rules)` (a loopback responder). The `collection` fixture is in this folder's conftest.py."""

import json

from openai_server import chat_text

from vhmine.llm import LLMOptions
from vhmine.manipulate import ManipulateOptions

# file -> [(category, x, y, w, h)]: every object a polygon (a diamond in its box), so masks are not boxes
OBJECTS = {
    "coffee.png": [("cup", 20, 20, 40, 30), ("saucer", 10, 45, 60, 15), ("spoon", 70, 10, 15, 40)],
    "chelsea.png": [("cat", 10, 5, 60, 55), ("sofa", 0, 40, 96, 30)],
    "astronaut.png": [("person", 20, 5, 50, 85), ("flag", 70, 5, 20, 20)],
    "horse.png": [("horse", 5, 10, 80, 50), ("person", 30, 0, 20, 30), ("saddle", 40, 15, 15, 10)],
    "rocket.png": [("rocket", 35, 5, 20, 80)],
}


def _coco(folder):
    from PIL import Image

    cats = sorted({c for objs in OBJECTS.values() for c, *_ in objs})
    images, anns = [], []
    for i, (name, objs) in enumerate(sorted(OBJECTS.items()), start=1):
        w, h = Image.open(folder / name).size
        images.append({"id": i, "file_name": name, "width": w, "height": h})
        for c, x, y, bw, bh in objs:
            poly = [x + bw / 2, y, x + bw, y + bh / 2, x + bw / 2, y + bh, x, y + bh / 2]
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i,
                    "category_id": cats.index(c) + 1,
                    "bbox": [x, y, bw, bh],
                    "segmentation": [poly],
                    "area": bw * bh / 2,
                    "iscrowd": 0,
                }
            )
    path = folder.parent / "instances.json"
    path.write_text(
        json.dumps(
            {
                "images": images,
                "annotations": anns,
                "categories": [{"id": k + 1, "name": c} for k, c in enumerate(cats)],
            }
        )
    )
    return path


def _opts(root, strategy, **kw):
    return ManipulateOptions(
        llm=LLMOptions(model="victim-vlm", cache=root / f"cache-{strategy}.db", progress=False, retry_wait_s=0.01),
        index="scenes",
        indexes=root / "idx",
        strategies=(strategy,),
        per_strategy=1,
        out=root / "edited",
        steps=2,
        **kw,
    )


def _store(root):
    from vhmine.store import open_store

    return open_store(root / "store.db")


def _victim(rules):
    """A responder: captions, object descriptions and yes/no answers picked by the first matching phrase."""

    def answer(body):
        text = chat_text(body)
        if "correct, incorrect or unclear" in text:  # the judge: wrong whenever the truth is "no" and it said yes
            return "incorrect" if "There is no" in text and "Student's answer: Yes" in text else "correct"
        for phrase, said in rules:
            if phrase in text:
                return said
        return "Yes."

    return answer
