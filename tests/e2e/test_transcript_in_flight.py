"""A run that ends while its transcript batch is on its way: Multica stores every batch it takes
(no `(task, seq)` dedupe), so that batch must not be sent again by the final flush."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from backends.scripted import Script
from tests.fakes.multica_server import multica_server
from tests.helpers import running_daemon

pytestmark = pytest.mark.anyio


async def test_an_agent_exiting_while_a_batch_waits_for_its_answer_stores_each_seq_once(
    tmp_path: Path,
) -> None:
    """The first batch's answer takes 2.5 s; the agent exits 1 s after its first line."""
    async with multica_server() as fake, running_daemon(tmp_path, fake.url):
        fake.slow_answers("messages", 2.5)
        script = Script().text("one").sleep(1.0).text("two").result("done")
        task_id = fake.queue_chat(script.dumps())
        await fake.finished(task_id, within=30)
        seqs = Counter(m["seq"] for m in fake.messages_of(task_id))
    assert sorted(seqs) == [1, 2]
    assert set(seqs.values()) == {1}, f"seqs stored more than once: {seqs}"
