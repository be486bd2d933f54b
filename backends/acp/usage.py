"""Token usage of one ACP turn, from the `session/prompt` answer, where the agent reports it.

ACP's own field is `usage` (`inputTokens` without the cached ones, `outputTokens`,
`cachedReadTokens`, `cachedWriteTokens`; OpenCode sends it). Gemini CLI reports per model
under `_meta.quota.model_usage` (`token_count.input_tokens`/`output_tokens`), and its total
under `_meta.quota.token_count`. An agent that reports neither has no usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.base import Usage
from backends.json_lines import int_field, str_field


def turn_usage(result: Mapping[str, Any], provider: str, model: str) -> tuple[Usage, ...]:
    """The usage a `session/prompt` answer reports, one entry per model."""
    usage = result.get("usage")
    if isinstance(usage, dict) and any(int_field(v) for v in usage.values()):
        return (
            Usage(
                provider=provider,
                model=model,
                input_tokens=int_field(usage.get("inputTokens")),
                output_tokens=int_field(usage.get("outputTokens")),
                cache_read_tokens=int_field(usage.get("cachedReadTokens")),
                cache_write_tokens=int_field(usage.get("cachedWriteTokens")),
            ),
        )
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, dict) else None
    if not isinstance(quota, dict):
        return ()
    per_model = [
        (str_field(entry.get("model")), entry.get("token_count"))
        for entry in quota.get("model_usage") or []
        if isinstance(entry, dict)
    ]
    if not per_model:
        per_model = [(model, quota.get("token_count"))]
    return tuple(
        Usage(
            provider=provider,
            model=name or model,
            input_tokens=int_field(counts.get("input_tokens")),
            output_tokens=int_field(counts.get("output_tokens")),
        )
        for name, counts in per_model
        if isinstance(counts, dict)
    )
