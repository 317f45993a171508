"""`vhmine manipulate`: edit scenes against the language prior, ask the victim, score ASR / MASR / CASR.

Reads an embedded collection (vhmine.manipulate.scenes), the prior (vhmine.manipulate.prior) and the
victim / judge / prior models through vhmine.llm. Writes each edited image once as `<out>/<sha256>.png`
and its edit mask as `<out>/masks/<sha256>.png`, records it with curate.work.add_generation (backend
`manipulate`, the strategy, source and donor image ids and sha256, the inserted or removed object, its
box, the mask's file and sha256, the prior and its answer) and queues it in the existence mode (and
in position when it has spatial questions), where workers verify it (an edit that failed is discarded
there; an image edit request that failed is discarded before, with its reason in the report). Reruns
accumulate: a case already in the store for the run's options is reused, not edited again
(vhmine.manipulate.stored), and `<out>/manipulate-report.json`, written atomically, covers every such
case: its questions, answers, verdicts and conflicts, and the metrics.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import prompts as P
from vhmine.errors import InputError, LLMError
from vhmine.files import atomic_write, atomic_write_text, check_writable
from vhmine.images import open_scene_image, sha256_file
from vhmine.llm import LLM, ChatRequest, LLMOptions
from vhmine.manipulate import prior as PR
from vhmine.manipulate import questions as Q
from vhmine.manipulate import stored as ST
from vhmine.manipulate import strategies as S
from vhmine.manipulate.detect import FamilyResult, judge_family
from vhmine.manipulate.metrics import attack_metrics, metrics_table
from vhmine.manipulate.scenes import Scene, collection_scenes, detect_scenes

log = logging.getLogger(__name__)
DEFAULT_OUT = Path("data") / "manipulated"
REPORT = "manipulate-report.json"


@dataclass(frozen=True)
class ManipulateOptions:
    llm: LLMOptions  # llm.model is the victim
    index: str | None = None
    indexes: Path | None = None
    coco_annotations: Path | None = None  # None: the one the collection was embedded with
    detector: str | None = None  # Owl-ViT / OWLv2 hub id or folder, for scenes without annotations
    vocabulary: Sequence[str] = ()  # the detector's object names [default: the COCO categories]
    threshold: float = 0.1
    prior: str = "counts"  # counts or llm
    prior_model: str | None = None  # text-only model of --prior llm
    strategies: Sequence[str] = S.STRATEGIES
    per_strategy: int = 10
    inpaint: str | None = None  # diffusers:<hub id or folder> or openai:<model>, needed by removal
    judge: str | None = None  # judge model; None: the yes/no rule
    rule: str = "vhtest"
    out: Path | None = None
    device: str | None = None
    steps: int = 30
    guidance: float = 7.5
    seed: int = 0


@dataclass
class Case:
    id: str
    edit: S.Edit
    choice: PR.Choice
    image_id: str
    png: bytes
    tasks: list[str] = field(default_factory=list)
    caption: str | None = None
    desc: str | None = None
    questions: list = field(default_factory=list)


@dataclass
class ManipulateResult:
    cases: list[Case] = field(default_factory=list)
    results: list[FamilyResult] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    discarded: list[dict] = field(default_factory=list)  # image edits that failed, with the reason
    new: int = 0  # cases edited in this run (the rest were in the store already)
    failed: int = 0
    spent: float = 0.0
    report: Path | None = None

    @property
    def partial(self) -> bool:
        return self.failed > 0

    def summary(self) -> str:
        by = {s: sum(c.edit.strategy == s for c in self.cases) for s in S.STRATEGIES}
        lines = [
            f"manipulate: {len(self.cases)} edited image(s) queued for verification, {self.new} new in this run "
            f"({', '.join(f'{s} {n}' for s, n in by.items())}); ${self.spent:.4f} spent; report {self.report}"
        ]
        if self.metrics:
            lines.append(metrics_table(self.metrics))
        lines += [f"  skipped: {s}" for s in self.skipped[:10]]
        lines += [f"  discarded: {d['strategy']} on {d['source_image_id']}: {d['reason']}" for d in self.discarded[:10]]
        if self.partial:
            lines.append(f"partial run: {self.failed} request(s) failed; rerun the same command to retry only those")
        return "\n".join(lines)


def _save(data: bytes, folder: Path) -> tuple[Path, str]:
    """`<folder>/<sha256>.png`, written whole (atomic_write); a file there already is kept only when it
    holds these bytes (a truncated one from a killed run is written again)."""
    sha = hashlib.sha256(data).hexdigest()
    path = folder / f"{sha}.png"
    if not (path.is_file() and sha256_file(path) == sha):
        atomic_write(path, lambda tmp: tmp.write_bytes(data))
    return path, sha


def _order(seed: int, scenes: list[Scene], strategy: str) -> list[Scene]:
    return sorted(scenes, key=lambda s: hashlib.sha256(f"{seed}:{strategy}:{s.image_id}".encode()).hexdigest())


def _donors(scenes: list[Scene]) -> dict[str, tuple[Scene, object]]:
    """object name -> (scene, object) to cut it from: a masked instance first, then the largest."""
    best: dict[str, tuple[Scene, object]] = {}
    for s in scenes:
        for o in s.objects:
            cur = best.get(o.name)
            key = (bool(o.polygons or o.rle), o.area)
            if cur is None or key > (bool(cur[1].polygons or cur[1].rle), cur[1].area):
                best[o.name] = (s, o)
    return best


def _choices(
    strategy: str,
    scenes: list[Scene],
    counts: PR.Cooccurrence,
    donors: dict,
    opts: ManipulateOptions,
    llm: LLM | None,
    result: ManipulateResult,
) -> list[tuple[Scene, PR.Choice]]:
    names = sorted(counts.n)
    pool = [s for s in _order(opts.seed, scenes, strategy) if len(s.objects) >= (2 if strategy == "removal" else 1)]
    pool = pool[: opts.per_strategy * 3]  # a few spare scenes for choices that cannot be made
    if opts.prior == "llm":
        asks = [
            (
                strategy,
                s.names(),
                s.names()
                if strategy == "removal"
                else [n for n in names if n not in s.names() and donors.get(n, (s,))[0] is not s],
            )
            for s in pool
        ]
        misses: dict = {}
        picked = PR.llm_choices(llm, opts.prior_model, asks, misses)
        for k, (failed, why) in sorted(misses.items()):  # recorded; a failed request makes the run partial
            result.failed += failed
            result.skipped.append(f"{strategy} on {pool[k].image_id}: {why}")
    else:
        picked = []
        for s in pool:
            ins = [n for n in names if n in donors and donors[n][0] is not s]
            picked.append(
                counts.least_related(s.names(), ins)
                if strategy == "abnormal"
                else counts.strongest_pair(s.names(), ins)
                if strategy == "paired"
                else counts.most_implied(s.names())
            )
    out = []
    for s, c in zip(pool, picked):
        if c is not None and (strategy == "removal" or (c.objects[0] in donors and donors[c.objects[0]][0] is not s)):
            out.append((s, c))
    return out[: opts.per_strategy]


def _record(store, case: Case, out: Path, opts: ManipulateOptions, params: dict) -> None:
    from vhmine import curate as C

    e = case.edit
    path, sha = _save(case.png, out)
    mpath, msha = _save(S.png_bytes(e.mask), out / "masks")
    case.image_id = sha[:16]
    prov = {
        "strategy": e.strategy,
        "source_image_id": e.scene.image_id,
        "source_sha256": e.scene.sha256,
        "inserted_object" if e.strategy != "removal" else "removed_object": e.target,
        "asked_object": e.asked,
        "object_box": [round(v, 1) for v in e.target_box],
        "mask": f"masks/{mpath.name}",
        "mask_sha256": msha,
        "donor": e.donor,
        "edit_backend": e.backend,
        "prior": case.choice.prior,
        "prior_score": case.choice.score,
        "prior_answer": case.choice.answer,
        **params,
    }
    prompt = f"{e.strategy}: {'removed' if e.strategy == 'removal' else 'inserted'} {e.target}" + (
        f", asked about {e.asked}" if e.asked != e.target else ""
    )
    modes = ["existence"] + (
        ["position"] if case.questions and any(q.family == "spatial" for q in case.questions) else []
    )
    for m in modes:
        case.tasks.append(
            C.work.add_generation(
                store,
                path,
                m,
                prompt,
                backend="manipulate",
                model=e.backend,
                seed=opts.seed if e.strategy == "removal" else None,
                params=prov,
            )
        )


def _ask(llm: LLM, reqs: list[ChatRequest], desc: str, result: ManipulateResult) -> list[str | None]:
    out: list[str | None] = [None] * len(reqs)
    for o in llm.chat_iter(reqs, desc=desc):
        if o.ok:
            out[o.index] = o.answer.text
        else:
            result.failed += 1
    llm.raise_if_stopped(f"manipulate ({desc})")  # no key, a rejected one, endpoint down: one line
    return out


def _object_crop(case: Case, donors: dict) -> bytes:
    """The target object alone: cut from the donor (insertions) or the source image (removal)."""

    e = case.edit
    scene, obj = donors[e.target] if e.strategy != "removal" else (e.scene, e.scene.get(e.target))
    with open_scene_image(scene.path) as im:
        return S.png_bytes(im.convert("RGB").crop(tuple(int(round(v)) for v in obj.box)))


def _make_cases(
    store,
    scenes: list[Scene],
    counts: PR.Cooccurrence,
    donors: dict,
    opts: ManipulateOptions,
    llm: LLM,
    inpainter,
    result: ManipulateResult,
) -> None:
    """The stored cases for these options, then an edit for each new choice (see vhmine.manipulate.stored)."""
    prior = "counts" if opts.prior == "counts" else f"llm:{opts.prior_model} {P.load(PR.PROMPT).id}"
    backends = {
        st: (inpainter.spec, ST.edit_settings(inpainter.params())) if st == "removal" else ("cut-paste", None)
        for st in opts.strategies
    }
    by_sha = {s.sha256: s for s in scenes}
    known = ST.stored_cases(store, scenes, opts.strategies, prior, opts.detector, backends)
    for strategy in opts.strategies:
        for scene, choice in _choices(strategy, scenes, counts, donors, opts, llm, result):
            target = choice.objects[0]
            if ST.case_key(strategy, scene.sha256, target, choice.objects[-1]) in known:
                continue  # made by an earlier run: taken from the store below
            try:
                if strategy == "removal":
                    edit = S.remove(scene, scene.get(target), inpainter)
                else:
                    edit = S.insert(strategy, scene, *donors[target], asked=choice.objects[-1])
            except LLMError as err:  # the image edit failed: discarded, with its reason; a rerun asks again
                result.failed += 1
                result.discarded.append(
                    {
                        "strategy": strategy,
                        "source_image_id": scene.image_id,
                        "object": target,
                        "backend": inpainter.spec,
                        "reason": str(err)[:300],
                    }
                )
                continue
            except Exception as err:  # one bad image does not stop the run
                result.skipped.append(f"{strategy} on {scene.image_id}: {type(err).__name__}: {str(err)[:160]}")
                continue
            _add_case(result, edit, choice, S.png_bytes(edit.image))
            result.new += 1
    for key, (p, path) in known.items():
        got = ST.rebuild(p, path, by_sha[key[1]])
        if got is None:
            result.skipped.append(f"{key[0]} on {by_sha[key[1]].image_id}: the stored edit's mask or object is gone")
            continue
        _add_case(result, *got)
    order = {st: k for k, st in enumerate(S.STRATEGIES)}
    result.cases.sort(key=lambda c: (order[c.edit.strategy], c.edit.scene.image_id, c.id))


def _add_case(result: ManipulateResult, edit: S.Edit, choice: PR.Choice, png: bytes) -> None:
    cid = f"{edit.strategy}:{hashlib.sha256(png).hexdigest()[:16]}"
    if all(c.id != cid for c in result.cases):
        result.cases.append(Case(cid, edit, choice, cid.split(":")[1], png))


def manipulate(store, opts: ManipulateOptions) -> ManipulateResult:
    """Make the edits, queue them, ask the victim and score the attacks (see the module docstring)."""
    from vhmine.rules import judge_prompt, judge_request

    bad = [s for s in opts.strategies if s not in S.STRATEGIES]
    if bad or not opts.strategies:
        raise InputError(f"unknown strategy {', '.join(bad) or '(none)'}: use {', '.join(S.STRATEGIES)}")
    if opts.prior not in ("counts", "llm"):
        raise InputError(f"--prior {opts.prior!r}: use counts or llm")
    if opts.prior == "llm" and not opts.prior_model:
        raise InputError("--prior llm needs --prior-model: a text-only model that names the objects")
    if "removal" in opts.strategies and not opts.inpaint:
        raise InputError(
            "correlated object removal needs --inpaint diffusers:<hub id or folder> (an inpainting "
            "pipeline) or --inpaint openai:<model> (an image edit, e.g. openai:gpt-image-1), or leave it "
            "out with --strategy abnormal --strategy paired"
        )
    check_writable(Path(opts.out or DEFAULT_OUT), flag="--out")  # before the detector and the models, in one line
    scenes, coco = collection_scenes(opts.index, opts.indexes, opts.coco_annotations)
    if opts.detector:
        vocab = list(opts.vocabulary) or sorted({o.name for s in scenes for o in s.objects})
        detect_scenes(scenes, opts.detector, vocab, opts.threshold, opts.device)
    if not any(s.objects for s in scenes):
        raise InputError(
            "no scene has objects: embed the collection with --coco-annotations, or pass --detector "
            "(Owl-ViT / OWLv2) with --vocabulary"
        )
    out = Path(opts.out or DEFAULT_OUT)
    result = ManipulateResult()
    counts = PR.Cooccurrence([s.names() for s in scenes])
    donors = _donors(scenes)
    p_cap, p_obj = P.load("manipulate_caption"), P.load("manipulate_object")
    victim = opts.llm.model
    with LLM(opts.llm) as llm:
        inpainter = (
            S.make_inpainter(opts.inpaint, llm, opts.device, opts.steps, opts.guidance, opts.seed)
            if "removal" in opts.strategies
            else None
        )
        edit_model = [inpainter.model] if isinstance(inpainter, S.OpenAIInpainter) else []
        llm.check_prices([victim] + [m for m in (opts.judge, opts.prior_model) if m] + edit_model)
        _make_cases(store, scenes, counts, donors, opts, llm, inpainter, result)
        # the victim's own caption of each edited image and its description of the target object
        caps = _ask(llm, [ChatRequest(p_cap.render(), images=[c.png]) for c in result.cases], "captions", result)
        descs = _ask(
            llm,
            [ChatRequest(p_obj.render(object=c.edit.target), images=[_object_crop(c, donors)]) for c in result.cases],
            "object descriptions",
            result,
        )
        for c, cap, d in zip(result.cases, caps, descs):
            c.caption, c.desc = cap, (" ".join(d.split()).rstrip(".") if d else None)
            e = c.edit
            remaining = [o.name for o in e.objects if o.name != e.target]
            c.questions = Q.existence_questions(
                e.strategy, e.asked, e.target, remaining, c.caption, c.desc
            ) + Q.spatial_questions(e.strategy, e.target, e.target_box, e.objects, c.desc)
            _record(
                store,
                c,
                out,
                opts,
                {
                    "victim": victim,
                    "inpaint": inpainter.params() if inpainter and e.strategy == "removal" else None,
                    "coco": bool(coco),
                    "detector": opts.detector,
                },
            )
        flat = [(c, q) for c in result.cases for q in c.questions]
        answers = _ask(llm, [ChatRequest(q.text, images=[c.png]) for c, q in flat], "victim", result)
        judged: list[str | None] = [None] * len(flat)
        if opts.judge:
            jp = judge_prompt()
            todo = [k for k, a in enumerate(answers) if a is not None]
            jt = _ask(
                llm,
                [judge_request(opts.judge, flat[k][1].text, [flat[k][1].reference], answers[k], jp) for k in todo],
                "judge",
                result,
            )
            for k, t in zip(todo, jt):
                judged[k] = t
        result.spent = llm.spent
    pos = 0
    for c in result.cases:
        n = len(c.questions)
        ans, jts = answers[pos : pos + n], judged[pos : pos + n]
        pos += n
        for fam in ("existence", "spatial"):
            idx = [k for k, q in enumerate(c.questions) if q.family == fam]
            if idx:
                result.results.append(
                    judge_family(
                        c.id,
                        c.edit.strategy,
                        fam,
                        [c.questions[k] for k in idx],
                        [ans[k] for k in idx],
                        opts.rule,
                        c.caption,
                        [jts[k] for k in idx] if opts.judge else None,
                    )
                )
    result.metrics = attack_metrics(result.results)
    result.report = _write_report(out, result, opts)
    return result


def _write_report(out: Path, result: ManipulateResult, opts: ManipulateOptions) -> Path:
    cases = {
        c.id: {
            "strategy": c.edit.strategy,
            "image_id": c.image_id,
            "tasks": c.tasks,
            "source_image_id": c.edit.scene.image_id,
            "target": c.edit.target,
            "asked": c.edit.asked,
            "prior": c.choice.prior,
            "prior_answer": c.choice.answer,
            "caption": c.caption,
            "object_description": c.desc,
        }
        for c in result.cases
    }
    families = [
        {
            "case": r.case_id,
            "strategy": r.strategy,
            "family": r.family,
            "by_correctness": r.by_correctness,
            "by_consistency": r.by_consistency,
            "first_induced": r.first_induced,
            "questions": [
                {
                    "level": it.question.level,
                    "template_id": it.question.template_id,
                    "question": it.question.text,
                    "truth": it.question.truth,
                    "answer": it.answer,
                    "verdict": it.verdict,
                    "conflicts": it.conflicts,
                    **({"unjudged": True} if it.unjudged else {}),
                }
                for it in r.items
            ],
        }
        for r in result.results
    ]
    data = {
        "victim": opts.llm.model,
        "judge": opts.judge,
        "rule": opts.rule,
        "prior": opts.prior,
        "strategies": list(opts.strategies),
        "metrics": result.metrics,
        "cases": cases,
        "families": families,
        "skipped": result.skipped,
        "discarded_edits": result.discarded,
        "failed_requests": result.failed,
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / REPORT, json.dumps(data, indent=1, ensure_ascii=False))
    return out / REPORT
