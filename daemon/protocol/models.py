"""Pydantic models of the daemon ⇄ server protocol: the lenient base every body shares, and the
bodies of a task (its claim, the task as claimed, its status); the runtime-level bodies
(registration, heartbeats, profiles) are in runtime_models.py.

Responses are read leniently: unknown fields are ignored, `null` where a string, list or map
is expected means "empty", and numbers in id fields become strings. A response that still does
not fit (a required field missing, a wrong type) fails validation for that one response only;
the client turns that into `MalformedResponseError`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _empty_text(value: Any) -> Any:
    return "" if value is None else value


def _empty_list(value: Any) -> Any:
    return [] if value is None else value


def _empty_map(value: Any) -> Any:
    return {} if value is None else value


def _zero(value: Any) -> Any:
    return 0 if value is None else value


def _false(value: Any) -> Any:
    return False if value is None else value


# Go servers send `null` for unset strings, slices and maps; all of them mean "empty" here.
Text = Annotated[str, BeforeValidator(_empty_text)]
Count = Annotated[int, BeforeValidator(_zero)]
TextList = Annotated[list[str], BeforeValidator(_empty_list)]
TextMap = Annotated[dict[str, str], BeforeValidator(_empty_map)]
Flag = Annotated[bool, BeforeValidator(_false)]

TERMINAL_STATUSES = ("completed", "failed", "cancelled")
"""Task statuses the daemon, its CLI and the embedded server agree on: a task in one of these
is finished, and nothing more is reported or run for it."""


class WireModel(BaseModel):
    """Base of every protocol body: unknown fields ignored, numeric ids read as strings.

    Each body's validator is built when the body is first read or written, not on import:
    built on import they cost start-up 35 ms of CPU, most of it for bodies no call needs
    before the first claim (tests/benchmarks/bench_startup.py)."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True, defer_build=True)


def _entries(*models: type[WireModel]) -> Any:
    """A list field read leniently: its objects kept (and bodies of `models` already read),
    anything else in it skipped, and a value that is no list read as empty, rather than failing
    the whole claim."""
    kinds: tuple[type, ...] = (dict, *models)

    def keep(value: Any) -> Any:
        return [v for v in value if isinstance(v, kinds)] if isinstance(value, list) else []

    return BeforeValidator(keep)


class RepoRef(WireModel):
    """A repository the server names for a workspace or a task; `ref` only in a claim."""

    url: Text = ""
    description: Text = ""
    ref: Text = ""


RepoList = Annotated[list[RepoRef], _entries(RepoRef)]


class SkillFile(WireModel):
    """A supporting file of an inline skill, at a path relative to the skill's directory."""

    path: Text = ""
    content: Text = ""


class Skill(WireModel):
    """An inline skill the agent is given: `SKILL.md` content plus supporting files (a bundle
    resolved from a `SkillRef` has the same shape, with its `source` and `hash`)."""

    id: Text = ""
    source: Text = ""
    name: Text = ""
    description: Text = ""
    hash: Text = ""
    content: Text = ""
    files: Annotated[list[SkillFile], BeforeValidator(_empty_list)] = Field(default_factory=list)


class SkillRef(WireModel):
    """A skill sent by reference (`skill-bundles-v1`): what to resolve, and the hash and
    size its bundle must have."""

    id: Text = ""
    source: Text = ""
    name: Text = ""
    description: Text = ""
    hash: Text = ""
    size_bytes: Count = 0
    file_count: Count = 0


def _mcp_object(value: Any) -> Any:
    return value if isinstance(value, dict) else None


class IssueStatus(WireModel):
    """One status of the workspace's own catalog, as the claim lists it."""

    key: Text = ""
    name: Text = ""
    category: Text = ""
    description: Text = ""


class DisabledRuntimeSkill(WireModel):
    """A skill of a runtime's CLI (one the Skills tab listed) the agent has turned off."""

    runtime_id: Text = ""
    provider: Text = ""
    root: Text = ""
    """Where it was found: `provider`, `universal` (`~/.agents/skills`) or `plugin`."""
    key: Text = ""
    name: Text = ""
    plugin: Text = ""


class Agent(WireModel):
    """The agent definition a task runs with."""

    id: Text = ""
    name: Text = ""
    instructions: Text = ""
    custom_env: TextMap = Field(default_factory=dict)
    custom_args: TextList = Field(default_factory=list)
    model: Text = ""
    thinking_level: Text = ""
    """The reasoning effort picked for the agent, in its CLI's words ("": the default)."""
    service_tier: Text = ""
    """The service tier picked for the agent (Codex's `priority`; "": the default)."""
    skills: Annotated[list[Skill], _entries(Skill, SkillRef)] = Field(default_factory=list)
    skill_refs: Annotated[list[SkillRef], _entries(Skill, SkillRef)] = Field(default_factory=list)
    # Multica's three states: absent or null = the runtime's own MCP servers; any object (even
    # an empty one) = exactly these servers.
    mcp_config: Annotated[dict[str, Any] | None, BeforeValidator(_mcp_object)] = None
    disabled_runtime_skills: Annotated[
        list[DisabledRuntimeSkill], _entries(DisabledRuntimeSkill)
    ] = Field(default_factory=list)


def _default_agent(value: Any) -> Any:
    return {} if value is None else value


class CoalescedComment(WireModel):
    """A comment folded into a run while it was still queued (`coalesced-comments-v1`): the
    run answers it as well as the newest, triggering one, each in its own thread."""

    id: Text = ""
    thread_id: Text = ""
    author_type: Text = ""
    author_name: Text = ""
    content: Text = ""
    created_at: Text = ""


class ChatAttachment(WireModel):
    """A file on the chat message; the agent fetches it with `multica attachment download`."""

    id: Text = ""
    filename: Text = ""
    content_type: Text = ""


class SiblingRun(WireModel):
    """Another issue task of the same agent in flight when this one was claimed."""

    task_id: Text = ""
    issue_id: Text = ""
    issue_identifier: Text = ""
    issue_title: Text = ""
    status: Text = ""
    created_at: Text = ""
    started_at: Text = ""


class PluginHookTool(WireModel):
    """A plugin hook the agent may call as a tool (`plugin_hook_tools`): the daemon's MCP
    server lists it and sends each call to the server, which calls the plugin."""

    installation_id: Text = ""
    hook_key: Text = ""
    name: Text = ""
    description: Text = ""
    input_schema: Any = None


class RemoteMcpTool(WireModel):
    """One tool of a remote MCP connection an administrator approved, its schema pinned."""

    name: Text = ""
    description: Text = ""
    input_schema: Any = None
    schema_digest: Text = ""


class RemoteMcpConnection(WireModel):
    """A remote MCP server the task may use through the daemon's broker; its credential is
    fetched by the daemon, never sent in the claim."""

    installation_id: Text = ""
    contribution_id: Text = ""
    contribution_key: Text = ""
    endpoint: Text = ""
    transport: Text = ""
    protocol_versions: TextList = Field(default_factory=list)
    endpoint_allowed_hosts: TextList = Field(default_factory=list)
    credential_header: Text = ""
    approved_tools: Annotated[list[RemoteMcpTool], _entries()] = Field(default_factory=list)
    failure_policy: Text = ""


class ConnectedApp(WireModel):
    """An app whose tools reach the agent through an MCP server of this run's config."""

    provider: Text = ""
    server_name: Text = ""
    toolkit_slug: Text = ""
    toolkit_name: Text = ""


class Task(WireModel):
    """A claimed task: who runs it, with which agent, and the inputs of its prompt."""

    id: str
    runtime_id: Text = ""
    workspace_id: Text = ""
    agent_id: Text = ""
    agent: Annotated[Agent, BeforeValidator(_default_agent)] = Field(default_factory=Agent)
    # Task-scoped token handed to the agent as MULTICA_TOKEN; never shown in a repr or log.
    auth_token: Text = Field(default="", repr=False)
    prior_session_id: Text = ""
    prompt: Text = ""
    issue_id: Text = ""
    trigger_comment_content: Text = ""
    chat_message: Text = ""
    quick_create_prompt: Text = ""
    autopilot_title: Text = ""
    autopilot_description: Text = ""
    # What Multica's claim carries instead of a prompt: the daemon builds the prompt from these.
    handoff_note: Text = ""
    trigger_comment_id: Text = ""
    trigger_thread_id: Text = ""
    trigger_author_type: Text = ""
    trigger_author_name: Text = ""
    new_comment_count: Count = 0
    new_comments_since: Text = ""
    # Earlier comments folded into this run (newest last; the trigger is newer still).
    coalesced_comment_ids: TextList = Field(default_factory=list)
    coalesced_comments: Annotated[list[CoalescedComment], _entries(CoalescedComment)] = Field(
        default_factory=list
    )
    chat_session_id: Text = ""
    # An IM channel behind the chat ("" for the web chat): its name, the room's shape ("group",
    # "p2p"), whether the mention was in a thread, whether a file reaches the channel.
    chat_channel_type: Text = ""
    chat_type: Text = ""
    chat_in_thread: Flag = False
    chat_channel_delivers_files: Flag = False
    chat_message_attachments: Annotated[list[ChatAttachment], _entries(ChatAttachment)] = Field(
        default_factory=list
    )
    # A historical first message of a new agent's chat: it introduces itself.
    chat_intro: Flag = False
    # Who triggered this run (a comment's author, a chat's creator), not the runtime's owner.
    initiator_type: Text = ""
    initiator_id: Text = ""
    initiator_name: Text = ""
    initiator_email: Text = ""
    active_sibling_runs: Annotated[list[SiblingRun], _entries(SiblingRun)] = Field(
        default_factory=list
    )
    # The server withheld a newer session whose rollout was missing: the run must say so.
    prior_session_resume_unavailable: Flag = False
    autopilot_run_id: Text = ""
    autopilot_id: Text = ""
    autopilot_source: Text = ""
    autopilot_trigger_payload: Any = None
    quick_create_priority: Text = ""
    quick_create_due_date: Text = ""
    # Files uploaded with a quick-create prompt, bound to the issue the agent creates.
    quick_create_attachment_ids: TextList = Field(default_factory=list)
    project_id: Text = ""
    project_title: Text = ""
    # The project's standing context and its resources, shown to the agent in its brief.
    project_description: Text = ""
    project_resources: Annotated[list[dict[str, Any]], _entries()] = Field(default_factory=list)
    parent_issue_id: Text = ""
    parent_issue_identifier: Text = ""
    squad_id: Text = ""
    squad_name: Text = ""
    # This run coordinates the squad (Multica's `is_leader_task`): it ends its turns differently.
    is_leader_task: bool = False
    workspace_context: Text = ""
    # Who the run works for, in their own words; the brief shows it as background.
    requesting_user_name: Text = ""
    requesting_user_profile_description: Text = ""
    # The workspace's custom statuses (empty: only the built-in seven), and how many were cut.
    issue_statuses: Annotated[list[IssueStatus], _entries(IssueStatus)] = Field(
        default_factory=list
    )
    issue_statuses_omitted: Count = 0
    prior_work_dir: Text = ""
    # The repositories this task may check out (a project's, else the workspace's).
    repos: RepoList = Field(default_factory=list)
    # Plugin hooks offered as tools, remote MCP servers behind the daemon's broker, and the
    # apps whose MCP servers this run has; the broker's token never reaches the agent.
    plugin_hook_tools: Annotated[list[PluginHookTool], _entries(PluginHookTool)] = Field(
        default_factory=list
    )
    remote_mcp_connections: Annotated[list[RemoteMcpConnection], _entries(RemoteMcpConnection)] = (
        Field(default_factory=list)
    )
    remote_mcp_daemon_token: Text = Field(default="", repr=False)
    connected_apps: Annotated[list[ConnectedApp], _entries(ConnectedApp)] = Field(
        default_factory=list
    )
    # Reference-server extension: the backend name the task asks for (empty = any).
    backend: Text = ""


class ClaimRequest(WireModel):
    """Body of `POST /api/daemon/tasks/claim`."""

    daemon_id: str
    runtime_ids: list[str]
    max_tasks: int


class TaskStatusResponse(WireModel):
    """Answer to a status poll: the task's state on the server."""

    status: str
