"""The image calls of `LLM`: generation (`images.generate`) and editing (`images.edit`, image + mask).

Reads PNG bytes and prompts from `ImageRequest` / `ImageEditRequest`; writes answers and failures to
the request cache, as chat does. Both go through the client's one path (`LLM._send`: retries with
jitter, the cost cap, the stop on a fatal error; `_cached_or_claim`: single-flight of identical
requests). An answer that is not a readable image is retried, then fails as malformed, and is never
cached. An edit's cache key holds the sha256 of the image and of the mask, never the bytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence

from vhmine.errors import LLMError
from vhmine.llm.cache import legacy_request_key, request_key
from vhmine.llm.records import ImageAnswer, ImageEditRequest, ImageRequest, Outcome
from vhmine.llm.stops import checked_body


class ImageCalls:
    """Mixed into `LLM`: needs its opts, endpoint, cache, stats, budget, `_send`, `_cost` and single-flight."""

    def image(self, req: ImageRequest) -> ImageAnswer:
        """Generate one image (cached); raises LLMError on failure."""
        model = req.model or self.opts.model
        params = {"size": req.size, **req.params}
        payload = {"prompt": req.prompt, "variant": req.variant, "params": params}

        def call(client, extra):
            return client.images.with_raw_response.generate(model=model, prompt=req.prompt, n=1, **params, **extra)

        return self._image_request("image", model, payload, call, lambda: legacy_request_key("image", model, payload))

    def image_edit(self, req: ImageEditRequest) -> ImageAnswer:
        """Repaint the transparent part of `req.mask` in `req.image` (cached); raises LLMError on failure.

        The answer is the endpoint's whole picture, at the size it chose: the caller keeps its own pixels
        outside the mask (models repaint those too, slightly).
        """
        model = req.model or self.opts.model
        params = dict(req.params)
        payload = {"prompt": req.prompt, "image": _sha(req.image), "mask": _sha(req.mask), "params": params}

        def call(client, extra):
            return client.images.with_raw_response.edit(
                model=model,
                prompt=req.prompt,
                image=("image.png", req.image, "image/png"),
                mask=("mask.png", req.mask, "image/png"),
                n=1,
                **params,
                **extra,
            )

        return self._image_request("image_edit", model, payload, call, None)  # no key of an older vhmine to look under

    def _image_request(self, kind: str, model: str, payload: dict, call, legacy_key) -> ImageAnswer:
        """The steps both image calls share: the cache (and single-flight), else `call(client, extra)` sent."""
        key = request_key(kind, model, self.endpoint, payload)
        hit = self._cached_or_claim(key, legacy_key)
        if hit is not None:
            self.stats.add("cached")
            return _image_from(hit, model, key, cached=True)
        extra = {"response_format": "b64_json"} if model.startswith("dall-e") else {}  # gpt-image-* always sends b64
        return self._flights.sent(
            key, lambda: self._image_send(kind, model, key, payload, lambda client: call(client, extra))
        )

    def _image_send(self, kind: str, model: str, key: str, payload: dict, call) -> ImageAnswer:
        import PIL.Image  # noqa: F401  (the check of each answer needs it: imported here, not within a try's deadline)

        cost = self._cost(model, images=1)
        try:
            r, _attempts, reserved = self._send(kind, model, key, call, cost, lambda raw: _checked(raw.parse()))
        except LLMError as err:
            self.stats.add("failed")
            self.cache.fail(key, kind, model, self.endpoint, err.status, str(err), None)
            raise
        self.budget.settle(reserved, cost)
        d = r.data[0]
        record = {"b64": d.b64_json, "revised_prompt": getattr(d, "revised_prompt", None), "cost": cost}
        self.cache.put(key, kind, model, self.endpoint, payload, record, cost)
        return _image_from(record, model, key, cached=False)

    def image_iter(self, requests: Sequence[ImageRequest], desc: str = "images") -> Iterator[Outcome]:
        return self.run_many(self.image, requests, desc)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _checked(r):
    """The parsed answer, if it holds one readable b64_json image; else ValueError (retried, then malformed)."""
    r = checked_body(r)
    if not r.data or not getattr(r.data[0], "b64_json", None):
        raise ValueError("the answer holds no b64_json image")
    _check_image(r.data[0].b64_json)
    return r


def _check_image(b64: str) -> None:
    """ValueError unless `b64` is base64 of an image PIL can read (what `generate` will save)."""
    import binascii
    import io

    from PIL import Image

    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the b64_json image is not base64") from None
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
    except Exception:
        raise ValueError("the b64_json image cannot be decoded as a picture") from None


def _image_from(rec: dict, model: str, key: str, cached: bool) -> ImageAnswer:
    return ImageAnswer(
        base64.b64decode(rec["b64"]), model, key, 0.0 if cached else rec["cost"], cached, rec.get("revised_prompt")
    )
