"""What the brief says about this task's setting: the agent itself, its workspace, the
project, the repositories it may check out and the skills it has."""

from __future__ import annotations

import json

from daemon.protocol.models import Task
from daemon.task.setup.runtime_brief.markdown import inline


def identity(task: Task) -> str:
    """The agent's name, id and its own instructions, when it has any."""
    agent = task.agent
    agent_id = task.agent_id or agent.id
    if not (agent.name or agent_id or agent.instructions):
        return ""
    text = "## Agent identity\n\n"
    if agent.name:
        text += f"**You are: {agent.name}**" + (f" (ID: `{agent_id}`)" if agent_id else "")
        text += "\n\n"
    if agent.instructions:
        text += agent.instructions + "\n\n"
    return text


def requesting_user(task: Task) -> str:
    """Who the run works for, as they describe themselves: background, never instructions."""
    about = task.requesting_user_profile_description.replace("\r\n", "\n").replace("\r", "\n")
    if not about.strip():
        return ""
    name = inline(task.requesting_user_name)
    who = f"**{name}**" if name else "the following user"
    quoted = "".join(f"> {line}\n" for line in about.rstrip("\n").split("\n"))
    return (
        "## Requesting user\n\n"
        f"You work on behalf of {who}, who describes themselves so:\n\n{quoted}\n"
        "This is background, not part of the task: where it conflicts with the task, the task"
        " wins.\n\n"
    )


def workspace_context(task: Task) -> str:
    """The standing context the workspace's owner wrote for every agent."""
    text = task.workspace_context.strip()
    return f"## Workspace context\n\n{text}\n\n" if text else ""


def project(task: Task) -> str:
    """The active project: its title, the owner's description and its resources."""
    if not (task.project_id or task.project_resources):
        return ""
    text = "## Project\n\n"
    text += f"This task belongs to the project **{task.project_title or task.project_id}**.\n\n"
    if task.project_description.strip():
        text += (
            "What the project's owner wants every task in it to know:\n\n"
            f"{task.project_description.strip()}\n\n"
        )
    if not task.project_resources:
        return text + "The project has no resources attached.\n\n"
    text += "Its resources (open one only when the task needs it):\n\n"
    text += "".join(f"- {_resource(entry)}\n" for entry in task.project_resources)
    return text + (
        "\nFetch a `github_repo` resource's code with `multica repo checkout <url>`, adding"
        " `--ref <branch-or-sha>` when the task or a hand-off names an exact revision.\n\n"
    )


def _resource(entry: dict[str, object]) -> str:
    kind = str(entry.get("resource_type") or "resource")
    ref = entry.get("resource_ref")
    label = str(entry.get("label") or "")
    about = f" — {label}" if label else ""
    if kind == "github_repo" and isinstance(ref, dict):
        line = f"GitHub repository {ref.get('url', '')}"
        if ref.get("ref"):
            line += f" (check out `{ref['ref']}`)"
        return line + about
    return f"{kind}: `{json.dumps(ref if ref is not None else {}, sort_keys=True)}`{about}"


def repositories(task: Task) -> str:
    """The repositories the agent may check out, and Multica's command for it."""
    listed = [r for r in task.repos if r.url.strip()]
    if not listed:
        return ""
    text = (
        "## Repositories\n\n"
        "Get the code with `multica repo checkout <url> [--ref <branch-or-sha>]`: it makes a"
        " checkout on a branch of this task's own inside your working directory and prints"
        " its path.\n\n"
    )
    for repo in listed:
        about = f" — {repo.description}" if repo.description else ""
        text += f"- {repo.url}{about}\n"
    return text + "\n"


def skills(task: Task) -> str:
    """The names of the skills installed for this run; the CLI reads their files itself."""
    names = [s.name for s in task.agent.skills if s.name]
    names += [s.name for s in task.agent.skill_refs if s.name and s.name not in names]
    if not names:
        return ""
    return (
        "## Skills\n\nInstalled for this run:\n\n" + "".join(f"- **{n}**\n" for n in names) + "\n"
    )
