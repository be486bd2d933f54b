"""Multica's rules over a failed task's error text: its classifier, and which sessions it will
not resume.

A `fail` without a `failure_reason` gets one from its error text, the way the Multica server
does it (`taskfailure.Classify`, called by `TaskService.FailTask`): the first matching rule
wins, in the order below, and an error nothing matches is `agent_error.unknown`. Multica's own
daemon looks first for an API 400 that poisons the conversation (`classifyPoisonedError`), and
its server never resumes a session whose last run failed for one of `RESUME_UNSAFE`
(`GetLastTaskSession`, `ResumeUnsafeFailure`).
"""

from __future__ import annotations

import re

UNKNOWN = "agent_error.unknown"
API_INVALID_REQUEST = "api_invalid_request"

RESUME_UNSAFE = frozenset(
    {
        "iteration_limit",
        "agent_fallback_message",
        API_INVALID_REQUEST,
        "codex_semantic_inactivity",
        "agent_error.context_overflow",
        "codex_resume_oversized",
    }
)
"""Failures that poison the conversation itself: resuming it would replay the same failure."""

_EMPTY_CONTENT = re.compile(
    r"must not be empty|must be non-?empty|must have non-?empty|non-?empty content"
    r"|cannot be empty|should not be empty",
    re.IGNORECASE,
)
_HISTORY_LOCATOR = re.compile(
    r"role[^a-z0-9]{0,2}assistant|assistant message|message at position|messages\.[0-9]"
    r"|messages\[[0-9]",
    re.IGNORECASE,
)
_AUTH_UNRESOLVED = "could not resolve authentication method"

_AUTH_CODE = re.compile(r"(^|[^0-9])(401|403)([^0-9]|$)")
_QUOTA_CODE = re.compile(r"(^|[^0-9])402([^0-9]|$)")
_CAPACITY_CODE = re.compile(r"(^|[^0-9])(429|529)([^0-9]|$)")
_SERVER_CODE = re.compile(r"(^|[^0-9])5[0-9][0-9]([^0-9]|$)")


def _any(*phrases: str) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(p) for p in phrases))


def _both(first: str, second: str) -> re.Pattern[str]:
    a, b = re.escape(first), re.escape(second)
    return re.compile(f"{a}.*{b}|{b}.*{a}", re.DOTALL)


# (reason, patterns): a reason applies when any of its patterns is found in the lower-cased text.
_RULES: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    (
        "agent_error.context_overflow",
        (
            _any(
                "context length",
                "context_length_exceeded",
                "maximum context",
                "prompt is too long",
                "context size has been exceeded",
                "context window limit",
                "model_context_window_exceeded",
                "prompt_too_long",
            ),
            _both("token", "limit"),
        ),
    ),
    (
        "agent_error.missing_config",
        (
            _any("missing environment variable", "no llm provider configured"),
            _any("no provider configured"),
            _both("missing", "api_key"),
            _both("api key", "required"),
        ),
    ),
    (
        "agent_error.provider_auth_or_access",
        (
            _AUTH_CODE,
            _any(
                "unauthorized",
                "login required",
                "not logged in",
                "please login again",
                "refresh token",
                "invalid api key",
                "access token",
                "subscription access",
                "does not have access",
                "you may not have access",
            ),
        ),
    ),
    (
        "agent_error.provider_quota_limit",
        (
            _QUOTA_CODE,
            _any(
                "insufficient_balance",
                "balance is too low",
                "monthly usage limit",
                "usage limit",
                "you've hit your limit",
                "you\u2019ve hit your limit",
                "credits",
                "quota",
            ),
        ),
    ),
    (
        "agent_error.provider_capacity_or_rate_limit",
        (_CAPACITY_CODE, _any("rate limit", "overloaded", "no capacity available")),
    ),
    (
        "agent_error.provider_server_error",
        (
            _any(
                "server had an error",
                "provider returned error",
                "internal error",
                "service unavailable",
                "bad gateway",
            ),
            _SERVER_CODE,
        ),
    ),
    (
        "agent_error.provider_network",
        (
            _any(
                "stream disconnected",
                "opencode stream ended",
                "connection closed",
                "mid-response",
                "error sending request",
                "unable to connect",
                "dial tcp",
                "connection refused",
                "connectionrefused",
                "dns",
                "i/o timeout",
                "deadline exceeded",
                "timeout exceeded while awaiting",
            ),
        ),
    ),
    (
        "agent_error.model_not_found_or_unavailable",
        (
            _both("model", "not found"),
            _any("unknown model", "selected model", "http 404", "404 page not found"),
        ),
    ),
    (
        "agent_error.empty_or_unparseable_output",
        (_any("returned empty output", "returned no parseable output"),),
    ),
    ("agent_error.agent_timeout", (_any("timed out after"),)),
    (
        "agent_error.runtime_missing_executable",
        (_any("executable not found", "exec format error"),),
    ),
    (
        "agent_error.runtime_version_unsupported",
        (_any("below the minimum supported version", "requires a newer version"),),
    ),
    (
        "agent_error.process_failure",
        (
            _any(
                "exit status",
                "signal",
                "panic",
                "sigsegv",
                "process exited",
                "start codex:",
                "pipe has been ended",
                "file already closed",
                "initialize failed",
            ),
        ),
    ),
)


def classify(error: str) -> str:
    """The taxonomy reason for this error text (`agent_error.unknown` when nothing matches)."""
    text = error.strip().lower()
    if not text:
        return UNKNOWN
    for reason, patterns in _RULES:
        if any(p.search(text) for p in patterns):
            return reason
    return UNKNOWN


def poisoned(error: str) -> bool:
    """Whether the API refused the conversation itself (Go's `classifyPoisonedError`): an
    oversized image, an Anthropic 400 `invalid_request_error`, or an empty message in the
    history; every resume would replay the same refusal."""
    text = error.lower()
    if "image dimensions exceed max allowed size" in text and "image.source.base64.data" in text:
        return True
    if "invalid_request_error" in text and "400" in text:
        return True
    return bool(_EMPTY_CONTENT.search(error) and _HISTORY_LOCATOR.search(error))


def resume_unsafe(reason: str, error: str) -> bool:
    """Whether a run that failed with `reason` and `error` must not be resumed (Go's
    `ResumeUnsafeFailure`, the rule of its resume lookup)."""
    if reason in RESUME_UNSAFE:
        return True
    text = error.lower()
    if "400" in text and "invalid_request_error" in text:
        return True
    return _AUTH_UNRESOLVED in text or bool(
        _EMPTY_CONTENT.search(error) and _HISTORY_LOCATOR.search(error)
    )
