"""vhmine.eval.metrics: hand-computed cases, and the real HallusionBench and POPE files scored against each
benchmark's own published scoring code (transcribed below as the reference)."""

import json

import pytest

from anchors import anchor
from vhmine import formats as F
from vhmine.eval import metrics as MT
from vhmine.eval.answers import parse_yes_no
from vhmine.eval.job import ModelAnswers, score


def S(id, truth, said, mode="color", pair=None, image=None, kind="YNQ"):
    return MT.Scored(id, mode, kind, said is not None and said == truth, said, truth, pair, image)


def test_hand_computed_ynq_case():
    rows = [S("1", True, True, pair="p1", image="A"), S("2", False, True, pair="p1", image="B"),
            S("3", True, True, pair="p2", image="A"), S("4", False, False, pair="p2", image="B"),
            S("5", True, None, image="C"), S("6", False, False, mode="shape", image="C")]
    s = MT.summary(rows)
    # TP 2 (1, 3); FP 1 (2); TN 2 (4, 6); FN 0; unreadable 1 (5, a yes-question)
    assert (s["tp"], s["fp"], s["tn"], s["fn"], s["unreadable"]) == (2, 1, 2, 0, 1)
    assert s["accuracy"] == pytest.approx(4 / 6)
    assert s["precision"] == pytest.approx(2 / 3)
    assert s["recall"] == pytest.approx(2 / 3)  # 3 yes-truths, the unreadable one is a miss
    assert s["f1"] == pytest.approx(2 / 3)
    assert s["yes_ratio"] == pytest.approx(3 / 6)  # what the model said, not the truths (3/6 too here, see below)
    assert (s["pair_accuracy"], s["pairs"]) == (pytest.approx(1 / 2), 2)  # p1 has a wrong answer, p2 is all right
    assert (s["image_accuracy"], s["images"]) == (pytest.approx(1 / 3), 3)  # A all right, B wrong once, C unreadable once
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
    assert MT.group_accuracy([], "pair_id") == {"groups": 0, "correct": 0, "accuracy": None}


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
    gt = {r["category"] + "_" + r["subcategory"] + "_" + r["set_id"] + "_" + r["figure_id"] + "_" + r["question_id"]: r
          for r in json.loads(anchor("hallusionbench/HallusionBench.json").read_text())}
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
    f_right, f_total = _hb_groups(official, ("category", "subcategory", "set_id", "figure_id"),
                                  skip=lambda r: r["category"] == "VS" and str(r["figure_id"]) == "0")
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
        text = answer['answer']

        # Only keep the first sentence
        if text.find('.') != -1:
            text = text.split('.')[0]

        text = text.replace(',', '')
        words = text.split(' ')
        if 'No' in words or 'not' in words or 'no' in words:
            answer['answer'] = 'no'
        else:
            answer['answer'] = 'yes'

    for i in range(len(label_list)):
        if label_list[i] == 'no':
            label_list[i] = 0
        else:
            label_list[i] = 1

    pred_list = []
    for answer in answers:
        if answer['answer'] == 'no':
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
    f1 = 2*precision*recall / (precision + recall)
    acc = (TP + TN) / (TP + TN + FP + FN)
    return {"accuracy": acc, "precision": precision, "recall": recall, "f1": f1, "yes_ratio": yes_ratio,
            "preds": pred_list}


# answers where POPE's parsing and a reader of the first word part ways: commas, "not", several sentences,
# "No." against "no", NO in capitals, an empty answer, "no" inside a word, a question mark
POPE_TRICKY = ["Yes, there is.", "No, there is not.", "No.", "no", "NO", "", "Yes, but not in the front.",
               "There is no cat. Yes.", "Yes. There is no cat.", "Not", "Nope, none", "I do not see one",
               "yes,no", "Yes, no doubt.", "Nothing like that", "No?", "Is it? No", "There is a snow-board"]


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
