"""The reference server's repositories, as Multica's server hands them to a daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from daemon.server.repos import repos_version
from daemon.server.serve import running_server
from daemon.server.store import Store
from tests.daemon.server.helpers import claim_http, register
from tests.helpers import TOKEN, server_client

pytestmark = pytest.mark.anyio

APP = "https://github.com/org/app.git"
LIB = "https://github.com/org/lib.git"


@pytest.fixture
async def client(db_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    server = running_server(db_path, token=TOKEN, repos=(APP, APP, " "))
    async with server as url, server_client(url) as http:
        yield http


async def test_register_and_the_repos_route_name_the_workspaces_list(
    client: httpx.AsyncClient,
) -> None:
    """The configured list, once each, with Go's version hash; 404 for an unknown workspace."""
    registered = await client.post(
        "/api/daemon/register",
        json={"workspace_id": "default", "daemon_id": "d1", "runtimes": [{"type": "claude"}]},
    )
    listed = await client.get("/api/daemon/workspaces/default/repos")
    repos = [{"url": APP, "description": ""}]
    assert registered.json()["repos"] == listed.json()["repos"] == repos
    assert listed.json()["repos_version"] == repos_version(repos)
    assert len(repos_version(repos)) == 64
    assert (await client.get("/api/daemon/workspaces/nope/repos")).status_code == 404


async def test_a_claim_carries_the_tasks_repos_else_the_workspaces(
    client: httpx.AsyncClient, db_path: Path
) -> None:
    """`submit --repo` repos (with a ref) come with the task; without them, the workspace's."""
    own = {"prompt": "p", "repos": [{"url": LIB, "ref": "v2"}]}
    assert (await client.post("/api/tasks", json=own)).status_code == 201
    assert (await client.post("/api/tasks", json={"prompt": "q"})).status_code == 201
    bad = await client.post("/api/tasks", json={"prompt": "r", "repos": [{"url": ""}]})
    assert bad.status_code == 400
    store = Store(db_path)
    try:
        runtime = register(store)["claude"]
    finally:
        store.close()
    first, second = await claim_http(client, "d1", [runtime], 2)
    assert first["repos"] == [{"url": LIB, "ref": "v2"}]
    assert second["repos"] == [{"url": APP, "description": ""}]
