"""Bad input through the real command line: one line naming the input, a documented exit
code (2: bad usage or configuration; see app/flags.py), never a traceback.

Every case runs ``python -m app.cli`` in a subprocess with a clean environment (no
LOADAWARE_* variables, no kubeconfig, HOME in a temporary folder), as an operator
would meet it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

POLICY_CPU_ONLY = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    - {name: cpu_usage_avg_5m, period: 3m}
  predicate:
    - {name: cpu_usage_avg_5m, maxLimitPecent: 0.65}
"""

BOTH_SPELLINGS = """\
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65, maxLimitPercent: 0.7}]
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: loadaware-policy}
data:
  policy.yaml: |
    spec: {}
"""

KUBECONFIG_WITHOUT_ITS_CA = """\
apiVersion: v1
kind: Config
clusters:
  - name: c
    cluster: {server: "https://127.0.0.1:6443", certificate-authority: /nonexistent/ca.crt}
users:
  - name: u
    user: {token: abc}
contexts:
  - name: x
    context: {cluster: c, user: u}
current-context: x
"""

HUGE_SCENARIO = """\
name: huge
duration: 720h
nodes: [{name: n, count: 1000000, cpu: 16, memory: 64Gi}]
"""

# Flags a descheduler needs to get as far as reading its files.
DESCHEDULER = ["descheduler", "--once", "--dry-run", "--no-leader-elect",
               "--prometheus-url", "http://127.0.0.1:9"]  # fmt: skip


@dataclass(frozen=True)
class Case:
    argv: list[str]  # "@name": the file ``name`` below, written to a temporary folder
    says: list[str]  # every one of these is in stderr
    code: int = 2
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)


CASES: dict[str, Case] = {
    # --- flags and variables ---
    "log level": Case(["--log-level", "bogus", "extender"], ["--log-level", "debug, info"]),
    "log level after the command": Case(["extender", "--log-level", "bogus"], ["--log-level"]),
    "log level variable": Case(["extender"], ["LOADAWARE_LOG_LEVEL"],
                               env={"LOADAWARE_LOG_LEVEL": "loud"}),
    "port too large": Case(["extender", "--port", "99999"], ["--port", "1-65535", "99999"]),
    "port variable": Case(["extender"], ["--port", "from LOADAWARE_PORT"],
                          env={"LOADAWARE_PORT": "http"}),
    "health port": Case(["annotator", "--health-port", "70000"], ["--health-port", "1-65535"]),
    "poll interval 0": Case(["extender", "--policy-poll-interval", "0"],
                            ["--policy-poll-interval", "positive duration"]),
    "poll interval nan": Case(["extender", "--policy-poll-interval", "nan"],
                              ["--policy-poll-interval"]),
    "body limit -1": Case(["extender", "--max-body-bytes=-1"],
                          ["--max-body-bytes", "at least 1"]),
    "reservation ttl nan": Case(["extender", "--reservation-ttl", "nan"], ["--reservation-ttl"]),
    "reservation ttl negative": Case(["extender", "--reservation-ttl=-5s"],
                                     ["--reservation-ttl", "positive duration"]),
    "sync timeout nan": Case([*DESCHEDULER, "--sync-timeout", "nan"], ["--sync-timeout"]),
    "query timeout negative": Case([*DESCHEDULER, "--query-timeout=-1"], ["--query-timeout"]),
    "prometheus url": Case(["annotator", "--prometheus-url", "http://[::1"],
                           ["--prometheus-url", "http://prometheus.monitoring:9090"]),
    "leader-elect variable": Case(["annotator", "--prometheus-url", "http://p"],
                                  ["LOADAWARE_LEADER_ELECT='nah'", "true or false"],
                                  env={"LOADAWARE_LEADER_ELECT": "nah"}),
    "verdict index variable": Case(["extender", "--no-node-cache"],
                                   ["LOADAWARE_VERDICT_INDEX", "auto, native or python"],
                                   env={"LOADAWARE_VERDICT_INDEX": "bogus"}),
    # --- files ---
    "policy not UTF-8": Case(["extender", "--no-node-cache", "--policy", "@bad.yaml"],
                             ["bad.yaml", "not UTF-8"], files={"bad.yaml": b"spec: \xff\xfe\n"}),
    "scenario not UTF-8": Case(["simulate", "@bad.yaml"], ["bad.yaml", "not UTF-8"],
                               files={"bad.yaml": b"name: \xff\n"}),
    "missing certificate": Case(["extender", "--no-node-cache", "--tls-cert", "/nonexistent.pem",
                                 "--tls-key", "/nonexistent.key"], ["--tls-cert", "cannot load"]),
    "garbage certificate": Case(["extender", "--no-node-cache", "--tls-cert", "@c.pem",
                                 "--tls-key", "@c.pem"], ["--tls-cert", "cannot load"],
                                files={"c.pem": "not a certificate\n"}),
    "kubeconfig without its CA": Case(["extender", "--kubeconfig", "@kc.yaml"],
                                      ["kc.yaml", "cannot build a Kubernetes client"],
                                      files={"kc.yaml": KUBECONFIG_WITHOUT_ITS_CA}),
    "no kubeconfig: extender": Case(["extender"], ["cannot build a Kubernetes client"]),
    "no kubeconfig: descheduler": Case(DESCHEDULER, ["cannot build a Kubernetes client"]),
    # --- descheduler configuration ---
    "eviction rate 1e-300": Case([*DESCHEDULER, "--config", "@d.yaml"],
                                 ["evictionsPerSecond", "0.01"],
                                 files={"d.yaml": "evictionsPerSecond: 1e-300\n"}),
    "eviction rate inf": Case([*DESCHEDULER, "--config", "@d.yaml"],
                              ["evictionsPerSecond", "finite"],
                              files={"d.yaml": "evictionsPerSecond: .inf\n"}),
    "metric not in the policy": Case([*DESCHEDULER, "--policy", "@p.yaml"],
                                     ["metrics.memory", "mem_usage_avg_5m", "does not sync"],
                                     files={"p.yaml": POLICY_CPU_ONLY}),
    # --- policy check ---
    "both spellings": Case(["policy", "check", "@p.yaml"],
                           ["maxLimitPecent", "maxLimitPercent", "keep one"],
                           files={"p.yaml": BOTH_SPELLINGS}),
    "a ConfigMap": Case(["policy", "check", "@p.yaml"], ["ConfigMap", "data keys"],
                        files={"p.yaml": CONFIGMAP}),
    "an empty spec": Case(["policy", "check", "@p.yaml"], ["syncPolicy is empty"],
                          files={"p.yaml": "spec: {}\n"}),
    "policy not UTF-8 in check": Case(["policy", "check", "@p.yaml"], ["not UTF-8"],
                                      files={"p.yaml": b"\xff"}),
    # --- simulate ---
    "no policies": Case(["simulate", "burst", "--policies", ""], ["--policies", "one or more"]),
    "plots into a file": Case(["simulate", "burst", "--plots", "@f.txt"],
                              ["--plots", "not a folder"], files={"f.txt": "x"}),
    "plots under a file": Case(["simulate", "burst", "--plots", "@f.txt/plots"],
                               ["--plots", "cannot create it"], files={"f.txt": "x"}),
    "a scenario too large": Case(["simulate", "@huge.yaml"], ["GiB", "fewer nodes"],
                                 files={"huge.yaml": HUGE_SCENARIO}),
}  # fmt: skip


def clean_environment(home: Path) -> dict[str, str]:
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOADAWARE_") and k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    return {**kept, "HOME": str(home)}


def run_cli(
    argv: list[str], env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,  # a case that is not caught would start serving: a failure
    )


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_ends_in_one_line_and_a_documented_exit_code(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    for file_name, content in case.files.items():
        target = tmp_path / file_name
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    # "@name" is a file of the case, in the test's folder.
    argv = [f"{tmp_path}/{arg[1:]}" if arg.startswith("@") else arg for arg in case.argv]
    result = run_cli(argv, {**clean_environment(tmp_path), **case.env})
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == case.code, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr  # one line says what is wrong
    for words in case.says:
        assert words in errors[0], errors[0]


def test_version_prints_the_version(tmp_path: Path) -> None:
    result = run_cli(["--version"], clean_environment(tmp_path))
    assert result.returncode == 0
    assert result.stdout.strip() == "loadaware 0.1.0"


def test_a_closed_output_pipe_ends_quietly(tmp_path: Path) -> None:
    # `| true` exits before the command writes: every write meets a closed pipe.
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m app.cli simulate --list | true"],
        cwd=ROOT,
        env=clean_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stderr == ""
    assert result.returncode == 0


def test_plots_without_matplotlib_are_refused_before_the_simulation(tmp_path: Path) -> None:
    hide = (
        "import sys; sys.modules['matplotlib'] = None; from app.cli import main; "
        f"sys.exit(main(['simulate', 'thousand-nodes', '--plots', {str(tmp_path)!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide],
        cwd=ROOT,
        env=clean_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,  # thousand-nodes would take far longer if it ran first
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    assert "matplotlib is not installed" in result.stderr


def test_global_flags_are_accepted_after_the_command_name(tmp_path: Path) -> None:
    result = run_cli(["simulate", "--list", "--log-level", "warning"], clean_environment(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "burst" in result.stdout
