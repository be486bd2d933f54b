"""The files under deploy/ are accepted by their own tools and agree with the daemon's code.

systemd-analyze and promtool come from `.ci/install-system-deps`; a test that needs one skips
with the reason when it is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.config import Settings, env_vars
from daemon.ops.metrics import Metrics
from tests.fakes.system_user import AGENT_USER_CAPABILITIES

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "agent-daemon.service"
ENV_FILE = DEPLOY / "systemd" / "agent-daemon.env"
CONTAINERFILE = DEPLOY / "container" / "Containerfile"
K8S = DEPLOY / "kubernetes" / "deployment.yaml"
PROMETHEUS = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "agent-daemon.json"

# Time the daemon needs after the shutdown grace and the agents' kill grace to report each
# stopped task and deregister.
REPORT_MARGIN = 10.0

_METRIC = re.compile(r"\bagent_daemon_[a-z0-9_]+")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (.ci/install-system-deps installs it)")
    return path


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The daemon's default settings (a HOME without a token file)."""
    return Settings.from_env({"HOME": str(tmp_path)})


def _exported_series() -> set[str]:
    """Every series name a real Metrics() can expose, from the families in its exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    text = Metrics().exposition().decode()
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in suffixes.get(family.type, ("",))
    }


# --- systemd -----------------------------------------------------------------------------


def _unit_settings() -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def _systemd_seconds(value: str) -> float:
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    match = re.fullmatch(r"(\d+)\s*(s|sec|min|m|h)?", value.strip())
    assert match, f"unsupported systemd time span {value!r}"
    return int(match[1]) * units[match[2] or ""]


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """`systemd-analyze verify` accepts the unit without a warning.

    verify insists that ExecStart's binary exists, so it checks a copy whose ExecStart points
    at this interpreter instead of /opt/agent-daemon/bin/agent-daemon.
    """
    analyze = _tool("systemd-analyze")
    text = UNIT.read_text()
    original = "ExecStart=/opt/agent-daemon/bin/agent-daemon run"
    assert original in text
    copy = tmp_path / "agent-daemon.service"
    copy.write_text(text.replace(original, f"ExecStart={sys.executable} -m daemon run"))
    result = _run(analyze, "verify", "--man=no", str(copy))
    about_unit = [line for line in result.stderr.splitlines() if "agent-daemon" in line]
    assert result.returncode == 0, result.stderr
    assert about_unit == [], result.stderr


def test_systemd_unit_stops_gracefully_and_notifies(settings: Settings) -> None:
    """Type=notify with a watchdog, KillMode=mixed, and a stop timeout above the shutdown grace."""
    unit = _unit_settings()
    assert unit["Type"] == ["notify"]
    assert unit["NotifyAccess"] == ["main"]
    assert unit["KillMode"] == ["mixed"]
    assert unit["Restart"] == ["on-failure"]
    assert _systemd_seconds(unit["WatchdogSec"][0]) > 0
    stop = _systemd_seconds(unit["TimeoutStopSec"][0])
    assert stop >= settings.shutdown_grace + settings.kill_grace + REPORT_MARGIN


def test_systemd_unit_runs_as_a_dedicated_user_with_writable_state() -> None:
    """A non-root user, the documented ExecStart and env file, no hardening that breaks agents."""
    unit = _unit_settings()
    assert unit["ExecStart"] == ["/opt/agent-daemon/bin/agent-daemon run"]
    assert unit["EnvironmentFile"] == [f"-/etc/agent-daemon/{ENV_FILE.name}"]
    assert unit["User"][0] not in ("", "root", "0")
    assert unit["StateDirectory"] == ["agent-daemon"]
    assert "MemoryDenyWriteExecute" not in unit, "Node's JIT needs writable+executable memory"
    if unit.get("ProtectSystem") == ["strict"]:
        assert "ReadWritePaths" in unit, "agents must be able to write their workspaces"


# --- environment file -------------------------------------------------------------------


def test_env_example_is_generated_from_the_settings_model() -> None:
    """deploy/gen_env_example.py --check finds the committed file up to date."""
    script = DEPLOY / "gen_env_example.py"
    result = _run(sys.executable, str(script), "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_env_example_lists_every_setting_once_with_its_default() -> None:
    """Each variable of env_vars() appears once, in order, set to its default or left empty."""
    assignments = [
        re.fullmatch(r"#?([A-Z][A-Z0-9_]*)=(.*)", line)
        for line in ENV_FILE.read_text().splitlines()
    ]
    found = [(m[1], m[2]) for m in assignments if m]
    assert [name for name, _ in found] == [var for var, _, _ in env_vars()]
    defaults = {var: default for var, default, _ in env_vars()}
    for name, value in found:
        assert value in (defaults[name], ""), f"{name}={value} is not its default"


# --- container --------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


def test_containerfile_runs_the_daemon_as_a_reachable_service() -> None:
    """Health port on 0.0.0.0:19514, HEALTHCHECK `agent-daemon check`, SIGTERM."""
    rows = _instructions()
    args = {keyword: [rest for k, rest in rows if k == keyword] for keyword, _ in rows}
    assert any("MULTICA_DAEMON_HEALTH_ADDR=0.0.0.0:19514" in env for env in args["ENV"])
    assert any(re.search(r'CMD \["agent-daemon", "check"\]', h) for h in args["HEALTHCHECK"])
    assert args["STOPSIGNAL"] == ["SIGTERM"]
    assert "19514" in args["EXPOSE"]


def _image_env() -> dict[str, str]:
    """The image's ENV settings (`NAME=value` pairs, the last of each name)."""
    env: dict[str, str] = {}
    for keyword, rest in _instructions():
        if keyword == "ENV":
            env.update(pair.split("=", 1) for pair in rest.split() if "=" in pair)
    return env


def test_containerfile_runs_the_daemon_as_root_and_agents_as_the_user_it_creates() -> None:
    """The daemon runs as root (in both stages) with MULTICA_AGENT_USER naming the user the
    image creates with a home; the workspaces root is not inside the state directory, and the
    volume's top is root's and passable (0711)."""
    rows = _instructions()
    users = [rest for k, rest in rows if k == "USER"]
    assert users and set(users) == {"root"}
    env = _image_env()
    name = env["MULTICA_AGENT_USER"]
    created = [rest for k, rest in rows if k == "RUN" and "useradd" in rest]
    assert len(created) == 1 and "--create-home" in created[0]
    assert created[0].split("&&")[0].split()[-1] == name
    state, root = Path(env["MULTICA_DAEMON_STATE_DIR"]), Path(env["MULTICA_WORKSPACES_ROOT"])
    assert not root.is_relative_to(state) and state.parent == root.parent
    assert f"-o root -g root -m 0711 {state.parent}" in created[0]


def test_containerfile_installs_agent_clis_only_when_asked() -> None:
    """INSTALL_AGENT_CLIS defaults to 0 and picks a stage; stage 1 npm-installs both CLIs."""
    rows = _instructions()
    stages = [rest.split(" AS ")[-1] for k, rest in rows if k == "FROM" and " AS " in rest]
    assert ("ARG", "INSTALL_AGENT_CLIS=0") in rows
    assert rows[-1] == ("FROM", "agents-${INSTALL_AGENT_CLIS}")
    assert {"agents-0", "agents-1"} <= set(stages)
    stage_1 = rows[rows.index(("FROM", "base AS agents-1")) :]
    packages = next(rest for k, rest in stage_1 if k == "ARG" and "AGENT_CLI_PACKAGES" in rest)
    assert "@anthropic-ai/claude-code" in packages and "@openai/codex" in packages
    assert any("npm install -g $AGENT_CLI_PACKAGES" in rest for k, rest in stage_1 if k == "RUN")


def test_containerfile_copies_only_files_that_exist() -> None:
    """Every COPY source from the build context is in the repository."""
    sources = [
        part
        for keyword, rest in _instructions()
        if keyword == "COPY" and not rest.startswith("--from")
        for part in rest.split()[:-1]
    ]
    assert sources
    missing = [s for s in sources if not (ROOT / s).exists()]
    assert missing == []


# --- Kubernetes -------------------------------------------------------------------------


@pytest.fixture
def k8s() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(K8S.read_text()) if d]
    return {d["kind"]: d for d in docs}


def _container(k8s: dict[str, dict[str, Any]]) -> dict[str, Any]:
    containers = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def _port(container: dict[str, Any], ref: int | str) -> int:
    if isinstance(ref, int):
        return ref
    return int(next(p["containerPort"] for p in container["ports"] if p["name"] == ref))


def test_kubernetes_probes_hit_the_health_port(k8s: dict[str, dict[str, Any]]) -> None:
    """Liveness on /healthz and readiness on /readyz, both on port 19514."""
    container = _container(k8s)
    live = container["livenessProbe"]["httpGet"]
    ready = container["readinessProbe"]["httpGet"]
    assert (live["path"], _port(container, live["port"])) == ("/healthz", 19514)
    assert (ready["path"], _port(container, ready["port"])) == ("/readyz", 19514)


def test_kubernetes_grace_period_outlasts_the_shutdown_grace(
    k8s: dict[str, dict[str, Any]], settings: Settings
) -> None:
    """terminationGracePeriodSeconds leaves time to drain, kill and report."""
    grace = k8s["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    shutdown = Settings.from_env(
        {"HOME": "/nonexistent", **k8s["ConfigMap"]["data"]}
    ).shutdown_grace
    assert grace >= shutdown + settings.kill_grace + REPORT_MARGIN


def test_kubernetes_health_port_is_reachable_and_scraped(k8s: dict[str, dict[str, Any]]) -> None:
    """The ConfigMap binds the health port on 0.0.0.0; the scrape annotations point at it."""
    container = _container(k8s)
    config = k8s["ConfigMap"]["data"]
    host, _, port = config["MULTICA_DAEMON_HEALTH_ADDR"].rpartition(":")
    assert host == "0.0.0.0"
    assert int(port) == _port(container, "health") == 19514
    notes = k8s["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert notes["prometheus.io/port"] == port
    assert notes["prometheus.io/path"] == "/metrics"


def test_kubernetes_settings_come_from_the_configmap_and_the_secret(
    k8s: dict[str, dict[str, Any]],
) -> None:
    """envFrom names the ConfigMap, whose keys are real, valid settings; the token is a Secret."""
    container = _container(k8s)
    config = k8s["ConfigMap"]
    assert {"configMapRef": {"name": config["metadata"]["name"]}} in container["envFrom"]
    known = {var for var, _, _ in env_vars()}
    assert set(config["data"]) <= known
    Settings.from_env({"HOME": "/nonexistent", **config["data"]})
    token = next(e for e in container["env"] if e["name"] == "MULTICA_DAEMON_TOKEN")
    assert set(token["valueFrom"]["secretKeyRef"]) == {"name", "key"}
    assert "MULTICA_DAEMON_TOKEN" not in config["data"]


def test_kubernetes_state_volume_and_resources(k8s: dict[str, dict[str, Any]]) -> None:
    """The state directory and the workspaces root are two mounted volumes, neither inside
    the other, and the container declares resources."""
    container = _container(k8s)
    data = k8s["ConfigMap"]["data"]
    state_dir, root = data["MULTICA_DAEMON_STATE_DIR"], data["MULTICA_WORKSPACES_ROOT"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"] for v in k8s["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert mounts[state_dir] in volumes and mounts[root] in volumes
    assert mounts[state_dir] != mounts[root]
    assert not Path(root).is_relative_to(state_dir)
    assert container["resources"]["requests"]["memory"]
    assert container["resources"]["limits"]["memory"]


def test_kubernetes_runs_the_daemon_as_root_with_only_the_capabilities_it_needs(
    k8s: dict[str, dict[str, Any]],
) -> None:
    """Root (to start agents as the image's user), every capability dropped but the ones
    switching users and reaching the agents' processes and files take; no escalation."""
    pod = k8s["Deployment"]["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == 0 and not pod.get("runAsNonRoot", False)
    context = _container(k8s)["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert set(context["capabilities"]["add"]) == set(AGENT_USER_CAPABILITIES)


# --- Prometheus -------------------------------------------------------------------------


def test_prometheus_config_passes_promtool() -> None:
    """`promtool check config` accepts the scrape config and the rule file it loads."""
    result = _run(_tool("promtool"), "check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_scrapes_the_daemon_every_15s() -> None:
    """Job `agent-daemon` scrapes 127.0.0.1:19514 every 15s and loads alerts.yml."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "agent-daemon")
    assert job["static_configs"][0]["targets"] == ["127.0.0.1:19514"]
    assert job.get("scrape_interval", config["global"]["scrape_interval"]) == "15s"
    assert config["rule_files"] == ["alerts.yml"]


def test_alert_rules_pass_promtool_check() -> None:
    """`promtool check rules` accepts alerts.yml."""
    result = _run(_tool("promtool"), "check", "rules", str(PROMETHEUS / "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_fire_on_their_unit_test_series() -> None:
    """`promtool test rules` shows each alert firing, and staying quiet, when it should."""
    result = _run(_tool("promtool"), "test", "rules", str(PROMETHEUS / "alerts_test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def _alert_rules() -> Iterator[dict[str, Any]]:
    doc = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    for group in doc["groups"]:
        yield from group["rules"]


def test_alert_rules_use_only_exported_metrics() -> None:
    """Every agent_daemon_* name in an alert expression is a series Metrics() exposes."""
    exported = _exported_series()
    used = {name for rule in _alert_rules() for name in _METRIC.findall(rule["expr"])}
    assert used, "no agent_daemon_ metric referenced"
    assert used - exported == set()


def test_alert_rules_carry_severity_and_operator_text() -> None:
    """Each alert has a severity label and a summary and description for the operator."""
    rules = list(_alert_rules())
    assert {r["alert"] for r in rules} >= {
        "AgentDaemonDown",
        "AgentDaemonWatchdogFiring",
        "AgentDaemonTasksSilent",
        "AgentDaemonCircuitOpen",
        "AgentDaemonOutboxBacklog",
    }
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


# --- Grafana ----------------------------------------------------------------------------


@pytest.fixture
def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return [p for p in panels if p["type"] != "row"]


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in _panels(dashboard) for t in p["targets"]]


def test_dashboard_is_importable_with_a_prometheus_input(dashboard: dict[str, Any]) -> None:
    """schemaVersion, a DS_PROMETHEUS input, and every panel on that datasource with a unique id."""
    assert isinstance(dashboard["schemaVersion"], int)
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    panels = _panels(dashboard)
    assert all(p["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in panels)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"].lower() for p in panels)
    for topic in ("running", "finished", "duration", "watchdog", "tools", "messages"):
        assert topic in titles
    for topic in ("requests", "latency", "retries", "circuit", "outbox", "kills"):
        assert topic in titles


def test_dashboard_uses_only_exported_metrics(dashboard: dict[str, Any]) -> None:
    """Every agent_daemon_* name in a panel query is a series Metrics() exposes."""
    used = {name for expr in _exprs(dashboard) for name in _METRIC.findall(expr)}
    assert used - _exported_series() == set()


def test_dashboard_shows_every_exported_metric(dashboard: dict[str, Any]) -> None:
    """Each metric family in daemon/ops/metrics.py has a panel (add one when adding a metric)."""
    exprs = " ".join(_exprs(dashboard))
    families = {
        name.removesuffix("_total").removesuffix("_bucket")
        for name in _exported_series()
        if not name.endswith(("_created", "_sum", "_count"))
    }
    assert [f for f in sorted(families) if f not in exprs] == []


def test_dashboard_queries_are_valid_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """promtool parses every panel query once Grafana's variables are filled in."""
    promtool = _tool("promtool")
    rules = [
        {"record": f"dashboard:query_{i}", "expr": _fill_grafana_variables(expr)}
        for i, expr in enumerate(_exprs(dashboard))
    ]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = _run(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def _fill_grafana_variables(expr: str) -> str:
    return expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
