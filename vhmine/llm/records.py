"""The records of model access: options, requests, answers and batch outcomes (frozen dataclasses).

Reads and writes nothing; `client` takes `LLMOptions` and requests and gives back `Answer`,
`ImageAnswer` and `Outcome`; `image_urls` fills in `SentImage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.errors import LLMError

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # the API's limit on one image, counted on the base64 text


@dataclass(frozen=True)
class LLMOptions:
    """How to reach models; one object shared by every request of a run."""

    model: str  # the default model of requests that name none
    base_url: str | None = None  # None: OPENAI_BASE_URL, else the OpenAI API
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 4
    retry_wait_s: float = 1.0  # the first back-off; doubled each retry, capped at max_wait_s, jittered
    max_wait_s: float = 30.0
    max_cost: float | None = None  # USD; None: no cap
    prices: Path | None = None  # JSON file {model: {"input": .., "output": .., "image": ..}}
    cache: Path | None = None  # None: VHMINE_LLM_CACHE, else data/llm-cache.db
    max_image_bytes: int = MAX_IMAGE_BYTES
    temperature: float = 0.0
    max_tokens: int = 512
    progress: bool = True


@dataclass(frozen=True)
class ChatRequest:
    prompt: str
    images: Sequence[Path | bytes] = ()
    system: str | None = None
    model: str | None = None  # None: LLMOptions.model
    params: dict = field(default_factory=dict)  # extra create() arguments (seed, top_p, ...), part of the key


@dataclass(frozen=True)
class ImageRequest:
    prompt: str
    model: str | None = None
    size: str = "1024x1024"
    variant: int = 0  # the n-th image of one prompt: part of the key, so N images are N requests
    params: dict = field(default_factory=dict)  # quality, style, ...


@dataclass(frozen=True)
class ImageEditRequest:
    """Repaint part of an image (`images.edit`): where `mask` (a PNG of the image's size) is transparent."""

    prompt: str  # what the whole picture should show after the edit
    image: bytes  # PNG
    mask: bytes  # PNG with alpha: alpha 0 = repaint, opaque = keep (OpenAI's convention)
    model: str | None = None
    params: dict = field(default_factory=dict)  # size, quality, ...


@dataclass(frozen=True)
class SentImage:
    """What was sent for one image (the original is identified by `sha256`)."""

    sha256: str
    sent_sha256: str
    mime: str
    width: int
    height: int
    bytes: int  # decoded size of what was sent
    action: str  # "as-is", "re-encoded" or "downscaled"


@dataclass(frozen=True)
class Answer:
    text: str
    model: str  # as asked; `served_model` is what the endpoint says answered
    key: str
    cost: float
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    served_model: str | None = None
    images: tuple[SentImage, ...] = ()


@dataclass(frozen=True)
class ImageAnswer:
    png: bytes  # the image bytes as the endpoint sent them
    model: str
    key: str
    cost: float
    cached: bool
    revised_prompt: str | None = None


@dataclass(frozen=True)
class Outcome:
    """One request's result in a batch: an answer, or the error that stopped it."""

    index: int
    answer: Answer | ImageAnswer | None = None
    error: LLMError | None = None

    @property
    def ok(self) -> bool:
        return self.answer is not None

    @property
    def status(self) -> str:
        return "ok" if self.ok else self.error.status

    @property
    def reason(self) -> str:
        return "" if self.ok else str(self.error)
