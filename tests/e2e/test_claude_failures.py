"""The real Claude Code CLI meeting the API's real failures, through the daemon, against the
Multica-faithful server: the reason sent, the session on the `fail`, whether the next claim
resumes it, the server's retry of a dropped stream, and the usage body.

One daemon serves every case in turn (each costs one short CLI run, not a daemon start), and
the CLI's own retries are cut to what each case needs (`CLAUDE_CODE_MAX_RETRIES`).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from daemon.protocol.failure_text import API_INVALID_REQUEST, classify, poisoned
from tests.fakes.anthropic_api import (
    BAD_KEY,
    CREDIT_BALANCE,
    NO_MODEL,
    OVERLOADED,
    PROMPT_TOO_LONG,
    USAGE,
    Cut,
    Stall,
    Text,
    ToolUse,
    claude_env,
    fake_anthropic,
    rate_limited,
)
from tests.fakes.multica_routes import FakeTask
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.fakes.real_cli import InstalledCli
from tests.helpers import eventually, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

MODEL = "claude-opus-5-5"
CAPACITY = "agent_error.provider_capacity_or_rate_limit"


def fail_body(fake: MulticaFake, task_id: str) -> dict[str, Any]:
    (body,) = [r.body for r in fake.seen("fail") if task_id in r.path]
    assert isinstance(body, dict)
    return body


def go_text_reason(error: str) -> str:
    return API_INVALID_REQUEST if poisoned(error) else classify(error)


async def test_each_api_failure_reaches_the_server_named_with_its_session(
    claude_cli: InstalledCli,
    tmp_path: Path,
) -> None:
    """Rate limit, full context, credit, key, model, dropped stream and a recovered overload,
    one after another: each `fail` names the reason the CLI's fields give (where the text
    alone would say otherwise) and carries the session; a rate-limited session is resumed by
    the next claim, a full one is not; the dropped stream is retried by the server, resuming;
    usage is reported before the terminal call, for a cancelled run too."""
    agent = {"id": str(uuid.uuid4())}
    issue, credit_issue, key_issue, model_issue, cut_issue, busy_issue, slow_issue = (
        str(uuid.uuid4()) for _ in range(7)
    )
    # Each issue's turns get their own answers (its id is in the prompt), in order.
    by_issue = {
        issue: [
            # The context is full. On a fresh session: the CLI would compact a longer one.
            PROMPT_TOO_LONG,
            Text("A fresh start."),  # the follow-up, not resumed
            rate_limited(),  # 429 tokens per minute, in the follow-up's session
            Text("Resumed after the limit."),  # the next follow-up, resumed
        ],
        credit_issue: [ToolUse("true"), CREDIT_BALANCE],  # a turn spent, then refused
        key_issue: [BAD_KEY],
        model_issue: [NO_MODEL],  # streamed, then once more without streaming
        # The stream drops on the try, the CLI's retry and its unstreamed ask; the server's
        # retry resumes the session and is answered.
        cut_issue: [Cut(until_resumed=True)],
        busy_issue: [OVERLOADED, OVERLOADED, Text("Made it.")],  # the CLI's third try answers
        # Cancelled while its tool runs (or, should the tool end first, its next turn stalls).
        slow_issue: [ToolUse("sleep 30 && echo slept"), Stall()],
    }

    def patient(retries: int) -> dict[str, Any]:
        return {**agent, "custom_env": {"CLAUDE_CODE_MAX_RETRIES": str(retries)}}

    async with (
        fake_anthropic(by_marker=by_issue) as api,
        multica_server() as fake,
        running_daemon(
            tmp_path,
            fake.url,
            base_env=claude_env(api.url, tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="0"),
            MULTICA_CLAUDE_PATH=claude_cli.path,
            MULTICA_SCRIPTED_BACKEND="0",
        ) as d,
    ):

        async def run(issue_id: str, **options: Any) -> FakeTask:
            options.setdefault("agent", agent)
            return await fake.finished(fake.queue_issue(issue_id, provider="claude", **options))

        full = await run(issue)
        fresh = await run(issue)
        limited = await run(issue)
        resumed = await run(issue)
        credit, key, model = await run(credit_issue), await run(key_issue), await run(model_issue)
        cut = await run(cut_issue, agent=patient(1))
        await eventually(lambda: len(fake.tasks) == 9, within=10)
        (retry,) = [t for t in fake.tasks.values() if t.parent_id == cut.id]
        retry = await fake.finished(retry.id)
        recovered = await run(busy_issue, agent=patient(2))
        cancelled = fake.queue_issue(slow_issue, provider="claude", agent=agent)
        await eventually(
            lambda: any(m["type"] == "tool_use" for m in fake.messages_of(cancelled)), within=30
        )
        fake.cancel(cancelled)
        await eventually(lambda: fake.tasks[cancelled].cancel_acks == 1, within=30)
        tokens = d.metrics.tokens
    # What each `fail` said, and what the text alone would have said.
    sent = {
        "rate limit": (limited, CAPACITY, "agent_error.context_overflow"),
        "prompt too long": (full, "agent_error.context_overflow", "agent_error.context_overflow"),
        "credit balance": (
            credit,
            "agent_error.provider_quota_limit",
            "agent_error.provider_quota_limit",
        ),
        "401": (key, "agent_error.provider_auth_or_access", "agent_error.provider_auth_or_access"),
        "404 model": (
            model,
            "agent_error.model_not_found_or_unavailable",
            "agent_error.provider_auth_or_access",
        ),
        "stream cut": (cut, "agent_error.provider_network", "agent_error.unknown"),
    }
    for case, (task, reason, by_text) in sent.items():
        body = fail_body(fake, task.id)
        assert (case, task.status, body["failure_reason"]) == (case, "failed", reason)
        assert body["session_id"] and body["work_dir"], case
        assert go_text_reason(body["error"]) == by_text, case
    # The full session is retired, the rate-limited one resumed.
    assert fresh.claimed and "prior_session_id" not in fresh.claimed
    assert fresh.status == "completed" and fresh.session_id != full.session_id
    assert limited.session_id == fresh.session_id
    assert resumed.claimed and resumed.claimed["prior_session_id"] == limited.session_id
    assert resumed.status == "completed" and resumed.session_id == limited.session_id
    turns = api.main_requests()
    assert turns[1].n_messages == turns[0].n_messages  # the follow-up started afresh
    assert turns[3].n_messages > turns[0].n_messages  # the resumed one carried the history
    # The dropped stream: Multica's retry resumed its session and finished the work.
    assert retry.claimed and retry.claimed["prior_session_id"] == cut.session_id
    assert (retry.attempt, retry.status, retry.session_id) == (2, "completed", cut.session_id)
    assert retry.output == Text().text
    # 529 twice then an answer: the CLI recovered by itself; its usage went first.
    assert recovered.status == "completed" and recovered.output == "Made it."
    routes = [r.route for r in fake.requests if recovered.id in r.path]
    assert routes.index("usage") < routes.index("complete")
    assert fake.usage[(recovered.id, "claude", MODEL)] == {
        "provider": "claude",
        "model": MODEL,
        "input_tokens": USAGE["input_tokens"],
        "output_tokens": USAGE["output_tokens"],
        "cache_read_tokens": USAGE["cache_read_input_tokens"],
        "cache_write_tokens": USAGE["cache_creation_input_tokens"],
    }
    # A failed run's usage is reported before its `fail`; a cancelled one's (its assistant
    # messages so far) before the ack.
    routes = [r.route for r in fake.requests if credit.id in r.path]
    assert routes.index("usage") < routes.index("fail")
    assert fake.usage[(credit.id, "claude", MODEL)]["input_tokens"] == USAGE["input_tokens"]
    routes = [r.route for r in fake.requests if cancelled in r.path]
    assert routes.index("usage") < routes.index("cancel-ack")
    spent = fake.usage[(cancelled, "claude", MODEL)]
    assert (spent["input_tokens"], spent["cache_read_tokens"]) == (100, 7)
    assert tokens.labels("claude", MODEL, "cache_read")._value.get() > 0
