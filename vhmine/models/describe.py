"""Stage 5, describe: per mode, an MLLM explains the successful hallucinations and merges the
explanations into one description of what makes that mode fail.

Reads successes from the curation store (vhmine.models.probe.hallucinations: instance, image, question,
hallucinated answer, the error) and the versioned prompts in `vhmine/prompts/`; writes `descriptions`
rows: one "example" row per success and one "merged" row per mode. When a mode has fewer real
successes than `min_real`, hypothetical examples written by the model fill it up to `examples`, and
the merged row is marked `hypothetical`. Every row records its model and, in `sources`, the instance
and response ids it came from (examples) or its example ids (merged) plus the prompt it was made with
as `prompt:<name>@v<N>#<sha8>`. Row ids are the first 16 hex digits of the request's cache key, so a
rerun adds nothing and costs nothing. With `out`, each merged description is also written to
`<out>/<mode>.txt` (plus `descriptions.json`) for a user to edit before `vhmine generate --descriptions`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import prompts as P
from vhmine import rules as R
from vhmine.errors import InputError
from vhmine.files import atomic_write_text, check_writable, write_failed
from vhmine.llm import LLM, ChatRequest, LLMOptions
from vhmine.models.probe import Hallucination, hallucinations

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DescribeOptions:
    llm: LLMOptions
    modes: Sequence[str] | None = None  # None: all eight
    examples: int = 10  # successes explained and merged per mode (VHTest: about 10)
    min_real: int = 3  # fewer real successes than this: fill up with hypothetical ones
    victim: str | None = None  # only successes of this probed model; None: any model's
    out: Path | None = None  # also write the merged descriptions as editable text files


@dataclass
class ModeDescription:
    mode: str
    description_id: str | None = None
    real: int = 0
    hypothetical: int = 0
    failures: list[str] = field(default_factory=list)
    text: str = ""


@dataclass
class DescribeResult:
    model: str
    modes: list[ModeDescription] = field(default_factory=list)
    spent: float = 0.0
    sent: int = 0
    cached: int = 0
    files: Path | None = None

    @property
    def partial(self) -> bool:
        return any(m.failures or m.description_id is None for m in self.modes)

    def summary(self) -> str:
        lines = [
            f"describe with {self.model}: ${self.spent:.4f} spent, {self.sent} requests sent, "
            f"{self.cached} answers from the cache"
        ]
        for m in self.modes:
            made = f"description {m.description_id}" if m.description_id else "NO description"
            kind = (
                f"{m.real} real + {m.hypothetical} hypothetical examples"
                if m.hypothetical
                else f"{m.real} real examples"
            )
            lines.append(f"  {m.mode:<12} {made} from {kind}")
            lines += [f"    failed: {f}" for f in m.failures]
        if self.files:
            lines.append(f"editable copies in {self.files} (pass --descriptions {self.files} to vhmine generate)")
        if self.partial:
            lines.append("partial run: some examples or modes failed; rerun the same command to retry only those")
        return "\n".join(lines)


def _add_description(
    store, did: str, mode: str, kind: str, text: str, model: str, hypothetical: bool, sources: list[str]
) -> None:
    from vhmine import curate

    curate.stages.add_description(store, did, mode, kind, text, model, hypothetical, sources)


def describe(store, opts: DescribeOptions) -> DescribeResult:
    """One merged description per mode (see the module docstring)."""
    if opts.examples < 1 or opts.min_real < 0:
        raise InputError("--examples must be at least 1 and --min-real at least 0")
    modes = [R.get_mode(m) for m in (opts.modes or R.mode_names())]
    if opts.out is not None:
        check_writable(Path(opts.out), flag="--out")  # one line, before any model is asked
    p_ex, p_hyp, p_merge = P.load("describe_example"), P.load("describe_hypothetical"), P.load("describe_merge")
    model = opts.llm.model
    result = DescribeResult(model)
    with LLM(opts.llm) as llm:
        llm.check_prices([model])
        # examples of every mode in one concurrent batch: (mode, hallucination or None, request)
        jobs: list[tuple[R.Mode, Hallucination | None, ChatRequest]] = []
        per_mode: dict[str, ModeDescription] = {}
        for mode in modes:
            real = hallucinations(store, mode.name, opts.victim)[: opts.examples]
            md = per_mode[mode.name] = ModeDescription(mode.name, real=len(real))
            for h in real:
                jobs.append(
                    (
                        mode,
                        h,
                        ChatRequest(
                            p_ex.render(
                                mode=mode.name,
                                definition=mode.definition,
                                question=h.question,
                                references=" / ".join(h.references),
                                answer=h.answer,
                                error=h.error,
                            ),
                            images=[Path(h.image_path)],
                        ),
                    )
                )
            if len(real) < opts.min_real:
                md.hypothetical = opts.examples - len(real)
                for k in range(md.hypothetical):
                    jobs.append(
                        (
                            mode,
                            None,
                            ChatRequest(
                                p_hyp.render(
                                    mode=mode.name, definition=mode.definition, look_for=mode.look_for, number=k + 1
                                )
                            ),
                        )
                    )
        examples: dict[str, list[tuple[str, str, bool]]] = {m.name: [] for m in modes}  # (id, text, hypothetical)
        for out in llm.chat_iter([j[2] for j in jobs], desc=f"describe {model}"):
            mode, h, _ = jobs[out.index]
            what = f"example from instance {h.instance_id}" if h else "hypothetical example"
            if not out.ok:
                per_mode[mode.name].failures.append(f"{what}: {out.status}: {out.reason}")
                continue
            did = out.answer.key[:16]
            if h:
                sources = [h.instance_id, h.response_id, f"prompt:{p_ex.id}"]
            else:
                sources = [f"prompt:{p_hyp.id}"]
            _add_description(store, did, mode.name, "example", out.answer.text, model, h is None, sources)
            examples[mode.name].append((did, out.answer.text, h is None))
        llm.raise_if_stopped(f"describe {model}")  # no key, a rejected one, endpoint down: one line, not one per item
        merges = []
        for mode in modes:
            ex = sorted(examples[mode.name])  # by id: the merge prompt does not depend on finishing order
            if not ex:
                per_mode[mode.name].failures.append("no example description to merge")
                continue
            analyses = "\n\n".join(f"Analysis {i + 1}:\n{text.strip()}" for i, (_, text, _) in enumerate(ex))
            merges.append(
                (
                    mode,
                    ex,
                    ChatRequest(
                        p_merge.render(mode=mode.name, definition=mode.definition, count=len(ex), analyses=analyses)
                    ),
                )
            )
        for out in llm.chat_iter([m[2] for m in merges], desc="merge"):
            mode, ex, _ = merges[out.index]
            md = per_mode[mode.name]
            if not out.ok:
                md.failures.append(f"merge: {out.status}: {out.reason}")
                continue
            md.description_id, md.text = out.answer.key[:16], out.answer.text
            _add_description(
                store,
                md.description_id,
                mode.name,
                "merged",
                md.text,
                model,
                any(hyp for _, _, hyp in ex),
                [d for d, _, _ in ex] + [f"prompt:{p_merge.id}"],
            )
        llm.raise_if_stopped(f"describe {model}")
        result.modes = [per_mode[m.name] for m in modes]
        result.spent, result.sent, result.cached = llm.spent, llm.stats.sent, llm.stats.cached
    if opts.out is not None:
        try:
            result.files = write_description_files(opts.out, [m for m in result.modes if m.description_id])
        except OSError as err:  # a full disk, a folder made read-only meanwhile: one line, as the other stages say
            raise write_failed(
                Path(opts.out),
                err,
                "the descriptions are in the store",
                "free some space or choose another --out, and run the same command again (answers are cached)",
            ) from None
    return result


def write_description_files(folder: Path, descs: Sequence[ModeDescription]) -> Path:
    """`<mode>.txt` per description and `descriptions.json` (mode -> id and the sha256 of the text written),
    each by temp file and rename. A `<mode>.txt` that a user edited since vhmine wrote it (its sha256 is no
    longer the recorded one) is never overwritten: the new description goes to `<mode>.new.txt` and the
    manifest keeps the entry the edit was based on."""
    import hashlib

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    old = read_manifest(folder) if (folder / "descriptions.json").exists() else {}
    manifest = {}
    for d in descs:
        text = d.text.strip() + "\n"
        path = folder / f"{d.mode}.txt"
        if path.exists():
            now = path.read_text(encoding="utf-8")
            edited = hashlib.sha256(now.encode()).hexdigest() != (old.get(d.mode) or {}).get("sha256")
            if edited and now != text:
                atomic_write_text(folder / f"{d.mode}.new.txt", text)
                log.warning(
                    "%s was edited since vhmine wrote it: kept as it is; the new description is in %s",
                    path,
                    folder / f"{d.mode}.new.txt",
                )
                continue
        atomic_write_text(path, text)
        manifest[d.mode] = {
            "description_id": d.description_id,
            "file": f"{d.mode}.txt",
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
    atomic_write_text(folder / "descriptions.json", json.dumps({**old, **manifest}, indent=2, sort_keys=True) + "\n")
    return folder


def read_manifest(folder: Path) -> dict:
    try:
        return json.loads((Path(folder) / "descriptions.json").read_text())
    except (OSError, ValueError) as err:
        raise InputError(
            f"cannot read {Path(folder) / 'descriptions.json'}: {err}; write the folder with "
            "`vhmine describe --out FOLDER`"
        ) from None


def latest_descriptions(store, modes: Sequence[str]) -> dict[str, tuple[str, str]]:
    """mode -> (description id, text) of its newest merged description (ties broken by id)."""
    from vhmine import curate

    return curate.stages.latest_descriptions(store, modes)
