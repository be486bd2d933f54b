"""What tests of the daemon use, shipped with it: one fake task server, one fake clock, the
task core's objects built with test-friendly defaults, real child processes to watch, and
waits that name the event they wait for (never a fixed sleep).

    server = FakeTaskServer()
    server.fail("send_report", TransientServerError("complete", "down"), times=1)
    run = task_run(task(Script().result("done").dumps()), ScriptedBackend(),
                   server=server, settings=settings_in(tmp_path))
    outcome = await run.run()
"""

from daemon.testing.clock import FakeClock, RecordingSleep
from daemon.testing.factories import (
    AGENT_ENV,
    ROOT_AGENTS_ACCEPTED,
    SERVER_URL,
    fast_env,
    reporter,
    retries,
    run_spec,
    services,
    settings_in,
    task,
    task_run,
    transcript,
    worker,
)
from daemon.testing.processes import python, survivors, task_processes
from daemon.testing.server import TASK_CALLS, Call, FakeTaskServer
from daemon.testing.waits import WaitTimeout, port_answers, stopped, wait_for, wait_until

__all__ = [
    "AGENT_ENV",
    "ROOT_AGENTS_ACCEPTED",
    "SERVER_URL",
    "TASK_CALLS",
    "Call",
    "FakeClock",
    "FakeTaskServer",
    "RecordingSleep",
    "WaitTimeout",
    "fast_env",
    "port_answers",
    "python",
    "reporter",
    "retries",
    "run_spec",
    "services",
    "settings_in",
    "stopped",
    "survivors",
    "task",
    "task_processes",
    "task_run",
    "transcript",
    "wait_for",
    "wait_until",
    "worker",
]
