"""The files beside a VLMEvalKit export that make VLMEvalKit run it: the registration file and a README.

Reads the TSVs formats.vlmevalkit just wrote (for their md5); writes `vhmine_vlmevalkit.py` and
`README.md` into the export folder. The registration file declares the datasets the way VLMEvalKit's
own are declared (DATASET_URL / DATASET_MD5, whose keys `supported_datasets()` lists): `VhmineYNQ`, an
ImageYORNDataset (VLMEvalKit's yes/no extraction and scoring; the prompt gets vhmine eval's suffix), and
`VhmineOEQ`, an ImageVQADataset whose `evaluate(eval_file, **judge_kwargs)` scores with vhmine's `match`
(harness_rules, embedded: no vhmine needed). Its URL is the TSV's name, read from the file's own folder
(md5 checked), never downloaded. Imported, it adds both classes to vlmeval.dataset (DATASET_CLASSES,
which build_dataset searches, and the module's names, which `--data-config` looks up); run as a script,
it runs VLMEvalKit's run.py with the same arguments after registering.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from vhmine.bench import OEQ, YNQ, Benchmark
from vhmine.formats.lmms_eval import _rules_source

FILE = "vhmine_vlmevalkit.py"
CLASSES = {YNQ: "VhmineYNQ", OEQ: "VhmineOEQ"}

_BODY = '''
import json
import os
import os.path as osp
import runpy
import sys

import pandas as pd

import vlmeval
import vlmeval.dataset as _datasets
from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.dataset.image_vqa import ImageVQADataset
from vlmeval.dataset.image_yorn import ImageYORNDataset
from vlmeval.smp import dump, get_intermediate_file_path, load, md5

HERE = osp.dirname(osp.abspath(__file__))


def _load_local(self, dataset):
    """The TSV beside this file (DATASET_URL is its name), checked against DATASET_MD5; never downloaded."""
    path = osp.join(HERE, self.DATASET_URL[dataset])
    if not osp.exists(path):
        raise FileNotFoundError(f"{path} is missing: keep {FILE} in the folder `vhmine export` wrote")
    if md5(path) != self.DATASET_MD5[dataset]:
        raise ValueError(f"{path} changed since `vhmine export` wrote it (md5 differs): export it again")
    self.data_path = path
    return load(path)


class VhmineYNQ(ImageYORNDataset):
    """vhmine's yes/no questions: answers are exactly Yes / No, category is the vhmine mode."""

    DATASET_URL = DATASET_URL_YNQ
    DATASET_MD5 = DATASET_MD5_YNQ
    load_data = _load_local

    def build_prompt(self, line):
        msgs = super().build_prompt(line)
        msgs[-1]["value"] += YNQ_SUFFIX  # as `vhmine eval` asks it
        return msgs


class VhmineOEQ(ImageVQADataset):
    """vhmine's open questions, scored by vhmine's `match` (a reference answer appears in the prediction)."""

    DATASET_URL = DATASET_URL_OEQ
    DATASET_MD5 = DATASET_MD5_OEQ
    load_data = _load_local

    def build_prompt(self, line):
        return ImageBaseDataset.build_prompt(self, line)  # the bare question, as `vhmine eval` asks it

    def evaluate(self, eval_file, **judge_kwargs):
        data = load(eval_file)
        refs = [json.loads(item)["answers"] if isinstance(item, str) and item else str(answer).split(" or ")
                for item, answer in zip(data.get("vhmine_item", [None] * len(data)), data["answer"])]
        data["hit"] = [bool(match_oeq(str(p), r)) for p, r in zip(data["prediction"], refs)]
        dump(data, get_intermediate_file_path(eval_file, "_results"))
        scores = {"Overall": [100 * data["hit"].mean()]}
        for cat in sorted(set(data["category"])):
            scores[cat] = [100 * data[data["category"] == cat]["hit"].mean()]
        score = pd.DataFrame(scores)
        dump(score, get_intermediate_file_path(eval_file, "_acc", "csv"))
        return score


FILE = osp.basename(__file__)
for _cls in (VhmineYNQ, VhmineOEQ):
    if _cls.DATASET_URL and _cls not in _datasets.DATASET_CLASSES:
        _datasets.DATASET_CLASSES.append(_cls)  # build_dataset(name) searches these
        _datasets.SUPPORTED_DATASETS.extend(_cls.supported_datasets())
    setattr(_datasets, _cls.__name__, _cls)  # --data-config '{"NAME": {"class": "VhmineYNQ", ...}}' looks here


if __name__ == "__main__":
    # python vhmine_vlmevalkit.py --data NAME --model MODEL: VLMEvalKit's run.py with these datasets registered
    root = os.environ.get("VLMEVALKIT_ROOT") or osp.dirname(osp.dirname(osp.abspath(vlmeval.__file__)))
    run = osp.join(root, "run.py")
    if not osp.isfile(run):
        sys.exit(f"no run.py in {root}: set VLMEVALKIT_ROOT to your VLMEvalKit clone (pip install -e . there)")
    sys.argv = [run] + sys.argv[1:]
    runpy.run_path(run, run_name="__main__")
'''


def md5_file(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def registration_source(tsvs: dict[str, Path]) -> str:
    head = ['"""Registers this vhmine benchmark with VLMEvalKit (written by `vhmine export --format vlmevalkit`).', "",
            "Import it before VLMEvalKit builds its datasets, or run VLMEvalKit through it:", "",
            "    python vhmine_vlmevalkit.py --data " + " ".join(p.stem for p in tsvs.values()) + " --model MODEL", "",
            "The answer rules below are vhmine eval's (copied, so vhmine need not be installed).", '"""', "",
            _rules_source()]
    for kind in (YNQ, OEQ):
        url = {tsvs[kind].stem: tsvs[kind].name} if kind in tsvs else {}
        md5 = {tsvs[kind].stem: md5_file(tsvs[kind])} if kind in tsvs else {}
        head.append(f"DATASET_URL_{kind} = {url!r}  # dataset name -> its TSV, in this file's folder")
        head.append(f"DATASET_MD5_{kind} = {md5!r}")
    return "\n".join(head) + "\n" + _BODY


def write_registration(folder: Path, tsvs: dict[str, Path]) -> None:
    (folder / FILE).write_text(registration_source(tsvs), encoding="utf-8")


def write_readme(folder: Path, bench: Benchmark, tsvs: dict[str, Path]) -> None:
    names = " ".join(p.stem for p in tsvs.values())
    first = next(iter(tsvs.values())).stem
    text = f"""# {bench.name}: a vhmine benchmark for VLMEvalKit

`{'`, `'.join(p.name for p in tsvs.values())}`: VLMEvalKit's TSV layout (`index`, `image` as base64 or the
index of the row holding the same image, `question`, `answer`, `category` = the vhmine mode).
`{FILE}` registers them with VLMEvalKit: {', '.join(f'`{p.stem}` as {CLASSES[k]}' for k, p in tsvs.items())}.

1. Install VLMEvalKit (it is not on PyPI):

       git clone https://github.com/open-compass/VLMEvalKit && pip install -e VLMEvalKit

2. Run a model on the datasets through the registration file (it then runs VLMEvalKit's `run.py`
   with the same arguments; set `VLMEVALKIT_ROOT` if your clone is not where `vlmeval` is imported from):

       python {FILE} --data {names} --model Qwen2-VL-2B-Instruct

3. Read the scores VLMEvalKit wrote under `outputs/<model>/` (yes/no: VLMEvalKit's yes/no scoring per
   category; open questions: vhmine's `match`, `*_acc.csv`), or score its answers with vhmine's rules:

       vhmine eval --bench . --predictions Qwen2-VL-2B-Instruct=outputs/Qwen2-VL-2B-Instruct/Qwen2-VL-2B-Instruct_{first}.xlsx
"""
    (folder / "README.md").write_text(text, encoding="utf-8")
