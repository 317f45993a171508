"""The files beside a VLMEvalKit export that make VLMEvalKit run it: the registration file and a README.

Reads the TSVs formats.vlmevalkit just wrote (for their md5); writes `vhmine_vlmevalkit.py` and
`README.md` into the export folder. The registration file declares the datasets the way VLMEvalKit's
own are declared (DATASET_URL / DATASET_MD5, whose keys `supported_datasets()` lists): `VhmineYNQ`, an
ImageYORNDataset whose `evaluate` reads the answers by the rule the export names (YNQ_RULE: vhtest,
VHTest's classify_response as `vhmine eval` and the lmms-eval export read them, by default; or
vlmevalkit) instead of VLMEvalKit's own YOrN_Extraction, the prompt getting vhmine eval's suffix; and
`VhmineOEQ`, an ImageVQADataset whose `evaluate(eval_file, **judge_kwargs)` scores with vhmine's `match`.
Both read the result file's cells as written (as `vhmine eval` does; VLMEvalKit's load would make "None"
NaN) and leave rows VLMEvalKit recorded as failed out of every figure, counting them (harness_rules,
embedded: no vhmine needed). Its URL is the TSV's name, read from the file's own folder (md5 checked),
never downloaded; its images are decoded into a folder named by the TSV's md5, so a re-export never meets
VLMEvalKit's cached images of an earlier one. Imported, it adds both classes to vlmeval.dataset
(DATASET_CLASSES, which build_dataset searches, and the module's names, which `--data-config` looks up);
run as a script, it runs VLMEvalKit's run.py with the same arguments after registering.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from vhmine.bench import OEQ, YNQ, Benchmark
from vhmine.errors import FormatError
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
from vlmeval.smp import LMUDataRoot, dump, get_intermediate_file_path, load, md5

HERE = osp.dirname(osp.abspath(__file__))
FAIL_MSG = "Failed to obtain answer"  # vlmeval/constant.py: what VLMEvalKit records when a model gave no answer
YNQ_RULES = {"vhtest": read_yes_no, "vlmevalkit": read_yes_no_vlmevalkit}


def _load_local(self, dataset):
    """The TSV beside this file (DATASET_URL is its name), checked against DATASET_MD5; never downloaded.

    VLMEvalKit keeps a dataset's decoded images in LMUData/images/<name>/<index>.png and reuses any file there:
    this dataset's images go to a folder named by the TSV's md5 instead, so a re-export (same name, new
    pictures) never shows a model the images of an earlier one."""
    path = osp.join(HERE, self.DATASET_URL[dataset])
    if not osp.exists(path):
        raise FileNotFoundError(f"{path} is missing: keep {FILE} in the folder `vhmine export` wrote")
    if md5(path) != self.DATASET_MD5[dataset]:
        raise ValueError(f"{path} changed since `vhmine export` wrote it (md5 differs): export it again")
    self.data_path = path
    self.img_root = osp.join(LMUDataRoot(), "images", f"{dataset}-{self.DATASET_MD5[dataset]}")
    return load(path)


def _text(cell):
    """A result-file cell as `vhmine eval` reads it: as the model wrote it, "" for a blank, 3 (not 3.0) for a count."""
    if cell is None or (isinstance(cell, float) and cell != cell):
        return ""
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell)


def _predictions(eval_file):
    """The prediction table with each cell as written (VLMEvalKit's load() reads "None" or "N/A" as NaN)."""
    suffix = eval_file.rsplit(".", 1)[-1].lower()
    if suffix in ("csv", "tsv"):
        data = pd.read_csv(eval_file, sep="\t" if suffix == "tsv" else ",", dtype=str, keep_default_na=False)
    elif suffix == "xlsx":
        data = pd.read_excel(eval_file, dtype=object, keep_default_na=False)
    else:
        data = load(eval_file)
        data = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    data["prediction"] = [_text(x) for x in data["prediction"]]
    return data


def _percent(right, n):
    return 100 * right / n if n else float("nan")


class VhmineYNQ(ImageYORNDataset):
    """vhmine's yes/no questions: answers are exactly Yes / No, category is the vhmine mode.

    Scored by YNQ_RULE (the rule `vhmine export` named), not VLMEvalKit's YOrN_Extraction, so that the figures
    are those of `vhmine eval --rule YNQ_RULE` and of the lmms-eval export on the same answers: Overall
    (accuracy) and one per category, then precision, recall, f1 and yes_ratio (percent), unreadable and failed
    (counts). A row holding VLMEvalKit's "Failed to obtain answer" is failed: counted, never scored."""

    DATASET_URL = DATASET_URL_YNQ
    DATASET_MD5 = DATASET_MD5_YNQ
    load_data = _load_local

    def build_prompt(self, line):
        msgs = super().build_prompt(line)
        msgs[-1]["value"] += YNQ_SUFFIX  # as `vhmine eval` asks it
        return msgs

    def evaluate(self, eval_file, **judge_kwargs):
        read = YNQ_RULES[YNQ_RULE]
        data = _predictions(eval_file)
        failed = [FAIL_MSG in p for p in data["prediction"]]
        said = [None if f else read(p) for p, f in zip(data["prediction"], failed)]
        truth = [str(a) == "Yes" for a in data["answer"]]
        data["read_as"] = ["failed" if f else {True: "yes", False: "no", None: "unreadable"}[s]
                           for s, f in zip(said, failed)]
        data["hit"] = [s is not None and s == t for s, t in zip(said, truth)]
        dump(data, get_intermediate_file_path(eval_file, "_results"))
        rows = [(s, t, h, c) for s, t, h, c, f in zip(said, truth, data["hit"], data["category"], failed) if not f]
        tp = sum(1 for s, t, _, _ in rows if t and s is True)
        fp = sum(1 for s, t, _, _ in rows if not t and s is True)
        truth_yes = sum(1 for _, t, _, _ in rows if t)
        scores = {"Overall": [_percent(sum(h for _, _, h, _ in rows), len(rows))]}
        for cat in sorted({c for _, _, _, c in rows}):
            mine = [h for _, _, h, c in rows if c == cat]
            scores[cat] = [_percent(sum(mine), len(mine))]
        scores.update(precision=[_percent(tp, tp + fp)], recall=[_percent(tp, truth_yes)],
                      f1=[_percent(2 * tp, tp + fp + truth_yes)], yes_ratio=[_percent(tp + fp, len(rows))],
                      unreadable=[sum(1 for s, _, _, _ in rows if s is None)], failed=[sum(failed)])
        score = pd.DataFrame(scores)
        dump(score, get_intermediate_file_path(eval_file, "_score", "csv"))
        return score


class VhmineOEQ(ImageVQADataset):
    """vhmine's open questions, scored by vhmine's `match` (a reference answer appears in the prediction)."""

    DATASET_URL = DATASET_URL_OEQ
    DATASET_MD5 = DATASET_MD5_OEQ
    load_data = _load_local

    def build_prompt(self, line):
        return ImageBaseDataset.build_prompt(self, line)  # the bare question, as `vhmine eval` asks it

    def evaluate(self, eval_file, **judge_kwargs):
        data = _predictions(eval_file)
        refs = [json.loads(item)["answers"] if isinstance(item, str) and item else str(answer).split(" or ")
                for item, answer in zip(data.get("vhmine_item", [None] * len(data)), data["answer"])]
        failed = [FAIL_MSG in p for p in data["prediction"]]
        data["hit"] = [not f and bool(match_oeq(p, r)) for p, r, f in zip(data["prediction"], refs, failed)]
        dump(data, get_intermediate_file_path(eval_file, "_results"))
        rows = [(h, c) for h, c, f in zip(data["hit"], data["category"], failed) if not f]
        scores = {"Overall": [_percent(sum(h for h, _ in rows), len(rows))]}
        for cat in sorted({c for _, c in rows}):
            mine = [h for h, c in rows if c == cat]
            scores[cat] = [_percent(sum(mine), len(mine))]
        scores["failed"] = [sum(failed)]
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


RULES = {
    "vhtest": "VHTest's classify_response: the answer starts with the letters yes or no, as `vhmine eval` reads it",
    "vlmevalkit": "VLMEvalKit's YOrN_Extraction: the word yes without the word no, or the reverse",
}
DEFAULT_RULE = "vhtest"


def _check_rule(rule: str) -> str:
    if rule not in RULES:
        raise FormatError(f"the VLMEvalKit export scores yes/no answers by vhtest or vlmevalkit, not {rule!r}")
    return rule


def registration_source(tsvs: dict[str, Path], rule: str = DEFAULT_RULE) -> str:
    head = [
        '"""Registers this vhmine benchmark with VLMEvalKit (written by `vhmine export --format vlmevalkit`).',
        "",
        "Import it before VLMEvalKit builds its datasets, or run VLMEvalKit through it:",
        "",
        "    python vhmine_vlmevalkit.py --data " + " ".join(p.stem for p in tsvs.values()) + " --model MODEL",
        "",
        "The answer rules below are vhmine eval's (copied, so vhmine need not be installed); yes/no answers are",
        f"read by YNQ_RULE, {RULES[_check_rule(rule)]}.",
        '"""',
        "",
        _rules_source(),
        f"YNQ_RULE = {rule!r}  # how the yes/no answers are read (YNQ_RULES below)",
    ]
    for kind in (YNQ, OEQ):
        url = {tsvs[kind].stem: tsvs[kind].name} if kind in tsvs else {}
        md5 = {tsvs[kind].stem: md5_file(tsvs[kind])} if kind in tsvs else {}
        head.append(f"DATASET_URL_{kind} = {url!r}  # dataset name -> its TSV, in this file's folder")
        head.append(f"DATASET_MD5_{kind} = {md5!r}")
    return "\n".join(head) + "\n" + _BODY


def write_registration(folder: Path, tsvs: dict[str, Path], rule: str = DEFAULT_RULE) -> None:
    (folder / FILE).write_text(registration_source(tsvs, rule), encoding="utf-8")


def readme_eval_command(tsvs: dict[str, Path], model: str) -> str:
    """Step 3 of the README: `vhmine eval` on every result file VLMEvalKit writes for this export."""
    files = " ".join(f"--predictions {model}=outputs/{model}/{model}_{p.stem}.xlsx" for p in tsvs.values())
    return f"vhmine eval --bench . {files}"


def write_readme(folder: Path, bench: Benchmark, tsvs: dict[str, Path], rule: str = DEFAULT_RULE) -> None:
    names = " ".join(p.stem for p in tsvs.values())
    model = "Qwen2-VL-2B-Instruct"
    scores = []
    if YNQ in tsvs:
        scores.append(f"`{model}_{tsvs[YNQ].stem}_score.csv` (yes/no: read by {RULES[rule]})")
    if OEQ in tsvs:
        scores.append(
            f"`{model}_{tsvs[OEQ].stem}_acc.csv` (open questions: vhmine's `match`, a reference answer "
            "appears in the answer as whole words)"
        )
    text = f"""# {bench.name}: a vhmine benchmark for VLMEvalKit

`{"`, `".join(p.name for p in tsvs.values())}`: VLMEvalKit's TSV layout (`index`, `image` as base64 or the
index of the row holding the same image, `question`, `answer`, `category` = the vhmine mode).
`{FILE}` registers them with VLMEvalKit: {", ".join(f"`{p.stem}` as {CLASSES[k]}" for k, p in tsvs.items())}.
Their images are decoded into `LMUData/images/<dataset>-<md5 of its TSV>/`, so a new export under the same
name never shows a model the pictures of an earlier one.

1. Install VLMEvalKit (it is not on PyPI):

       git clone https://github.com/open-compass/VLMEvalKit && pip install -e VLMEvalKit

2. In this folder, run a model on the datasets through the registration file (it then runs VLMEvalKit's
   `run.py` with the same arguments; set `VLMEVALKIT_ROOT` if your clone is not where `vlmeval` is imported from):

       python {FILE} --data {names} --model {model}

3. VLMEvalKit writes the answers to `outputs/{model}/{model}_<dataset>.xlsx` and the scores beside them,
   by vhmine's rules:
{chr(10).join("   - " + x for x in scores)}

   `Overall` is the accuracy over the answered items: a row VLMEvalKit recorded as "Failed to obtain answer"
   is counted under `failed`, never scored. `vhmine eval` on all the answer files gives the same figures, and
   pair and image accuracy besides:

       {readme_eval_command(tsvs, model)}

   VLMEvalKit's own yes/no scoring (ImageYORNDataset, reading answers with YOrN_Extraction) differs on
   answers such as "Nope", "Yesterday" or "I think yes": add `--rule vlmevalkit` to reproduce its figures.
"""
    (folder / "README.md").write_text(text, encoding="utf-8")
