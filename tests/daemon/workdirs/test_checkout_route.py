"""The checkout route's own answers, called as the health port calls it (no daemon around)."""

from __future__ import annotations

import json
from pathlib import Path

from daemon.ops.metrics import Metrics
from daemon.protocol.models import RepoRef
from daemon.protocol.runtime_models import WorkspaceRepos
from daemon.workdirs.catalog import ActiveTask
from daemon.workdirs.checkout import CheckoutRoute
from daemon.workdirs.service import Workdirs
from tests.fakes.repo_checkout import make_origin

TOKEN = "mat_task"
HEADERS = {"host": "127.0.0.1:19514", "authorization": f"Bearer {TOKEN}"}


async def _never(workspace_id: str) -> WorkspaceRepos:
    raise AssertionError("the list is known; the server is not asked")


def _setup(tmp_path: Path) -> tuple[Workdirs, str, bytes]:
    url = make_origin(tmp_path / "o")
    env = {"PATH": "/usr/bin:/bin"}
    workdirs = Workdirs(tmp_path / "workspaces", env, _never, Metrics())
    workdirs.catalog.set_workspace("ws", [RepoRef(url=url)])
    work = tmp_path / "work"
    work.mkdir()
    workdirs.catalog.start(TOKEN, ActiveTask("ws", "task-1", "bot", work))
    body = {"url": url, "workspace_id": "ws", "task_id": "task-1", "workdir": str(work)}
    return workdirs, url, json.dumps({**body, "retry_busy": True}).encode()


def _counts(workdirs: Workdirs) -> dict[str, float]:
    """`repo_checkouts_total` by outcome, the ones still at 0 left out."""
    assert workdirs.metrics is not None
    found = workdirs.metrics.registry.collect()
    samples = [s for m in found if m.name == "agent_daemon_repo_checkouts" for s in m.samples]
    return {s.labels["outcome"]: s.value for s in samples if s.name.endswith("_total") and s.value}


def test_a_busy_repository_is_a_retryable_503(tmp_path: Path) -> None:
    """Past the wait for a cache another operation holds: 503, Retry-After, repo-busy."""
    workdirs, url, body = _setup(tmp_path)
    route = CheckoutRoute(workdirs, busy_wait=0.05)
    with workdirs.cache.locked(workdirs.cache.bare_path("ws", url), None):
        reply = route("POST", "127.0.0.1", HEADERS, body)
    assert reply.status == 503
    assert dict(reply.headers) == {"Retry-After": "2", "X-Multica-Retryable": "repo-busy"}
    assert reply.body == b"repository is busy with another operation; retry later\n"
    assert route("POST", "127.0.0.1", HEADERS, body).status == 200
    route("POST", "127.0.0.1", HEADERS, body)
    assert _counts(workdirs) == {"busy": 1, "created": 1, "kept": 1}


def test_only_a_process_on_this_host_is_answered(tmp_path: Path) -> None:
    """Another host's peer, even with the right token, gets a 403 before anything else."""
    workdirs, _, body = _setup(tmp_path)
    route = CheckoutRoute(workdirs)
    for peer in ("10.1.2.3", "::ffff:10.1.2.3"):
        assert route("POST", peer, HEADERS, body).status == 403
    assert route("PUT", "127.0.0.1", HEADERS, body).status == 405
    assert not (tmp_path / "work" / "o").exists() and not (tmp_path / "work" / "app").exists()
    assert _counts(workdirs) == {"refused": 3}


def test_an_isolated_request_gets_a_clone_of_its_own(tmp_path: Path) -> None:
    """`checkout_mode: isolated` (Multica's, for sandboxed agents) makes a clone, not a worktree."""
    workdirs, _, body = _setup(tmp_path)
    isolated = json.dumps({**json.loads(body), "checkout_mode": "isolated"}).encode()
    reply = CheckoutRoute(workdirs)("POST", "127.0.0.1", HEADERS, isolated)
    assert reply.status == 200
    assert (Path(json.loads(reply.body)["path"]) / ".git").is_dir()
