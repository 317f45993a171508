"""The price table (USD per million tokens or per image) and the cost budget that enforces `max_cost`.

Reads the built-in `PRICES`, updated by an optional JSON file of the same shape (`--prices FILE`);
writes nothing. `Budget` reserves an estimate before each request (the mean real cost once there is
one) and settles it with the real cost from the reported usage, so spending stops at the cap; a
request dearer than the estimate can pass it by the difference. One `Budget` may be shared by
several clients (eval's models and judge) so that the cap holds for the whole run.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from vhmine.errors import CostCapError, InputError

# USD per million tokens ("input", "output") or per image ("image"). Public list prices as of 2025;
# they change: pass --prices FILE (same shape) to override or add models. Matched by longest prefix.
PRICES: dict[str, dict[str, float]] = {
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4-turbo": {"input": 10.00, "output": 30.00},
    "gpt-4-vision-preview": {"input": 10.00, "output": 30.00},
    "o4-mini": {"input": 1.10, "output": 4.40},
    "dall-e-3": {"image": 0.040},
    "dall-e-2": {"image": 0.020},
    "gpt-image-1": {"image": 0.042},
}
_IMAGE_TOKENS_GUESS = 1000  # tokens one image may cost, for the reservation before the answer is known


def load_prices(path: Path | None = None) -> dict[str, dict[str, float]]:
    """The built-in price table, updated by a JSON file of the same shape."""
    table = {k: dict(v) for k, v in PRICES.items()}
    if path is None:
        return table
    try:
        extra = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise InputError(
            f"cannot read price table {path}: {err}; give a JSON object "
            '{"model": {"input": USD per 1M tokens, "output": ..., "image": USD per image}}'
        ) from None
    if not isinstance(extra, dict):
        raise InputError(f"price table {path} is not a JSON object of models")
    for model, entry in extra.items():
        if (
            not isinstance(entry, dict)
            or not set(entry) <= {"input", "output", "image"}
            or not all(isinstance(v, (int, float)) for v in entry.values())
        ):
            raise InputError(
                f"price table {path}: entry {model!r} must be an object with numeric "
                "'input', 'output' and/or 'image' (USD per 1M tokens / per image)"
            )
        table[model] = {k: float(v) for k, v in entry.items()}
    return table


def price_of(model: str, table: dict[str, dict[str, float]]) -> dict[str, float] | None:
    """The entry whose name is the longest prefix of `model` ("gpt-4o-2024-08-06" -> "gpt-4o")."""
    names = [n for n in table if model == n or model.startswith(n + "-") or model.startswith(n + ":")]
    return table[max(names, key=len)] if names else None


class Budget:
    """Spending so far plus reservations for requests in flight, against an optional cap."""

    def __init__(self, cap: float | None):
        self.cap = cap
        self.spent = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()
        self._costs: list[float] = []

    def reserve(self, estimate: float) -> float:
        with self._lock:
            if self._costs:  # the mean of real costs beats a guess once there are some
                estimate = sum(self._costs) / len(self._costs)
            if self.cap is not None and self.spent + self._reserved + estimate > self.cap + 1e-12:
                raise CostCapError(
                    f"cost cap reached: ${self.spent:.4f} spent, ${self._reserved:.4f} in flight, the next request "
                    f"would add about ${estimate:.4f}, past --max-cost ${self.cap:.4f}; rerun with a higher "
                    "--max-cost to continue (answers so far are cached)"
                )
            self._reserved += estimate
            return estimate

    def settle(self, reserved: float, cost: float, *, answered: bool = True) -> None:
        """Swap a reservation for the real cost; `answered=False` (a failed request) costs nothing."""
        with self._lock:
            self._reserved -= reserved
            if answered:
                self.spent += cost
                self._costs.append(cost)
