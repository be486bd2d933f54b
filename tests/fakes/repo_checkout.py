"""Real git repositories for the checkout tests, and an agent that checks out as `multica` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git as a test's own tool (not the daemon's runner); its stdout."""
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_origin(root: Path, name: str = "app", branches: dict[str, str] | None = None) -> str:
    """A bare repository `<root>/<name>.git` whose `main` has README.md saying `main`, plus one
    branch per `branches` entry (name → README text); its `file://` URL."""
    seed = root / f"{name}-seed"
    seed.mkdir(parents=True)
    git("init", "--quiet", "--initial-branch=main", cwd=seed)
    (seed / "README.md").write_text("main\n")
    git("add", "README.md", cwd=seed)
    git("commit", "--quiet", "-m", "first", cwd=seed)
    for branch, text in (branches or {}).items():
        git("checkout", "--quiet", "-b", branch, "main", cwd=seed)
        (seed / "README.md").write_text(text + "\n")
        git("commit", "--quiet", "-am", branch, cwd=seed)
    git("checkout", "--quiet", "main", cwd=seed)
    bare = root / f"{name}.git"
    git("clone", "--quiet", "--bare", str(seed), str(bare))
    return f"file://{bare}"


# A `command` agent that calls `POST /repo/checkout` exactly as `multica repo checkout <url>`
# does (cmd_repo.go): its environment's port, ids and token, its working directory, the same
# body and headers, and a retry on 503 + `X-Multica-Retryable: repo-busy` after `Retry-After`.
# `CHECKOUT_CALLS` lists the calls, each {"url", "ref"?, "body"?: overrides, "headers"?,
# "method"?, "cwd"?: absolute, or made under the work dir}; `CHECKOUT_FIRST` is Python run
# before them, `CHECKOUT_THEN` after them (with `answers` and `report` in scope).
CHECKOUT_AGENT = r"""
import json, os, subprocess, sys, time, urllib.error, urllib.request
sys.stdin.read()

def checkout(url, ref="", body=None, headers=None, method="POST", cwd=None):
    if cwd and not os.path.isabs(cwd):
        cwd = os.path.join(os.getcwd(), cwd)
        os.makedirs(cwd, exist_ok=True)
    sent = {
        "url": url,
        "workspace_id": os.environ.get("MULTICA_WORKSPACE_ID", ""),
        "workdir": cwd or os.getcwd(),
        "ref": ref,
        "agent_name": os.environ.get("MULTICA_AGENT_NAME", ""),
        "task_id": os.environ.get("MULTICA_TASK_ID", ""),
        "checkout_mode": os.environ.get("MULTICA_REPO_CHECKOUT_MODE", "").strip(),
        "retry_busy": True,
    }
    sent.update(body or {})
    head = {"Content-Type": "application/json",
            "Authorization": "Bearer " + os.environ["MULTICA_TOKEN"]}
    head.update(headers or {})
    head = {k: v for k, v in head.items() if v is not None}
    payload = sent["raw"].encode() if "raw" in sent else json.dumps(sent).encode()
    port = os.environ["MULTICA_DAEMON_PORT"]
    while True:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/repo/checkout", data=payload, method=method, headers=head)
        try:
            with urllib.request.urlopen(request, timeout=300) as answer:
                return {"status": answer.status, **json.loads(answer.read())}
        except urllib.error.HTTPError as refused:
            text = refused.read().decode()
            if refused.code == 503 and refused.headers.get("X-Multica-Retryable") == "repo-busy":
                time.sleep(int(refused.headers.get("Retry-After") or 1))
                continue
            return {"status": refused.code, "error": text}

exec(os.environ.get("CHECKOUT_FIRST", ""))
answers = [checkout(**call) for call in json.loads(os.environ.get("CHECKOUT_CALLS", "[]"))]
report = {"answers": answers, "cwd": os.getcwd()}
exec(os.environ.get("CHECKOUT_THEN", ""))
print(json.dumps({"type": "result", "output": json.dumps(report)}), flush=True)
"""


def checkout_agent(tmp_path: Path) -> dict[str, str]:
    """Daemon settings whose `command` backend is the checkout agent."""
    agent = tmp_path / "checkout_agent.py"
    agent.write_text(CHECKOUT_AGENT)
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}


def calls(*entries: dict[str, Any], first: str = "", then: str = "") -> dict[str, str]:
    """An agent's `custom_env` asking for these checkout calls (and code to run before and
    after them)."""
    return {
        "CHECKOUT_CALLS": json.dumps(list(entries)),
        "CHECKOUT_FIRST": first,
        "CHECKOUT_THEN": then,
    }
