"""vhmine.eval.metrics: hand-computed cases, and the real HallusionBench and POPE files scored against each
benchmark's own published scoring code (transcribed below as the reference)."""

import json

import pytest
from anchors import anchor
from helpers import ANSWER_FATES, answer_text, bench_from_spec, without_intervals
from hypothesis import given
from hypothesis import strategies as st

from vhmine import formats as F
from vhmine.eval import metrics as MT
from vhmine.eval.job import ModelAnswers, score
from vhmine.rules.answers import parse_yes_no


def S(id, truth, said, mode="color", pair=None, image=None, kind="YNQ"):
    return MT.Scored(id, mode, kind, said is not None and said == truth, said, truth, pair, image)


def test_hand_computed_ynq_case():
    rows = [
        S("1", True, True, pair="p1", image="A"),
        S("2", False, True, pair="p1", image="B"),
        S("3", True, True, pair="p2", image="A"),
        S("4", False, False, pair="p2", image="B"),
        S("5", True, None, image="C"),
        S("6", False, False, mode="shape", image="C"),
    ]
    s = MT.summary(rows)
    # TP 2 (1, 3); FP 1 (2); TN 2 (4, 6); FN 0; unreadable 1 (5, a yes-question)
    assert (s["tp"], s["fp"], s["tn"], s["fn"], s["unreadable"]) == (2, 1, 2, 0, 1)
    assert s["accuracy"] == pytest.approx(4 / 6)
    assert s["precision"] == pytest.approx(2 / 3)
    assert s["recall"] == pytest.approx(2 / 3)  # 3 yes-truths, the unreadable one is a miss
    assert s["f1"] == pytest.approx(2 / 3)
    assert s["yes_ratio"] == pytest.approx(3 / 6)  # what the model said, not the truths (3/6 too here, see below)
    assert (s["pair_accuracy"], s["pairs"]) == (pytest.approx(1 / 2), 2)  # p1 has a wrong answer, p2 is all right
    assert (s["image_accuracy"], s["images"]) == (
        pytest.approx(1 / 3),
        3,
    )  # A all right, B wrong once, C unreadable once
    per = MT.by_mode(rows)["modes"]
    assert list(per) == ["color", "shape"] and per["shape"]["accuracy"] == 1.0


def test_yes_ratio_counts_predictions_not_truths():
    rows = [S(str(i), i % 2 == 0, True) for i in range(10)]  # always "yes" on a 50/50 set
    s = MT.ynq(rows)
    assert s["yes_ratio"] == 1.0 and s["truth_yes_ratio"] == 0.5  # lmms-eval's POPE yes_ratio would say 0.5
    assert s["precision"] == 0.5 and s["recall"] == 1.0


def test_f1_is_zero_not_missing_when_no_yes_is_right():
    s = MT.ynq([S("1", True, False), S("2", False, True)])  # always wrong: precision 0, recall 0
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)
    s = MT.ynq([S("1", True, False), S("2", False, False)])  # never says yes: precision undefined, recall 0
    assert (s["precision"], s["recall"], s["f1"]) == (None, 0.0, 0.0)


def test_nothing_to_divide_gives_none():
    s = MT.ynq([S("1", False, False)])
    assert s["precision"] is None and s["f1"] is None and s["recall"] is None
    assert MT.group_accuracy([], "pair_id") == {"groups": 0, "correct": 0, "accuracy": None, "incomplete": 0}


# --- HallusionBench: tianyi-lab/HallusionBench utils.py, transcribed (correctness: 1 right, 0 wrong, 2 unclear) ---


def _hb_assign_correctness(data):
    for r in data:
        if r["category"] == "VS" and int(r["figure_id"]) == 0:
            r["correct"] = 1 if int(r["c"]) in (1, 2) else 0
        else:
            r["correct"] = 1 if int(r["c"]) == 1 else 0
    return data


def _hb_groups(data, names, skip=lambda r: False):
    d = {}
    for r in data:
        if skip(r):
            continue
        k = "_".join(str(r[n]) for n in names)
        c, t = d.get(k, (0, 0))
        d[k] = (c + r["correct"], t + 1)
    return sum(1 for c, t in d.values() if c == t), len(d)


def _hb_yes_ratio_stats(data):
    yes_gt = [int(i["gt_answer"]) for i in data]
    yes_pred = [int(int(i["correct"]) == int(i["gt_answer"])) for i in data]
    fp_sample = [i for i in data if int(i["correct"]) == 0]
    fp = [int(i["gt_answer"]) for i in fp_sample]
    return {"diff": sum(yes_pred) / len(yes_pred) - sum(yes_gt) / len(yes_gt), "fp": (len(fp) - sum(fp)) / len(fp)}


@pytest.fixture(scope="module")
def hb_sample():
    """HallusionBench.json joined with the result sample's model_prediction, read by VHTest's yes/no rule."""
    bench = F.load(anchor("hallusionbench/HallusionBench.json"))
    from vhmine.formats.hallusionbench import read_predictions

    preds = read_predictions(anchor("hallusionbench/HallusionBench_result_sample.json"))
    rows, _ = score(bench, ModelAnswers("sample", preds, "file"), "vhtest", {}, "match", partial=True)
    gt = {
        r["category"] + "_" + r["subcategory"] + "_" + r["set_id"] + "_" + r["figure_id"] + "_" + r["question_id"]: r
        for r in json.loads(anchor("hallusionbench/HallusionBench.json").read_text())
    }
    official = []
    for k, ans in preds.items():
        said = parse_yes_no(ans, "vhtest")
        c = 2 if said is None else int(said == (gt[k]["gt_answer"] == "1"))
        official.append(dict(gt[k], c=c))
    return rows, _hb_assign_correctness(official)


def test_hallusionbench_measures_match_its_own_scorer(hb_sample):
    rows, official = hb_sample
    assert len(rows) == 254
    hb = MT.hallusionbench(rows)
    right, total = sum(r["correct"] for r in official), len(official)
    assert hb["aAcc"] == pytest.approx(right / total)
    q_right, q_total = _hb_groups(official, ("category", "subcategory", "set_id", "question_id"))
    assert (hb["qAcc"], hb["question_pairs"]) == (pytest.approx(q_right / q_total), q_total)
    f_right, f_total = _hb_groups(
        official,
        ("category", "subcategory", "set_id", "figure_id"),
        skip=lambda r: r["category"] == "VS" and str(r["figure_id"]) == "0",
    )
    assert (hb["fAcc"], hb["figures"]) == (pytest.approx(f_right / f_total), f_total)
    # pinned, so a change in the rule or the data shows: 152/254 right, 38/117 pairs, 13/69 figures
    assert (right, q_right, q_total, f_right, f_total) == (152, 38, 117, 13, 69)
    # yes/no bias: on readable answers our definition and utils.py's agree exactly
    readable = [r for r in official if r["c"] != 2]
    ours = MT.hallusionbench([r for r in rows if r.said is not None])
    ref = _hb_yes_ratio_stats(readable)
    assert ours["yes_pct_diff"] == pytest.approx(ref["diff"]) and ours["fp_ratio"] == pytest.approx(ref["fp"])


def test_hallusionbench_bias_by_hand(hb_sample):
    rows, _ = hb_sample
    hb = MT.hallusionbench(rows)
    said_yes = sum(r.said is True for r in rows)
    truth_yes = sum(bool(r.truth) for r in rows)
    assert hb["yes_pct_diff"] == pytest.approx(said_yes / 254 - truth_yes / 254)
    wrong = [r for r in rows if not MT.hb_correct(r)]
    assert hb["fp_ratio"] == pytest.approx(sum(r.said is True for r in wrong) / len(wrong))
    assert hb["unclear"] == sum(r.said is None for r in rows) > 0


def test_no_image_unclear_counts_right_only_in_hallusionbench_measures():
    meta_vs0 = {"category": "VS", "subcategory": "chart", "set_id": "0", "figure_id": "0", "question_id": "0"}
    r = MT.Scored("x", "VS/chart", "YNQ", False, None, True, "p", None, meta_vs0)
    assert MT.hb_correct(r) and not r.correct
    assert MT.hallusionbench([r])["aAcc"] == 1.0 and MT.accuracy([r])["accuracy"] == 0.0


# --- POPE: RUCAIBox/POPE evaluate.py, transcribed -----------------------------------------------------


def _pope_evaluate(answers, label_list):
    """POPE's evaluate.py on answer texts and labels (its files read in; its prints returned)."""
    answers = [{"answer": a} for a in answers]
    label_list = list(label_list)
    for answer in answers:
        text = answer["answer"]

        # Only keep the first sentence
        if text.find(".") != -1:
            text = text.split(".")[0]

        text = text.replace(",", "")
        words = text.split(" ")
        if "No" in words or "not" in words or "no" in words:
            answer["answer"] = "no"
        else:
            answer["answer"] = "yes"

    for i in range(len(label_list)):
        if label_list[i] == "no":
            label_list[i] = 0
        else:
            label_list[i] = 1

    pred_list = []
    for answer in answers:
        if answer["answer"] == "no":
            pred_list.append(0)
        else:
            pred_list.append(1)

    pos = 1
    neg = 0
    yes_ratio = pred_list.count(1) / len(pred_list)

    TP, TN, FP, FN = 0, 0, 0, 0
    for pred, label in zip(pred_list, label_list):
        if pred == pos and label == pos:
            TP += 1
        elif pred == pos and label == neg:
            FP += 1
        elif pred == neg and label == neg:
            TN += 1
        elif pred == neg and label == pos:
            FN += 1

    precision = float(TP) / float(TP + FP)
    recall = float(TP) / float(TP + FN)
    f1 = 2 * precision * recall / (precision + recall)
    acc = (TP + TN) / (TP + TN + FP + FN)
    return {
        "accuracy": acc,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "yes_ratio": yes_ratio,
        "preds": pred_list,
    }


# answers where POPE's parsing and a reader of the first word part ways: commas, "not", several sentences,
# "No." against "no", NO in capitals, an empty answer, "no" inside a word, a question mark
POPE_TRICKY = [
    "Yes, there is.",
    "No, there is not.",
    "No.",
    "no",
    "NO",
    "",
    "Yes, but not in the front.",
    "There is no cat. Yes.",
    "Yes. There is no cat.",
    "Not",
    "Nope, none",
    "I do not see one",
    "yes,no",
    "Yes, no doubt.",
    "Nothing like that",
    "No?",
    "Is it? No",
    "There is a snow-board",
]


@pytest.mark.parametrize("split", ["random", "adversarial"])
def test_pope_measures_match_its_own_scorer(split):
    path = anchor(f"pope/coco_pope_{split}.json")
    bench = F.load(path)
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    # a deterministic fake model cycling through the tricky answers, on every question of the file
    preds = {f"{path.stem}:{r['question_id']}": POPE_TRICKY[(r["question_id"] * 7) % len(POPE_TRICKY)] for r in lines}
    rows, _ = score(bench, ModelAnswers("fake", preds, "file"), "pope", {}, "match")
    ours = MT.summary(rows)
    ref = _pope_evaluate([preds[f"{path.stem}:{r['question_id']}"] for r in lines], [r["label"] for r in lines])
    # each answer read as POPE reads it, and its printed figures
    assert [int(r.said) for r in rows] == ref.pop("preds")
    for k, v in ref.items():
        assert ours[k] == pytest.approx(v), k
    assert ours["truth_yes_ratio"] == 0.5 and ours["yes_ratio"] != 0.5 and ours["unreadable"] == 0


# --- partial data never inflates a rate (issue 16) -------------------------------------------------------------


def _ring_bench(tmp_path):
    """12 images and 12 yes/no questions, each asked of two images: question j is "yes" on image j and "no" on
    image j+1, so every pair and every image holds one truth-yes and one truth-no item (24 items), exported as
    vlmevalkit (whose TSV the VLMEvalKit result file below is made from)."""
    import numpy as np
    from PIL import Image

    from vhmine.bench import BenchItem, Benchmark, assign_groups
    from vhmine.export.job import write_benchmark

    rng = np.random.default_rng(3)
    paths = []
    for k in range(12):
        p = tmp_path / f"im{k}.png"
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(p)
        paths.append(str(p))
    items = []
    for j in range(12):
        q = f"Is there a thing number {j} in the picture?"
        for img, truth in ((j, True), ((j + 1) % 12, False)):
            items.append(
                BenchItem(
                    f"q{j}-{'yes' if truth else 'no'}",
                    "existence",
                    "YNQ",
                    q,
                    ("Yes" if truth else "No",),
                    truth,
                    paths[img],
                    f"I{img}",
                    f"pair{j}",
                    {"pair_id": f"pair{j}"},
                )
            )
    bench = assign_groups(Benchmark("ring", items))
    write_benchmark(bench, tmp_path / "bench", "vlmevalkit")
    return tmp_path / "bench", bench


def _yes_only(bench):
    return {it.id: "Yes" for it in bench if it.truth}


def _own_file(tmp_path, bench):
    p = tmp_path / "own.jsonl"
    p.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in _yes_only(bench).items()))
    return p


def _vlmevalkit_file(tmp_path, bench_dir):
    """VLMEvalKit's result table: the dataset's TSV without images, plus `prediction`; every truth-no item got
    VLMEvalKit's FAIL_MSG, as its API wrappers write it."""
    import pandas as pd

    data = pd.read_csv(bench_dir / "ring_YNQ.tsv", sep="\t")
    data.pop("image")
    truth = {it.id: it.truth for it in F.load(bench_dir)}
    data["prediction"] = ["Yes" if truth[i] else "Failed to obtain answer via API." for i in data["vhmine_id"]]
    out = tmp_path / "MyVLM_ring_YNQ.xlsx"
    data.to_excel(out, index=False)
    return out


def _lmms_eval_file(tmp_path, bench):
    """lmms-eval's --log_samples lines for the truth-yes docs only (the others never came back)."""
    path = tmp_path / "logs" / "20250101_120000_samples_vhmine_ynq.jsonl"
    path.parent.mkdir(parents=True)
    docs = [it for it in bench if it.kind == "YNQ"]
    with open(path, "w") as f:
        for doc_id, it in enumerate(docs):
            if it.truth:
                f.write(
                    json.dumps(
                        {
                            "doc_id": doc_id,
                            "target": "yes",
                            "input": it.question + " ONLY answer yes or no.",
                            "filtered_resps": "Yes",
                            "accuracy": {"id": it.id, "correct": True},
                        }
                    )
                    + "\n"
                )
    return path


@pytest.mark.parametrize("layout", ["vhmine", "vlmevalkit", "lmms-eval"])
def test_pairs_and_images_missing_an_item_are_left_out_not_counted_right(tmp_path, layout):
    from vhmine.eval.job import EvalOptions, evaluate

    bench_dir, bench = _ring_bench(tmp_path)
    read = F.load(bench_dir)
    path = {
        "vhmine": lambda: _own_file(tmp_path, read),
        "vlmevalkit": lambda: _vlmevalkit_file(tmp_path, bench_dir),
        "lmms-eval": lambda: _lmms_eval_file(tmp_path, read),
    }[layout]()
    # the harness's failure marks are failures already; files that leave items out need --partial
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", path)], partial=True))
    m = res.report["models"]["m"]
    o = m["metrics"]["overall"]
    assert (m["answered"], o["accuracy"]) == (12, 1.0)  # the 12 answers are right: per-item accuracy is honest
    # before: pair accuracy 1.0 over 12 pairs and image accuracy 1.0 over 12 images, from half of each
    assert (o["pair_accuracy"], o["pairs"], o["incomplete_pairs"]) == (None, 0, 12)
    assert (o["image_accuracy"], o["images"], o["incomplete_images"]) == (None, 0, 12)
    assert (o["pair_groups"]["groups"], o["pair_groups"]["incomplete"], o["pair_groups"]["g_acc"]) == (0, 12, None)
    md = without_intervals((tmp_path / "ev" / "report.md").read_text())
    assert "| m | 100.0 | 100.0 | - | - |" in md and "12 pair(s) and 12 image(s) with an unscored item left out" in md
    # one complete pair and its two complete images: counted, and only they
    if layout == "vhmine":
        answers = dict(_yes_only(read), **{"q0-no": "No", "q11-no": "No"})  # pair 0 whole; images I0 and I1 whole
        path.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
        o = evaluate(
            EvalOptions(bench=bench_dir, out=tmp_path / "ev2", predictions=[("m", path)], partial=True)
        ).report["models"]["m"]["metrics"]["overall"]
        assert (o["pair_accuracy"], o["pairs"], o["incomplete_pairs"]) == (1.0, 2, 10)  # pairs 0 and 11
        assert (o["image_accuracy"], o["images"], o["incomplete_images"]) == (1.0, 2, 10)  # I0 (q0 yes, q11 no), I1


def test_hallusionbench_pairs_and_figures_count_only_when_complete():
    meta = lambda s, f, q: {"category": "VD", "subcategory": "illusion", "set_id": s, "figure_id": f, "question_id": q}  # noqa: E731
    items = [
        MT.Scored(f"{s}{f}{q}", "VD/illusion", "YNQ", True, True, True, None, None, meta(s, f, q))
        for s in "01"
        for f in "01"
        for q in "01"
    ]
    full = MT.hallusionbench(items, items)
    assert (full["qAcc"], full["question_pairs"], full["fAcc"], full["figures"]) == (1.0, 4, 1.0, 4)
    # set 1, figure 1, question 1 failed: its pair (set 1 question 1) and its figure (set 1 figure 1) leave
    scored = [r for r in items if r.id != "111"]
    part = MT.hallusionbench(scored, items)
    assert (part["qAcc"], part["question_pairs"], part["incomplete_question_pairs"]) == (1.0, 3, 1)
    assert (part["fAcc"], part["figures"], part["incomplete_figures"]) == (1.0, 3, 1)
    assert part["aAcc"] == 1.0 and part["n"] == 7


# --- properties: a wrong answer never helps -----------------------------------------------------------------


QUESTION = st.tuples(
    st.sampled_from(["counting", "color"]), st.sampled_from(["YNQ", "OEQ"]), st.booleans(), st.booleans(), st.booleans()
)
RATES = ("accuracy", "precision", "recall", "f1", "pair_accuracy", "image_accuracy")
GROUP_RATES = ("q_acc", "i_acc", "g_acc", "acc")


def _rates(bench, answers: dict) -> dict:
    run = ModelAnswers("m", {k: v for k, v in answers.items() if v is not None}, "predictions:p.jsonl")
    rows, _ = score(bench, run, "vhtest", {}, "match", partial=True)
    met = MT.by_mode(rows, bench.modes(), bench.items)
    out = {}
    for where, s in [("overall", met["overall"])] + [(m, s) for m, s in met["modes"].items()]:
        out.update({(where, k): s.get(k) for k in RATES})
        out.update({(where, k): (s.get("pair_groups") or {}).get(k) for k in GROUP_RATES})
    out.update({("kind", k): a["accuracy"] for k, a in met["kinds"].items()})
    return out


@given(
    spec=st.lists(QUESTION, min_size=1, max_size=8),
    fates=st.lists(st.sampled_from(ANSWER_FATES), min_size=16, max_size=16),
    pick=st.integers(0, 15),
)
def test_property_adding_a_wrong_answer_never_raises_any_rate(spec, fates, pick):
    """Every rate (overall, per mode, per kind; pair, image and group accuracy too, whose incomplete pairs and groups a
    new answer may complete) stays or falls when an unanswered item gets a wrong answer."""
    bench = bench_from_spec(spec)
    answers = {it.id: answer_text(it, f) for it, f in zip(bench, fates)}
    missing = [i for i, a in answers.items() if a is None]
    if not missing:
        return
    before = _rates(bench, answers)
    it = bench.by_id()[missing[pick % len(missing)]]
    after = _rates(bench, {**answers, it.id: answer_text(it, "wrong")})
    for key, b in before.items():
        a = after.get(key)
        if a is not None and b is not None:
            assert a <= b + 1e-12, (key, b, a, it.id)


def test_property_counterexample_a_wrong_answer_that_completes_a_group_raised_i_acc():
    """What hypothesis shrank the property above to: group p1 right on image A, unanswered on B; group p2 wrong on
    both. Answering B wrong completed p1 and brought its right image A in: I-Acc rose 0.0 -> 0.25 (and the group
    items' acc 0.0 -> 0.33). Now each figure counts its own complete units: image A counts once answered."""
    bench = bench_from_spec([("counting", "YNQ", True, True, False), ("counting", "YNQ", True, True, False)])
    answers = {"q0a": "Yes.", "q0b": None, "q1a": "No.", "q1b": "Yes."}
    before = _rates(bench, answers)
    after = _rates(bench, {**answers, "q0b": "Yes."})
    assert (before[("overall", "i_acc")], after[("overall", "i_acc")]) == (pytest.approx(1 / 3), pytest.approx(1 / 4))
    assert (before[("overall", "acc")], after[("overall", "acc")]) == (pytest.approx(1 / 3), pytest.approx(1 / 4))
    assert (before[("overall", "g_acc")], after[("overall", "g_acc")]) == (0.0, 0.0)  # p1 is counted once complete
    assert (before[("overall", "q_acc")], after[("overall", "q_acc")]) == (0.0, 0.0)
