"""The language prior that picks which object to insert or remove: co-occurrence counts or a text-only LLM.

Reads the scenes' object names (vhmine.manipulate.scenes) and, for `--prior llm`, asks a text-only model
through vhmine.llm with the versioned prompt `manipulate_prior`; writes nothing (the chosen objects and
the prior's record go with each case). AutoHallusion asks the victim's language module; vhmine also
offers counts, so that a run needs no model to choose:

- abnormal insertion: the object least related to the scene (lowest mean P(object | scene object));
- paired insertion: the pair (a, b) absent from the scene with the highest P(b | a); a is inserted,
  b asked about;
- correlated removal: the scene object most implied by the others (highest mean P(o | other object)).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from vhmine import prompts as P
from vhmine.errors import InputError

PROMPT = "manipulate_prior"


@dataclass(frozen=True)
class Choice:
    objects: tuple[str, ...]  # abnormal/removal: (object,); paired: (inserted, asked-about)
    prior: str  # "counts" or "llm:<model> manipulate_prior@v1#..."
    score: float | None = None  # the counts' figure behind the choice
    answer: str | None = None  # the LLM's raw answer


class Cooccurrence:
    """Object and pair counts over the scenes of a collection."""

    def __init__(self, scenes_objects: Sequence[Sequence[str]]):
        self.n: Counter = Counter()
        self.pairs: Counter = Counter()
        for names in scenes_objects:
            uniq = sorted(set(names))
            self.n.update(uniq)
            self.pairs.update(itertools.permutations(uniq, 2))

    def p(self, b: str, given: str) -> float:
        """P(b in a scene | given in it)."""
        return self.pairs[(given, b)] / self.n[given] if self.n[given] else 0.0

    def relatedness(self, obj: str, scene: Sequence[str]) -> float:
        others = [s for s in scene if s != obj]
        return sum(self.p(obj, s) for s in others) / len(others) if others else 0.0

    def least_related(self, scene: Sequence[str], candidates: Sequence[str]) -> Choice | None:
        cands = sorted(c for c in set(candidates) if c not in scene)
        if not cands or not scene:
            return None
        best = min(cands, key=lambda c: (self.relatedness(c, scene), c))
        return Choice((best,), "counts", round(self.relatedness(best, scene), 6))

    def strongest_pair(self, scene: Sequence[str], insertable: Sequence[str]) -> Choice | None:
        pool = [(a, b) for (a, b) in self.pairs if a in insertable and a not in scene and b not in scene]
        if not pool:
            return None
        a, b = min(pool, key=lambda ab: (-self.p(ab[1], ab[0]), -self.pairs[ab], ab))
        return Choice((a, b), "counts", round(self.p(b, a), 6))

    def most_implied(self, scene: Sequence[str]) -> Choice | None:
        if len(scene) < 2:
            return None
        best = min(sorted(set(scene)), key=lambda o: (-self.relatedness(o, scene), o))
        return Choice((best,), "counts", round(self.relatedness(best, scene), 6))


def match_names(text: str, names: Sequence[str]) -> list[str]:
    """The names that `text` mentions (whole words, any case, plural 's' allowed), in the order it says them."""
    found = []
    low = (text or "").lower()
    for n in sorted(set(names), key=len, reverse=True):
        m = re.search(r"\b" + re.escape(n.lower()) + r"(e?s)?\b", low)
        if m:
            found.append((m.start(), n))
            low = low[: m.start()] + " " * (m.end() - m.start()) + low[m.end() :]  # "hot dog" hides "dog"
    return [n for _, n in sorted(found)]


def ask_texts(strategy: str, scene: Sequence[str], candidates: Sequence[str]) -> str:
    listed = ", ".join(sorted(set(candidates)))
    if strategy == "abnormal":
        return (
            f"A picture shows: {', '.join(scene)}. Which ONE object from this list is the least likely to appear "
            f"in such a picture: {listed}?"
        )
    if strategy == "paired":
        return (
            f"From this list, name the TWO objects that most often appear together in pictures, the first "
            f"of them then the second, separated by a comma: {listed}."
        )
    if strategy == "removal":
        return f"A picture shows: {listed}. Which ONE of these objects does such a scene imply the most?"
    raise InputError(f"unknown strategy {strategy!r}")


def llm_choices(
    llm, model: str, asks: Sequence[tuple[str, Sequence[str], Sequence[str]]], misses: dict | None = None
) -> list[Choice | None]:
    """One text-only request per (strategy, scene objects, candidates); an answer naming none of the
    candidates (or a failed request) gives None, and its reason goes into `misses` (index -> (failed, why))."""
    from vhmine.llm import ChatRequest

    prompt = P.load(PROMPT)
    reqs = [
        ChatRequest(prompt.render(ask=ask_texts(st, scene, cands)), model=model, params={"temperature": 0.0})
        for st, scene, cands in asks
    ]
    out: list[Choice | None] = [None] * len(reqs)
    misses = {} if misses is None else misses
    for o in llm.chat_iter(reqs, desc="prior"):
        if not o.ok:
            misses[o.index] = (True, f"the prior model's request failed: {o.reason}")
            continue
        st, scene, cands = asks[o.index]
        pool = [c for c in cands if c not in scene] if st != "removal" else list(cands)
        said = match_names(o.answer.text, pool)
        need = 2 if st == "paired" else 1
        if len(said) >= need:
            out[o.index] = Choice(tuple(said[:need]), f"llm:{model} {prompt.id}", None, o.answer.text.strip()[:200])
        else:
            misses[o.index] = (
                False,
                f"the prior model's answer names {'fewer than two' if need == 2 else 'none'} "
                f"of the candidates: {' '.join(o.answer.text.split())[:80]!r}",
            )
    return out
