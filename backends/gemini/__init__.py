"""Gemini CLI (`@google/gemini-cli` on npm) through the ACP backend: `gemini --acp --skip-trust`.

`--acp` replaced `--experimental-acp` (still accepted, deprecated) in the versions this
backend needs. `--skip-trust` trusts the work directory, which the daemon made for the task:
in a folder it does not trust the CLI ignores the GEMINI.md there, the runtime brief. The
model is the CLI's `--model` flag. Gemini asks permission for every shell
command; the backend grants it once per call, which is also when the call starts running
(the CLI sends no `in_progress` for it).

Sessions are not resumed although the CLI offers `session/load`: in 0.61.0 the load of a
session its previous run saved answered "No previous sessions found for this project" more
often than not, and when it did load, it replayed the old answer after its own answer, where
it ran into the new turn's text. A task that names a session starts a fresh one, and says so.

Multica dropped its own Gemini runtime; this one still registers as `gemini`: the server takes
any type and routes by the runtime, so agents bound to a `gemini` runtime keep their runtime,
where another type would register a new one and strand them (README, "Agent backends").
"""

from __future__ import annotations

from backends.acp import AcpAgent

GEMINI = AcpAgent(
    name="gemini",
    label="Gemini CLI",
    command="gemini",
    acp_args=("--acp", "--skip-trust"),
    min_version="0.61.0",
    provider="google",
    model_flag="--model",
    resumes=False,
    # Before it reads its arguments the CLI starts itself again in a second Node process (with
    # a larger heap), unless told not to: `--version` needs no heap, and the second start was
    # 40% of the probe's CPU time (2.5 s -> 1.5 s), which on a busy machine can push the probe
    # past the daemon's 10 s bound and leave Gemini unregistered. Task runs keep the relaunch.
    probe_env={"GEMINI_CLI_NO_RELAUNCH": "true"},
)
