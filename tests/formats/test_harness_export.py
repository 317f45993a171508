"""Exports that evaluation harnesses run as they are: `--format lmms-eval` and `--format vlmevalkit`.

lmms-eval is the real one (0.7.3 from PyPI, installed by scripts/test.sh): the exported folder is loaded
through its own TaskManager(include_path=...) and get_task_dict, and its own evaluator runs the tasks with a
model that gives canned answers; every number equals `vhmine eval --predictions` on the same answers.
VLMEvalKit is not on PyPI, so its side is a transcription: a stand-in `vlmeval` package written by this
test copies VLMEvalKit's loader rules (load_tsv, the image-index resolution of ImageBaseDataset.__init__,
dump_image, build_prompt, build_dataset's class search, and ImageYORNDataset.evaluate's own yes/no reading and
default_rating as verified against VLMEvalKit's code); the registration file must import against it, declare the
right classes, and score like vhmine.
"""

import base64
import csv
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import canned_lmms
from PIL import Image

from vhmine import formats as F
from vhmine.bench import BenchItem, Benchmark
from vhmine.eval.job import YNQ_SUFFIX, match_oeq, prompt_of
from vhmine.export.job import write_benchmark
from vhmine.rules import harness as harness_rules
from vhmine.rules.answers import parse_yes_no

# the model's canned answers: readable, unreadable, VHTest's edge cases, number words, wrong answers
CANNED = {
    "c-oeq-a": "There are four cats.",
    "c-oeq-b": "I see 3 cats",
    "p-oeq": "The cat is to the left of the dog.",
    "c-ynq-a": "Yes.",
    "c-ynq-b": "Yesterday I saw cats",
    "c-ynq-c": "no",
    "c-ynq-d": "Nope",
    "o-ynq-1": " - yes",
    "o-ynq-2": "No, it says SHOP",
    "o-ynq-3": "yes",
    "o-ynq-4": "Maybe",
}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(1)
    p = []
    for i in range(3):
        p.append(d / f"im{i}.png")
        Image.fromarray(rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)).save(p[-1])
    q = "Are there exactly 4 cats in the picture?"
    items = [
        BenchItem("c-oeq-a", "counting", "OEQ", "How many cats are there?", ("4",), None, str(p[0]), "i0", "p:O"),
        BenchItem("c-oeq-b", "counting", "OEQ", "How many cats are there?", ("2", "two"), None, str(p[1]), "i1", "p:O"),
        BenchItem(
            "p-oeq",
            "position",
            "OEQ",
            "Where is the cat relative to the dog?",
            ("to the left of",),
            None,
            str(p[2]),
            "i2",
        ),
        BenchItem("c-ynq-a", "counting", "YNQ", q, ("Yes",), True, str(p[0]), "i0", "p:Y"),
        BenchItem("c-ynq-b", "counting", "YNQ", q, ("No",), False, str(p[1]), "i1", "p:Y"),
        BenchItem("c-ynq-c", "counting", "YNQ", "Are there 2 cats?", ("Yes",), True, str(p[1]), "i1"),
        BenchItem("c-ynq-d", "counting", "YNQ", "Are there 9 cats?", ("No",), False, str(p[0]), "i0"),
        BenchItem("o-ynq-1", "ocr", "YNQ", 'Does the sign say "STOP"?', ("Yes",), True, str(p[2]), "i2"),
        BenchItem("o-ynq-2", "ocr", "YNQ", 'Does the sign say "SHOP"?', ("No",), False, str(p[2]), "i2"),
        BenchItem("o-ynq-3", "ocr", "YNQ", 'Does the sign say "EXIT"?', ("No",), False, str(p[0]), "i0"),
        BenchItem("o-ynq-4", "ocr", "YNQ", 'Does the sign say "OPEN"?', ("Yes",), True, str(p[1]), "i1"),
    ]
    return Benchmark("tiny", items)


def _vhmine_eval(folder, answers, out, partial=False):
    """`vhmine eval --predictions` on `answers` (item id -> text): its report.json's metrics."""
    preds = out.parent / f"{out.name}.jsonl"
    preds.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "eval",
        "--bench",
        str(folder),
        "--predictions",
        f"m={preds}",
        "--out",
        str(out),
    ]
    r = subprocess.run(cmd + (["--partial"] if partial else []), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads((out / "report.json").read_text())["models"]["m"]["metrics"]


def _load_py(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- the rules harness users get are vhmine's ---------------------------------------------------------

ANSWERS = [
    "Yes",
    "yes.",
    "  YES  ",
    "Yesterday",
    "yes, no",
    "No",
    "no",
    "Nope",
    "Not sure",
    "nO",
    " - yes",
    "Maybe",
    "",
    "y",
    "n",
    "Yes\nNo",
    "\tno",
    "None",
    "noon",
    "Ye s",
    "ÝES",
    "nö",
    "Yes!" * 3,
]
OEQ_CASES = [
    ("There are four cats.", ["4"]),
    ("4 cats", ["four"]),
    ("fourteen", ["4"]),
    ("The cat is left", ["to the left of"]),
    ("it's red", ["red"]),
    ("Red!", ["the red"]),
    ("reddish", ["red"]),
    ("", ["a"]),
    ("the", ["the"]),
    ("twenty one", ["21"]),
    ("TWO dogs", ["2", "three"]),
    ("a, b", ["a b"]),
    ("it's", ["it"]),
    ("x", [""]),
]


def test_harness_rules_equal_vhmines(tmp_path, bench):
    """The copies utils.py and the VLMEvalKit registration file carry read and score exactly as vhmine eval."""
    from vhmine.rules.modes import _ARTICLES, _NUMBER_WORDS, normalize_answer

    assert harness_rules.YNQ_SUFFIX == YNQ_SUFFIX
    assert harness_rules.NUMBER_WORDS == _NUMBER_WORDS and harness_rules.ARTICLES.pattern == _ARTICLES.pattern
    write_benchmark(bench, tmp_path / "le", "lmms-eval")
    utils = _load_py(tmp_path / "le" / "utils.py", "vhmine_utils_under_test")
    imports = [
        line
        for line in (tmp_path / "le" / "utils.py").read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert imports == ["import re"]  # self-contained: a harness user may not have vhmine
    for a in ANSWERS + list(CANNED.values()):
        assert harness_rules.read_yes_no(a) is parse_yes_no(a, "vhtest"), a
        assert utils.read_yes_no(a) is parse_yes_no(a, "vhtest"), a
        assert utils.normalize_answer(a) == normalize_answer(a), a
    for answer, refs in OEQ_CASES:
        assert utils.match_oeq(answer, refs) == match_oeq(answer, refs), (answer, refs)
        assert harness_rules.match_oeq(answer, refs) == match_oeq(answer, refs), (answer, refs)


# --- lmms-eval --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lmms_run(bench, tmp_path_factory):
    """The export run by lmms-eval's own TaskManager, get_task_dict and evaluator, with canned answers."""
    from lmms_eval import evaluator
    from lmms_eval.tasks import TaskManager, get_task_dict

    folder = tmp_path_factory.mktemp("lmms") / "vh"
    write_benchmark(bench, folder, "lmms-eval")
    task_dict = get_task_dict(["vhmine"], TaskManager(include_path=str(folder)))

    lm = canned_lmms(CANNED)
    lm.task_dict = {t.config.task: t.dataset for group in task_dict.values() for t in group.values()}
    res = evaluator.evaluate(lm=lm, task_dict=task_dict, bootstrap_iters=0, log_samples=False)
    return folder, res["results"], lm.seen


def test_lmms_eval_folder_layout(lmms_run, bench):
    folder, results, seen = lmms_run
    assert sorted(p.name for p in folder.iterdir()) == [
        "croissant.json",
        "data",
        "manifest.json",
        "utils.py",
        "vhmine.yaml",
        "vhmine_oeq.yaml",
        "vhmine_ynq.yaml",
    ]
    assert set(results) == {"vhmine", "vhmine_ynq", "vhmine_oeq"}
    # every document reached the model with its image (a PIL image, as lmms-eval models take) and vhmine eval's prompt
    assert set(seen) == {it.id for it in bench}
    for it in bench:
        context, visuals = seen[it.id]
        assert context == prompt_of(it)
        assert len(visuals) == 1 and isinstance(visuals[0], Image.Image)
        assert np.array_equal(np.asarray(visuals[0]), np.asarray(Image.open(it.image).convert("RGB")))


def test_lmms_eval_numbers_equal_vhmine_eval(lmms_run, bench, tmp_path):
    folder, results, _ = lmms_run
    ynq_ids = {it.id for it in bench if it.kind == "YNQ"}
    full = _vhmine_eval(folder, CANNED, tmp_path / "all")
    ynq = _vhmine_eval(folder, {k: v for k, v in CANNED.items() if k in ynq_ids}, tmp_path / "ynq", partial=True)
    oeq = _vhmine_eval(folder, {k: v for k, v in CANNED.items() if k not in ynq_ids}, tmp_path / "oeq", partial=True)
    y, o = results["vhmine_ynq"], results["vhmine_oeq"]
    assert results["vhmine"]["accuracy,none"] == pytest.approx(full["overall"]["accuracy"])
    for name in ("accuracy", "precision", "recall", "f1", "yes_ratio", "unreadable"):
        assert y[f"{name},none"] == pytest.approx(ynq["overall"][name]), name
    assert o["accuracy,none"] == pytest.approx(oeq["overall"]["accuracy"])
    for mode in ("counting", "ocr"):
        assert y[f"{mode}_acc,none"] == pytest.approx(ynq["modes"][mode]["accuracy"]), mode
    for mode in ("counting", "position"):
        assert o[f"{mode}_acc,none"] == pytest.approx(oeq["modes"][mode]["accuracy"]), mode
    # the yes ratio counts the model's "yes" answers (3 of 8), not the truths' (4 of 8)
    assert ynq["overall"]["yes_ratio"] == 3 / 8 and ynq["overall"]["truth_yes_ratio"] == 4 / 8
    # the group shows the overall accuracy only: no per-mode number pooled across tasks with the wrong weights
    assert not [k for k in results["vhmine"] if k.endswith("_acc,none")]


def test_lmms_eval_export_reads_back(bench, tmp_path):
    write_benchmark(bench, tmp_path / "le", "lmms-eval")
    assert F.detect(tmp_path / "le") == "lmms-eval"
    back = F.load(tmp_path / "le")
    assert sorted(back.by_id()) == sorted(bench.by_id())
    for it in bench:
        b = back.by_id()[it.id]
        assert (b.mode, b.kind, b.question, b.answers, b.truth, b.pair_id) == (
            it.mode,
            it.kind,
            it.question,
            it.answers,
            it.truth,
            it.pair_id,
        )
        assert back.image_bytes(b) == bench.image_bytes(it)


# --- VLMEvalKit ---------------------------------------------------------------------------------------------

# A stand-in `vlmeval`, transcribing VLMEvalKit (open-compass/VLMEvalKit, vlmeval/dataset/image_base.py,
# image_yorn.py, image_vqa.py, __init__.py build_dataset, smp/file.py load/md5, smp/vlm.py decode) where
# the registration file and the TSV meet it; evaluation helpers it does not need are left out.
STAND_IN = {
    "vlmeval/__init__.py": "",
    "vlmeval/smp.py": (
        """
import hashlib, os, os.path as osp, base64, io
import pandas as pd
from PIL import Image

def LMUDataRoot():
    return os.environ["LMUData"]

def load(f):
    return {"tsv": lambda f: pd.read_csv(f, sep="\\t"), "xlsx": pd.read_excel, "csv": pd.read_csv}[f.split(".")[-1]](f)

def dump(data, f):
    {"xlsx": lambda: data.to_excel(f, index=False), "csv": lambda: data.to_csv(f, index=False)}[f.split(".")[-1]]()

def md5(s):
    h = hashlib.new("md5")
    with open(s, "rb") as f:
        for chunk in iter(lambda: f.read(2**20), b""):
            h.update(chunk)
    return str(h.hexdigest())

def get_intermediate_file_path(eval_file, suffix, target_format=None):
    stem, ext = eval_file.rsplit(".", 1)
    return f"{stem}{suffix}.{target_format or ext}"

def toliststr(s):
    if isinstance(s, str) and len(s) > 1 and (s[0] == "[") and (s[-1] == "]"):
        return [str(x) for x in eval(s)]
    elif isinstance(s, str):
        return [s]
    return [str(x) for x in s]

def decode_base64_to_image_file(base64_string, image_path):
    image = Image.open(io.BytesIO(base64.b64decode(base64_string)))
    if image.mode in ("RGBA", "P", "LA"):
        image = image.convert("RGB")
    image.save(image_path)
"""
    ),
    "vlmeval/dataset/__init__.py": (
        """
import os.path as osp
from .image_yorn import ImageYORNDataset
from .image_vqa import ImageVQADataset
DATASET_CLASSES = [ImageYORNDataset, ImageVQADataset]
SUPPORTED_DATASETS = []
for DATASET_CLS in DATASET_CLASSES:
    SUPPORTED_DATASETS.extend(DATASET_CLS.supported_datasets())

def build_dataset(dataset_name, **kwargs):
    for cls in DATASET_CLASSES:
        if dataset_name in cls.supported_datasets():
            return cls(dataset=dataset_name, **kwargs)
    return None  # VLMEvalKit then guesses a Custom VQA dataset, whose evaluate raises NotImplementedError
"""
    ),
    "vlmeval/dataset/image_base.py": (
        """
import os, os.path as osp
import numpy as np
import pandas as pd
from vlmeval.smp import LMUDataRoot, decode_base64_to_image_file, load, md5, toliststr

class ImageBaseDataset:
    MODALITY = "IMAGE"
    DATASET_URL = {}
    DATASET_MD5 = {}

    def __init__(self, dataset="MMBench", skip_noimg=True):
        self.dataset_name = dataset
        self.img_root = osp.join(LMUDataRoot(), "images", dataset)
        data = self.load_data(dataset)
        self.skip_noimg = skip_noimg
        if skip_noimg and "image" in data:
            data = data[~pd.isna(data["image"])]
        data["index"] = [str(x) for x in data["index"]]
        self.meta_only = True
        if "image" in data:
            data["image"] = [str(x) if not pd.isna(x) else "" for x in data["image"]]
            image_map = {x: y for x, y in zip(data["index"], data["image"])}
            for k in image_map:
                if len(image_map[k]) <= 64 and len(image_map[k]) > 0:
                    idx = image_map[k]
                    assert idx in image_map and len(image_map[idx]) > 64
                    image_map[k] = image_map[idx]
            images = [toliststr(image_map[k]) for k in data["index"]]
            data["image"] = [x[0] if len(x) == 1 else x for x in images]
            self.meta_only = False
        if np.all([isinstance(x, int) or str(x).isdigit() for x in data["index"]]):
            data["index"] = [int(x) for x in data["index"]]
        self.data = data

    @classmethod
    def supported_datasets(cls):
        return list(cls.DATASET_URL)

    def load_data(self, dataset):
        raise AssertionError("the registration file must read its own TSV (VLMEvalKit would download DATASET_URL)")

    def dump_image(self, line):
        os.makedirs(self.img_root, exist_ok=True)
        tgt_path = osp.join(self.img_root, f"{line['index']}.png")
        if not osp.exists(tgt_path):
            decode_base64_to_image_file(line["image"], tgt_path)
        return [tgt_path]

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        tgt_path = self.dump_image(line)
        msgs = [dict(type="image", value=p) for p in tgt_path]
        msgs.append(dict(type="text", value=line["question"]))
        return msgs
"""
    ),
    "vlmeval/dataset/image_yorn.py": (
        """
import re
import numpy as np
import pandas as pd
from vlmeval.smp import load
from .image_base import ImageBaseDataset

def process_punctuation(inText):  # vlmeval/smp/misc.py
    outText = inText
    punct = [";", r"/", "[", "]", \'"\', "{", "}", "(", ")", "=", "+", "\\\\", "_", "-", ">", "<", "@", "`", ",",
             "?", "!"]
    commaStrip = re.compile(r"(\\d)(,)(\\d)")
    periodStrip = re.compile(r"(?<!\\d)\\.(?!\\d)")
    for p in punct:
        if (p + " " in inText or " " + p in inText) or (re.search(commaStrip, inText) is not None):
            outText = outText.replace(p, "")
        else:
            outText = outText.replace(p, " ")
    outText = periodStrip.sub("", outText, count=32)  # VLMEvalKit passes re.UNICODE (32) as the count, positionally
    return outText

def YOrN_Extraction(output):  # vlmeval/dataset/utils/yorn.py
    s = output.lower()
    words = process_punctuation(s).split()
    if "yes" in words and "no" not in words:
        return "Yes"
    if "yes" not in words and "no" in words:
        return "No"
    return "Unknown"

class ImageYORNDataset(ImageBaseDataset):
    TYPE = "Y/N"
    DATASET_URL = {"POPE": "https://opencompass.openxlab.space/utils/VLMEval/POPE.tsv"}
    DATASET_MD5 = {"POPE": "c12f5acb142f2ef1f85a26ba2fbe41d5"}

    def evaluate(self, eval_file, **judge_kwargs):
        # image_yorn.py with exact matching (no judge) and yorn.py default_rating: a plain VLMEvalKit run's figures
        data = load(eval_file)
        data["prediction"] = [str(x) for x in data["prediction"]]
        data["extracted"] = [YOrN_Extraction(x) for x in data["prediction"]]
        data["score"] = data["answer"] == data["extracted"]
        res = {"Overall": np.mean(data["score"]) * 100}
        if "category" in data:
            for c in sorted(set(x for x in data["category"] if not pd.isna(x))):
                res[c] = np.mean(data[data["category"] == c]["score"]) * 100
        return pd.DataFrame({k: [v] for k, v in res.items()})
"""
    ),
    "vlmeval/dataset/image_vqa.py": (
        """
from .image_base import ImageBaseDataset

class ImageVQADataset(ImageBaseDataset):
    TYPE = "VQA"
    DATASET_URL = {"TextVQA_VAL": "https://opencompass.openxlab.space/utils/VLMEval/TextVQA_VAL.tsv"}
    DATASET_MD5 = {"TextVQA_VAL": "b233b31f551bbf4056f2f955da3a92cd"}

    def build_prompt(self, line):
        msgs = super().build_prompt(line)
        msgs[-1]["value"] += "\\nAnswer the question using a single word or phrase."
        return msgs
"""
    ),
}


@pytest.fixture
def vlmeval(tmp_path, monkeypatch):
    """The stand-in `vlmeval` importable, LMUData in tmp_path; removed from sys.modules afterwards."""
    root = tmp_path / "standin"
    for rel, text in STAND_IN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("LMUData", str(tmp_path / "LMUData"))
    yield root
    for name in [m for m in sys.modules if m == "vlmeval" or m.startswith("vlmeval.") or m == "vhmine_vlmevalkit"]:
        del sys.modules[name]


def _tsv_rows(path):
    csv.field_size_limit(sys.maxsize)
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_vlmevalkit_tsv_stores_each_image_once(bench, tmp_path):
    write_benchmark(bench, tmp_path / "vl", "vlmevalkit")
    for kind in ("YNQ", "OEQ"):
        rows = _tsv_rows(tmp_path / "vl" / f"tiny_{kind}.tsv")
        items = {it.id: it for it in bench if it.kind == kind}
        full = [r for r in rows if len(r["image"]) > 64]
        assert len(full) == len({items[r["vhmine_id"]].image for r in rows})  # one full copy per distinct image
        by_index = {r["index"]: r for r in rows}
        for r in rows:
            it = items[r["vhmine_id"]]
            if len(r["image"]) <= 64:  # a reference: to an EARLIER row holding the same picture in full
                ref = by_index[r["image"]]
                assert int(ref["index"]) < int(r["index"]) and len(ref["image"]) > 64
                assert items[ref["vhmine_id"]].image == it.image
            else:
                assert base64.b64decode(r["image"]) == bench.image_bytes(it)
            assert r["category"] == it.mode
            if kind == "YNQ":
                assert r["answer"] == ("Yes" if it.truth else "No")
    assert F.detect(tmp_path / "vl") == "vlmevalkit"
    back = F.load(tmp_path / "vl")  # index references resolved by vhmine's reader too
    assert {it.id: back.image_bytes(it) for it in back} == {it.id: bench.image_bytes(it) for it in bench}


def test_vlmevalkit_reader_rejects_a_dangling_reference(bench, tmp_path):
    from vhmine.errors import FormatError

    write_benchmark(bench, tmp_path / "vl", "vlmevalkit")
    tsv = tmp_path / "vl" / "tiny_OEQ.tsv"
    rows = _tsv_rows(tsv)
    rows[0]["image"] = "99"
    with open(tsv, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(
        FormatError, match=r"tiny_OEQ.tsv, row 2, field image: '99' is a reference .* no row with that index"
    ):
        F.load(tmp_path / "vl")


def test_vlmevalkit_registration_as_vlmevalkit_loads_it(bench, tmp_path, vlmeval):
    folder = tmp_path / "vl"
    write_benchmark(bench, folder, "vlmevalkit")
    assert "python vhmine_vlmevalkit.py --data tiny_OEQ tiny_YNQ --model" in (folder / "README.md").read_text()
    reg = _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
    import vlmeval.dataset as D
    from vlmeval.dataset.image_vqa import ImageVQADataset
    from vlmeval.dataset.image_yorn import ImageYORNDataset

    assert issubclass(reg.VhmineYNQ, ImageYORNDataset) and issubclass(reg.VhmineOEQ, ImageVQADataset)
    assert reg.VhmineYNQ.supported_datasets() == ["tiny_YNQ"] and reg.VhmineOEQ.supported_datasets() == ["tiny_OEQ"]
    assert D.VhmineYNQ is reg.VhmineYNQ and {"tiny_YNQ", "tiny_OEQ"} <= set(D.SUPPORTED_DATASETS)
    for kind, cls in (("YNQ", reg.VhmineYNQ), ("OEQ", reg.VhmineOEQ)):
        ds = D.build_dataset(f"tiny_{kind}")
        assert type(ds) is cls
        items = [it for it in bench if it.kind == kind]
        assert len(ds.data) == len(items)
        for n, it in enumerate(items):
            line = ds.data.iloc[n]
            msgs = ds.build_prompt(line)
            assert [m["type"] for m in msgs] == ["image", "text"] and msgs[1]["value"] == prompt_of(it)
            assert np.array_equal(
                np.asarray(Image.open(msgs[0]["value"])), np.asarray(Image.open(it.image).convert("RGB"))
            )
            assert line["category"] == it.mode
            if kind == "YNQ":
                assert line["answer"] == ("Yes" if it.truth else "No")  # YORN compares with exactly these
    # the open questions are scored by vhmine's `match`, from VLMEvalKit's prediction file
    oeq = [it for it in bench if it.kind == "OEQ"]
    preds = D.build_dataset("tiny_OEQ").data.drop(columns=["image"])
    preds["prediction"] = [CANNED[i] for i in preds["vhmine_id"]]
    eval_file = str(tmp_path / "M_tiny_OEQ.xlsx")
    preds.to_excel(eval_file, index=False)
    score = reg.VhmineOEQ(dataset="tiny_OEQ").evaluate(eval_file)
    hits = {it.id: match_oeq(CANNED[it.id], it.answers) for it in oeq}
    assert score["Overall"][0] == pytest.approx(100 * sum(hits.values()) / len(hits))
    assert score["counting"][0] == pytest.approx(100 * (hits["c-oeq-a"] + hits["c-oeq-b"]) / 2)


def test_vlmevalkit_registration_refuses_a_changed_tsv(bench, tmp_path, vlmeval):
    folder = tmp_path / "vl"
    write_benchmark(bench, folder, "vlmevalkit")
    with open(folder / "tiny_YNQ.tsv", "a", encoding="utf-8") as f:
        f.write("\n")
    reg = _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
    with pytest.raises(ValueError, match=r"tiny_YNQ.tsv changed since `vhmine export` wrote it \(md5 differs\)"):
        reg.VhmineYNQ(dataset="tiny_YNQ")
