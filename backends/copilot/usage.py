"""A Copilot run's token usage, per model, from the one source that counts it best.

The CLI can report the same tokens three times over, so the sources are kept apart and one
is chosen at the end, never summed:

    session.shutdown    the session's totals per model (`modelMetrics`), full breakdown
    assistant.usage     one model call, full breakdown
    assistant.message   `outputTokens` only (older CLIs)

The session totals win on a fresh session (that session is this run). A resumed session's
totals include every earlier run's tokens, so a resumed run takes the per-call counts, else
the per-message ones: reporting less beats billing the same tokens once per run. The CLI's
`inputTokens` include the cached tiers; `input_tokens` here is what is left without them.
Current CLIs (1.0.77 and later) keep `assistant.usage` and `session.shutdown` off the JSON
output and no longer fill `outputTokens`: their runs report no usage at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.base import Usage
from backends.json_lines import int_field, str_field

PROVIDER = "copilot"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_PARTS = ("input", "output", "cache_read", "cache_write")

Counts = dict[str, dict[str, int]]
"""model → part → tokens."""


class CopilotUsage:
    """The three usage sources of one run, and the choice between them."""

    def __init__(self, resumed: bool) -> None:
        self.resumed = resumed
        self.calls: Counts = {}
        self.messages: Counts = {}
        self.totals: Counts = {}

    def add_call(self, model: str, data: Mapping[str, Any]) -> None:
        """One `assistant.usage` record (one model call)."""
        _add(self.calls, model, data)

    def add_message(self, model: str, output_tokens: int) -> None:
        """An `assistant.message`'s `outputTokens`."""
        _add(self.messages, model, {"outputTokens": output_tokens})

    def add_totals(self, metrics: Mapping[str, Any], model: str) -> None:
        """`session.shutdown`'s `modelMetrics` (`model` stands in for a nameless entry)."""
        for name, metric in metrics.items():
            usage = metric.get("usage") if isinstance(metric, dict) else None
            if isinstance(usage, dict):
                _add(self.totals, str(name) or model, usage)

    def report(self) -> tuple[Usage, ...]:
        """The best source this run produced, as one entry per model."""
        fresh = (self.totals, self.calls, self.messages)
        sources = (self.calls, self.messages) if self.resumed else fresh
        for counts in sources:
            if counts:
                return tuple(
                    Usage(
                        provider=PROVIDER,
                        model=model,
                        input_tokens=parts["input"],
                        output_tokens=parts["output"],
                        cache_read_tokens=parts["cache_read"],
                        cache_write_tokens=parts["cache_write"],
                    )
                    for model, parts in counts.items()
                )
        return ()


def _add(counts: Counts, model: str, data: Mapping[str, Any]) -> None:
    """Fold one record in; one that counts nothing opens no entry (and shadows no source)."""
    cache_read = max(0, int_field(data.get("cacheReadTokens")))
    cache_write = max(0, int_field(data.get("cacheWriteTokens")))
    output = max(0, int_field(data.get("outputTokens")))
    # Reasoning tokens are part of the output tokens already: not counted again.
    uncached = max(0, int_field(data.get("inputTokens")) - cache_read - cache_write)
    if not (uncached or output or cache_read or cache_write):
        return
    entry = counts.setdefault(str_field(model) or "copilot", dict.fromkeys(_PARTS, 0))
    for part, value in zip(_PARTS, (uncached, output, cache_read, cache_write), strict=True):
        entry[part] += value
