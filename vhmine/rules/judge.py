"""The LLM judge of open-ended answers: one prompt, one request builder, one verdict parser.

Reads the versioned prompt `judge_oeq` from `vhmine/prompts/`; writes nothing. The judge sees the
question, the reference answers and the model's answer (not the image), in the spirit of
HallusionBench's and AutoHallusion's teacher prompt, and answers correct, incorrect or unclear. probe
uses it for OEQ instances; eval can use the same three functions, so verdicts of both stages mean the
same thing. `judge_name` is what a record stores: the judge model and the prompt's id with its hash.
`judge_iter` is the one loop both stages run: it sends the requests through a vhmine.llm.LLM, so the
judge is any OpenAI-compatible server (OpenAI, vLLM, Ollama, LMDeploy: `--base-url`), and reads each
verdict with `parse_verdict`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from vhmine import prompts as P
from vhmine.llm import ChatRequest

PROMPT = "judge_oeq"
VERDICTS = ("correct", "incorrect", "unclear")
RESPONSE_VERDICT = {"correct": "correct", "incorrect": "hallucinated"}  # a store verdict; unclear: none
JUDGED_RIGHT = {"correct": True, "incorrect": False}  # eval's verdict on an open answer; unclear: none


def judge_prompt(version: int | None = None) -> P.Prompt:
    return P.load(PROMPT, version)


def judge_name(model: str, prompt: P.Prompt | None = None) -> str:
    """`llm:<model> judge_oeq@vN#sha8`: the judge column of a verdict."""
    return f"llm:{model} {(prompt or judge_prompt()).id}"


def judge_request(
    model: str, question: str, references: Sequence[str], answer: str, prompt: P.Prompt | None = None
) -> ChatRequest:
    """The text-only request that asks `model` to grade `answer` against `references`."""
    text = (prompt or judge_prompt()).render(question=question, references=" | ".join(references), answer=answer)
    return ChatRequest(text, model=model, params={"max_tokens": 8})


def parse_verdict(text: str) -> str | None:
    """The judge's first word if it is correct, incorrect or unclear (markdown and punctuation aside), else None."""
    words = (text or "").strip().lower().replace("*", "").split()
    first = words[0].strip(".,:;!\"'") if words else ""
    return first if first in VERDICTS else None


def judge_iter(
    llm,
    model: str,
    cases: Sequence[tuple[str, Sequence[str], str]],
    prompt: P.Prompt | None = None,
    desc: str | None = None,
) -> Iterator[tuple[int, object, str | None]]:
    """Ask `model` through `llm` (a vhmine.llm.LLM) to grade each (question, references, answer) case.

    Yields (case index, the request's Outcome, verdict) as answers arrive; verdict is correct, incorrect,
    unclear, or None when the request failed or the judge said something else.
    """
    prompt = prompt or judge_prompt()
    reqs = [judge_request(model, q, refs, ans, prompt) for q, refs, ans in cases]
    for out in llm.chat_iter(reqs, desc=desc or f"judge {model}"):
        yield out.index, out, (parse_verdict(out.answer.text) if out.ok else None)
