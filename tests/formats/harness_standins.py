"""What the harness tests share (test_harness_export, test_harness_roundtrip, test_lmms_eval_stderr,
test_vlmevalkit_register; their fixtures `bench` and `vlmeval` are in this folder's conftest.py):

- `CANNED`: the canned model's answers by item id;
- `_load_py(path, name)`: a Python file imported as a module of that name;
- `STAND_IN`: the stand-in `vlmeval` package's files (VLMEvalKit's loader rules, transcribed);
- `_run_lmms_eval(folder, out, ...)`: the real lmms-eval run over an export with the canned model.
"""

import importlib.util

from helpers import canned_lmms

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


def _load_py(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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


def _run_lmms_eval(folder, out, predict_only=False, answers=None):
    """`lmms-eval --tasks vhmine --include_path FOLDER --log_samples --output_path OUT [--predict_only]` with a canned
    model: evaluator.evaluate with the task setup simple_evaluate makes, then the EvaluationTracker calls of
    lmms_eval/__main__.py cli_evaluate_single. (simple_evaluate itself is not called: 0.7.3's imports
    `filelock._api`, which filelock 4 removed; the samples it logs come from evaluate and the tracker alone.)"""
    from lmms_eval import evaluator
    from lmms_eval.loggers import EvaluationTracker
    from lmms_eval.tasks import TaskManager, get_task_dict
    from lmms_eval.utils import get_datetime_str

    lm = canned_lmms(CANNED if answers is None else answers)  # item id -> the canned model's answer
    task_dict = get_task_dict(["vhmine"], TaskManager(include_path=str(folder)))
    for task in (t for group in task_dict.values() for t in group.values()):  # simple_evaluate's _adjust_config
        lm.task_dict[task.config.task] = task.dataset
        if predict_only:
            task.override_metric(metric_name="bypass")
        if task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
    tracker = EvaluationTracker(output_path=str(out))
    tracker.general_config_tracker.log_experiment_args(
        model_source="canned",
        model_args="pretrained=acme/canned-vlm",
        system_instruction=None,
        chat_template=None,
        fewshot_as_multiturn=False,
    )
    datetime_str = get_datetime_str()
    results = evaluator.evaluate(lm=lm, task_dict=task_dict, log_samples=True)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples, datetime_str=datetime_str)
    for task_name in results["configs"]:  # __main__: for task_name, config in results["configs"].items()
        tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    return results
