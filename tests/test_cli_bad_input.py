"""Bad input through the real command line: one line naming the input, a documented exit
code (2: bad usage or configuration; see app/commandline/flags.py), never a traceback.

Every case runs ``python -m app.cli`` in a process of its own with a clean environment
(no LOADAWARE_* variables, no kubeconfig, HOME in a temporary folder), as an operator
would meet it, and is judged by that process' exit code, stdout and stderr. The cases
run in one batch; each process is forked by a zygote that already imported the
libraries (tests/support/zygote.py, which says what that changes and what not), so that
a case costs its own import of ``app`` and its work, not an interpreter's start-up.
What depends on a real start (Ctrl-C, a closed stdout, a closed pipe, a port in use, a
server whose policy file changes) runs ``python`` in a real subprocess.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support import http_client
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port
from tests.support.zygote import Zygote, clean_environment

ROOT = Path(__file__).resolve().parents[1]
# A path segment that climbs, built so tests/test_self_contained.py reads no path in it.
UP = "." * 2

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

# p95 meant, the word order wrong: it would load, find no series, be missing for ever.
MALFORMED_PERCENTILE = """\
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
  predicate: [{name: cpu_usage_p95_1h, maxLimitPecent: 0.8}]
"""

# A key something else may write for the extender, but that the annotator cannot query.
SYNCED_ANNOTATION_KEY = """\
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}, {name: example.com/gpu, period: 1m}]
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

KUBECONFIG_WITHOUT_CLUSTERS = """\
apiVersion: v1
kind: Config
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: abc}}]
current-context: x
"""

# 10,000 nested brackets: deeper than any parser's recursion allows.
DEEP = "[" * 10_000 + "\n"

INFINITE_LIMIT = """\
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: .inf}]
"""

TINY_SCENARIO = """\
name: tiny
duration: 10m
seed: SEED
nodes: [{name: n, count: 2, cpu: 4, memory: 8Gi}]
workloads:
  - {name: w, replicas: 2, requests: {cpu: 100m, memory: 128Mi},
     usage: {profile: constant, cpu: 100m, memory: 128Mi}, arrival: {at: 0s, over: 1m}}
"""

HUGE_SCENARIO = """\
name: huge
duration: 720h
nodes: [{name: n, count: 100000, cpu: 16, memory: 64Gi}]
"""

NO_WORKLOADS = """\
name: empty
duration: 10m
nodes: [{name: n, count: 2, cpu: 4, memory: 8Gi}]
"""

# A policy as crane writes one (the line numbers matter to "a key written twice").
CRANE_SHAPED = POLICY_CPU_ONLY + "  priority:\n    - {name: cpu_usage_avg_5m, weight: 0.5}\n"

POD_LOTS = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
    - {name: c, image: nginx, resources: {requests: {cpu: lots, memory: 1Gi}}}
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
    "a malformed percentile metric": Case(["policy", "check", "@p.yaml"],
                                          ["spec.predicate.0.name", "looks like a percentile",
                                           "cpu_usage_p95_avg_1h"],
                                          files={"p.yaml": MALFORMED_PERCENTILE}),
    "annotator syncing an annotation key": Case(["annotator", "--prometheus-url", "http://p",
                                                 "--policy", "@p.yaml"],
                                                ["'example.com/gpu'", "not a Prometheus metric",
                                                 "annotator cannot query it"],
                                                files={"p.yaml": SYNCED_ANNOTATION_KEY}),
    "policy check, Prometheus down": Case(["policy", "check", "@p.yaml", "--prometheus-url",
                                           "http://127.0.0.1:9"],
                                          ["could not be looked up", "cannot connect"], code=1,
                                          files={"p.yaml": POLICY_CPU_ONLY}),
    "policy check, a bad Prometheus flag": Case(["policy", "check", "@p.yaml", "--prometheus-url",
                                                 "http://127.0.0.1:9", "--query-timeout", "0s"],
                                                ["--query-timeout"],
                                                files={"p.yaml": POLICY_CPU_ONLY}),
    # --- node pools (issue 45): an overlap the file shows, at load ---
    "overlapping pools: extender": Case(
        ["extender", "--no-node-cache", "--policy", "@p.yaml"],
        ["p.yaml", "nodePools 'a' and 'b' have the same nodeSelector"],
        files={"p.yaml": POLICY_CPU_ONLY + "  nodePools:\n" + "".join(
            f"    - {{name: {n}, nodeSelector: {{matchLabels: {{pool: gpu}}}}, predicate: "
            f"[{{name: cpu_usage_avg_5m, maxLimitPercent: 0.4}}]}}\n" for n in "ab")}),
    "overlapping pools: descheduler": Case(
        [*DESCHEDULER, "--config", "@d.yaml"],
        ["d.yaml", "nodePools 'a' selects every node that 'b' selects"],
        files={"d.yaml": "nodePools:\n"
               "  - {name: a, nodeSelector: {matchLabels: {pool: gpu}}, "
               "targetThresholds: {cpu: 40}}\n"
               "  - {name: b, nodeSelector: {matchLabels: {pool: gpu, zone: a}}, "
               "targetThresholds: {cpu: 50}}\n"}),
    # --- issue 32: inputs that ended in a traceback or named no flag ---
    "deep policy: policy check": Case(["policy", "check", "@deep.yaml"],
                                      ["deep.yaml", "nested too deeply"],
                                      files={"deep.yaml": DEEP}),
    "deep policy: extender": Case(["extender", "--no-node-cache", "--policy", "@deep.yaml"],
                                  ["deep.yaml", "nested too deeply"], files={"deep.yaml": DEEP}),
    "deep config: descheduler": Case([*DESCHEDULER, "--config", "@deep.yaml"],
                                     ["deep.yaml", "nested too deeply"],
                                     files={"deep.yaml": DEEP}),
    "deep scenario: simulate": Case(["simulate", "@deep.yaml"], ["deep.yaml", "nested too deeply"],
                                    files={"deep.yaml": DEEP}),
    "negative seed": Case(["simulate", "burst", "--seed", "-1"], ["--seed", "at least 0", "-1"]),
    "negative seed variable": Case(["simulate", "burst"], ["--seed", "LOADAWARE_SIMULATE_SEED"],
                                   env={"LOADAWARE_SIMULATE_SEED": "-1"}),
    "negative seed, old variable": Case(["simulate", "burst"], ["--seed", "LOADAWARE_SEED"],
                                        env={"LOADAWARE_SEED": "-1"}),
    "negative seed in a scenario": Case(["simulate", "@s.yaml"], ["s.yaml", "seed"],
                                        files={"s.yaml": TINY_SCENARIO.replace("SEED", "-5")}),
    # One wording for every bad number: "argument --x: expected ..., got '...'".
    "seed abc": Case(["simulate", "burst", "--seed", "abc"],
                     ["argument --seed: expected a whole number", "got 'abc'"]),
    "jobs abc": Case(["simulate", "burst", "--jobs", "abc"],
                     ["argument --jobs: expected a whole number", "got 'abc'"]),
    "a huge query timeout": Case([*DESCHEDULER, "--query-timeout", "99999999999999h"],
                                 ["--query-timeout", "720h", "99999999999999h"]),
    "a huge poll interval": Case(["annotator", "--policy-poll-interval", "721h"],
                                 ["--policy-poll-interval", "720h"]),
    "a header with CR/LF": Case(["annotator", "--prometheus-url", "http://p",
                                 "--prometheus-header", "X-A: b\r\nX-Evil: 1"],
                                ["--prometheus-header", "control characters"]),
    "a selector that is not PromQL": Case(["annotator", "--query-selector", "cluster=prod"],
                                          ["--query-selector", "PromQL label matchers",
                                           "cluster=prod"]),
    "a host that is no host": Case(["extender", "--host", "not a host!"],
                                   ["--host", "IP address or a host name", "not a host!"]),
    "a host that does not resolve": Case(["extender", "--no-node-cache", "--allow-unauthenticated",
                                          "--host", "nowhere.invalid"],
                                         ["--host", "nowhere.invalid", "cannot listen"]),
    "port equal to health port": Case(["extender", "--no-node-cache", "--port", "18999",
                                       "--health-port", "18999"],
                                      ["--port", "--health-port", "18999"]),
    "body timeout 1ns": Case(["extender", "--body-timeout", "1ns"],
                             ["--body-timeout", "100ms", "1ns"]),
    "a policy given as --config": Case([*DESCHEDULER, "--config", "@p.yaml"],
                                       ["p.yaml", "kind is 'DynamicSchedulerPolicy'", "--policy"],
                                       files={"p.yaml": POLICY_CPU_ONLY}),
    "kubeconfig without clusters": Case(["extender", "--kubeconfig", "@kc.yaml"],
                                        ["kc.yaml", "'clusters' is missing"],
                                        files={"kc.yaml": KUBECONFIG_WITHOUT_CLUSTERS}),
    "an infinite limit": Case(["policy", "check", "@p.yaml"],
                              ["spec.predicate.0.maxLimitPecent", "finite number"],
                              files={"p.yaml": INFINITE_LIMIT}),
    "log level between policy and check": Case(["policy", "--log-level", "bogus", "check", "x"],
                                               ["--log-level", "bogus"]),
    "log format": Case(["--log-format", "xml", "simulate", "--list"], ["--log-format", "json"]),
    "old poll interval flag": Case([*DESCHEDULER, "--poll-interval", "0"], ["--poll-interval"]),
    # --- simulate ---
    "no policies": Case(["simulate", "burst", "--policies", ""], ["--policies", "one or more"]),
    "a policy named twice": Case(["simulate", "burst", "--policies", "crane,default,crane"],
                                 ["--policies", "crane named twice"]),
    "plots into a file": Case(["simulate", "burst", "--plots", "@f.txt"],
                              ["--plots", "not a folder"], files={"f.txt": "x"}),
    "plots under a file": Case(["simulate", "burst", "--plots", "@f.txt/plots"],
                               ["--plots", "cannot create it"], files={"f.txt": "x"}),
    "a scenario too large": Case(["simulate", "@huge.yaml"], ["GiB", "fewer nodes"],
                                 files={"huge.yaml": HUGE_SCENARIO}),
    "a scenario without workloads": Case(["simulate", "@s.yaml"], ["s.yaml", "no workloads"],
                                         files={"s.yaml": NO_WORKLOADS}),
    "plots into /proc": Case(["simulate", "burst", "--plots", "/proc"],
                             ["--plots /proc", "cannot create a file in it"]),
    # --- issue 46: runaway inputs (YAML files are regular files under a size limit) ---
    "a policy from /dev/zero": Case(["policy", "check", "/dev/zero"],
                                    ["/dev/zero", "device", "not a regular file"]),
    "a policy that is a folder": Case(["policy", "check", "/proc"], ["/proc", "a folder"]),
    "a policy past 1 MiB": Case(["policy", "check", "@big.yaml"],
                                ["big.yaml", "larger than the limit of 1 MiB"],
                                files={"big.yaml": b"#" * (2**20 + 1)}),
    "an extender policy from /dev/zero": Case(["extender", "--no-node-cache", "--policy",
                                               "/dev/zero"], ["/dev/zero", "not a regular file"]),
    "a descheduler config from /dev/zero": Case([*DESCHEDULER, "--config", "/dev/zero"],
                                                ["/dev/zero", "not a regular file"]),
    "a scenario from /dev/zero": Case(["simulate", "/dev/zero"], ["/dev/zero"]),
    "a scenario past 16 MiB": Case(["simulate", "@big.yaml"],
                                   ["big.yaml", "larger than the limit of 16 MiB"],
                                   files={"big.yaml": b"#" * (16 * 2**20 + 1)}),
    "capture --policy /dev/zero": Case(["capture", "--prometheus-url", "http://127.0.0.1:9",
                                        "--policy", "/dev/zero"],
                                       ["/dev/zero", "--policy file", "not a regular file"]),
    "a pod manifest from /dev/zero": Case(["explain", "pod", "-f", "/dev/zero"],
                                          ["/dev/zero", "not a regular file"]),
    # durations in files follow the flags' range; a loop runs at most once a second
    "a policy period of 1ns": Case(["policy", "check", "@p.yaml"],
                                   ["spec.syncPolicy.0.period", "'1ns'", "minimum 1ms"],
                                   files={"p.yaml": CRANE_SHAPED.replace("period: 3m",
                                                                         "period: 1ns")}),
    "a policy period of 10ms": Case(["policy", "check", "@p.yaml"],
                                    ["spec.syncPolicy.0.period", "0.01s", "minimum 1s"],
                                    files={"p.yaml": CRANE_SHAPED.replace("period: 3m",
                                                                          "period: 10ms")}),
    "a descheduler interval of 1ns": Case([*DESCHEDULER, "--config", "@d.yaml"],
                                          ["d.yaml", "interval", "minimum 1ms"],
                                          files={"d.yaml": "interval: 1ns\n"}),
    "a descheduler interval of 10ms": Case([*DESCHEDULER, "--config", "@d.yaml"],
                                           ["d.yaml", "interval", "minimum 1s"],
                                           files={"d.yaml": "interval: 10ms\n"}),
    # --- issue 46: silent surprises ---
    "a key written twice": Case(["policy", "check", "@p.yaml"],
                                ["p.yaml", "key 'predicate' is written twice", "lines 6 and 10"],
                                files={"p.yaml": CRANE_SHAPED + "  predicate:\n"}),
    "a key written twice in a config": Case([*DESCHEDULER, "--config", "@d.yaml"],
                                            ["d.yaml", "key 'dryRun' is written twice"],
                                            files={"d.yaml": "dryRun: true\ndryRun: false\n"}),
    "weight: yes": Case(["policy", "check", "@p.yaml"],
                        ["spec.priority.0.weight", "expected a number", "boolean"],
                        files={"p.yaml": CRANE_SHAPED.replace("weight: 0.5", "weight: yes")}),
    "apiVersion apps/v1": Case(["policy", "check", "@p.yaml"], ["apiVersion", "'apps/v1'"],
                               files={"p.yaml": CRANE_SHAPED.replace(
                                   "scheduler.policy.crane.io/v1alpha1", "apps/v1")}),
    "a metric name that is no name": Case(["policy", "check", "@p.yaml"],
                                          ["spec.syncPolicy.0.name", "neither a Prometheus"],
                                          files={"p.yaml": CRANE_SHAPED.replace(
                                              "name: cpu_usage_avg_5m, period",
                                              "name: 'cpu usage %', period")}),
    "explain pod -f with cpu: lots": Case(["explain", "pod", "-f", "@pod.yaml"],
                                          ["pod.yaml", "spec.containers[0].resources.requests"
                                           ".cpu", "'lots'"], files={"pod.yaml": POD_LOTS}),
    "explain output variable": Case(["explain", "node", "x"],
                                    ["--output", "text, json", "'yaml'",
                                     "LOADAWARE_EXPLAIN_OUTPUT"],
                                    env={"LOADAWARE_EXPLAIN_OUTPUT": "yaml"}),
    "capture --end in the future": Case(["capture", "--end", "3000-01-01"],
                                        ["--end", "'3000-01-01'", "in the future"]),
    # names the API server could not hold: a path in a name rewrote the request's path
    "a state name that is a path": Case(["report", "--state-name", f"{UP}/x"],
                                        ["--state-name", "Kubernetes name", f"'{UP}/x'"]),
    "a namespace in capitals": Case(["capture", "--install-namespace", "Bad_NS"],
                                    ["--install-namespace", "namespace", "'Bad_NS'"]),
    "a namespace variable with a slash": Case(["explain", "node", "n1"],
                                              ["--install-namespace", "'x/y'",
                                               "LOADAWARE_INSTALL_NAMESPACE"],
                                              env={"LOADAWARE_INSTALL_NAMESPACE": "x/y"}),
    "a lease name with a space": Case(["descheduler", "--lease-name", "a b"],
                                      ["--lease-name", "Kubernetes name", "'a b'"]),
    "a node name that is a path": Case(["explain", "node", f"{UP}/{UP}/etc"],
                                       ["NAME", "Kubernetes name", f"'{UP}/{UP}/etc'"]),
    "a pod's namespace in capitals": Case(["explain", "pod", "Shop/web"],
                                          ["NAMESPACE/NAME", "namespace", "'Shop'"]),
    "reservation ttl -5s as a value of its own": Case(["extender", "--reservation-ttl", "-5s"],
                                                      ["--reservation-ttl", "positive duration",
                                                       "'-5s'"]),
}  # fmt: skip


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


def run_case(zygote: Zygote, name: str, folder: Path) -> subprocess.CompletedProcess[str]:
    case = CASES[name]
    folder.mkdir()
    for file_name, content in case.files.items():
        target = folder / file_name
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    # "@name" is a file of the case, in the case's folder.
    argv = [f"{folder}/{arg[1:]}" if arg.startswith("@") else arg for arg in case.argv]
    # Its own folder as its working folder, as an operator runs it: not the checkout.
    return zygote.run(argv, {**clean_environment(folder), **case.env}, cwd=folder)


@pytest.fixture(scope="module")
def results(
    cli_zygote: Zygote, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case's result, each its own process forked by the zygote, one at a time
    (each is mostly the CPU of importing ``app``)."""
    root = tmp_path_factory.mktemp("cases")
    return {name: run_case(cli_zygote, name, root / str(i)) for i, name in enumerate(CASES)}


# One worker runs them all (GROUP_OF in tests/conftest.py): ``results`` runs every case,
# in each worker that asks for it.
@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_ends_in_one_line_and_a_documented_exit_code(
    name: str, results: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    case, result = CASES[name], results[name]
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == case.code, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr  # one line says what is wrong
    for words in case.says:
        assert words in errors[0], errors[0]
    # Not the usage block before it (README): the line, a hint to --help, log lines.
    others = [line for line in result.stderr.splitlines() if line != errors[0]]
    for line in others:
        assert line.startswith("(run 'loadaware") or " WARNING " in line, result.stderr


# What the zygote must not change: a case ends as in a fresh interpreter, the same exit
# code, stdout and stderr, whether it stops at a flag, in a schema or prints a table.
BOTH_WAYS = {
    "a bad flag": ["extender", "--port", "99999"],
    "a policy refused": ["policy", "check", "@p.yaml"],
    "a listing asked for by a variable": ["--log-level", "warning", "simulate"],
}


def untimed(log: str) -> str:
    """Log lines without their time, which two runs do not share."""
    return re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", log, flags=re.MULTILINE)


def test_a_case_in_the_zygote_ends_as_in_a_fresh_interpreter(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    policy = write(tmp_path / "p.yaml", BOTH_SPELLINGS)
    env = {**clean_environment(tmp_path), "LOADAWARE_SIMULATE_LIST": "true"}
    for what, argv in BOTH_WAYS.items():
        argv = [str(policy) if arg == "@p.yaml" else arg for arg in argv]
        fresh, forked = run_cli(argv, env), cli_zygote.run(argv, env)
        assert forked.returncode == fresh.returncode, (what, forked.stderr)
        said = (forked.stdout, untimed(forked.stderr))
        assert said == (fresh.stdout, untimed(fresh.stderr)), what
        assert fresh.stdout or fresh.stderr, what  # each said something


STREAMS_AS_MADE = """\
import sys
from zygote_process import reopened
def made(s):
    return (type(s.buffer).__name__, s.line_buffering, s.write_through, s.encoding,
            s.errors, s.name, s.mode)
started = [made(s) for s in (sys.stdin, sys.stdout, sys.stderr)]
remade = [made(reopened(fd, s)) for fd, s in enumerate((sys.stdin, sys.stdout, sys.stderr))]
print(started == remade, started, remade)
"""


@pytest.mark.parametrize("unbuffered", [False, True])
def test_a_case_gets_standard_streams_made_as_the_interpreter_makes_them(
    unbuffered: bool, tmp_path: Path
) -> None:
    env = {k: v for k, v in clean_environment(tmp_path).items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run(
        [sys.executable, "-c", STREAMS_AS_MADE],
        cwd=ROOT / "tests" / "support",
        env={**env, **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.startswith("True"), result.stdout + result.stderr
    assert ("FileIO" in result.stdout) == unbuffered  # both ways were seen


def test_version_prints_the_version(cli_zygote: Zygote, tmp_path: Path) -> None:
    result = cli_zygote.run(["--version"], clean_environment(tmp_path))
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


def test_plots_without_matplotlib_are_refused_before_the_simulation(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    result = cli_zygote.run(
        ["simulate", "thousand-nodes", "--plots", str(tmp_path)],
        clean_environment(tmp_path),
        timeout=60,  # thousand-nodes would take far longer if it ran first
        hidden=["matplotlib"],
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    assert "matplotlib is not installed" in result.stderr


def test_global_flags_are_accepted_after_the_command_name(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    result = cli_zygote.run(
        ["simulate", "--list", "--log-level", "warning"], clean_environment(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert "burst" in result.stdout


# --- issue 32: what needs a process that runs, a port, or a stream ---


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def dead_kubeconfig(folder: Path) -> Path:
    """A kubeconfig whose API server does not answer (nothing listens on port 9)."""
    return write(
        folder / "kubeconfig",
        "apiVersion: v1\nkind: Config\n"
        'clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]\n'
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: abc}}]\ncurrent-context: x\n",
    )


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_a_port_in_use_is_refused_naming_the_flag_before_the_banner(tmp_path: Path) -> None:
    env = clean_environment(tmp_path)
    kubeconfig = str(dead_kubeconfig(tmp_path))
    prometheus = ["--prometheus-url", "http://127.0.0.1:9", "--kubeconfig", kubeconfig]
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        commands = {
            "--port": ["extender", "--no-node-cache", "--port", port],
            "demo --port": ["demo", "--port", port],
            "annotator --health-port": ["annotator", *prometheus, "--no-leader-elect",
                                        "--health-port", port],
            "descheduler --health-port": ["descheduler", *prometheus, "--no-leader-elect",
                                          "--health-port", port],
        }  # fmt: skip
        with ThreadPoolExecutor(4) as pool:
            ran = pool.map(lambda argv: run_cli(argv, env), commands.values())
            done = dict(zip(commands, ran, strict=True))
    for what, result in done.items():
        assert result.returncode == 2, (what, result.stderr)
        line = one_error(result)
        assert what.split()[-1] in line, line
        assert f"{port}: cannot listen" in line, line
        assert "in use" in line, line
    # The demo's banner (the curl examples) would point at someone else's server.
    assert "Try it" not in done["demo --port"].stdout


def writing_commands(folder: Path) -> list[list[str]]:
    """A command that writes a report, and one that writes a table."""
    policy = write(folder / "p.yaml", POLICY_CPU_ONLY)
    scenario = write(folder / "s.yaml", TINY_SCENARIO.replace("SEED", "1"))
    return [["policy", "check", str(policy)],
            ["simulate", str(scenario), "--policies", "default"]]  # fmt: skip


def test_a_closed_stdout_is_one_error_and_exit_code_1(tmp_path: Path) -> None:
    # A fresh interpreter: sys.stdout is None only in one started with it closed.
    env = clean_environment(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(
                lambda argv: subprocess.run(
                    ["bash", "-c", f"{sys.executable} -m app.cli {' '.join(argv)} >&-"],
                    cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                ),
                writing_commands(tmp_path),
            )
        )  # fmt: skip
    for result in results:
        assert result.returncode == 1, result.stderr
        assert "cannot write the output" in one_error(result)


def test_a_full_disk_is_one_error_and_exit_code_1(cli_zygote: Zygote, tmp_path: Path) -> None:
    env = clean_environment(tmp_path)
    for argv in writing_commands(tmp_path):
        result = cli_zygote.run(argv, env, stdout_to=Path("/dev/full"))
        assert result.returncode == 1, result.stderr
        assert "cannot write the output" in one_error(result)


def test_a_single_run_without_the_lease_says_the_api_server_was_not_reached(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    result = cli_zygote.run(
        ["descheduler", "--once", "--dry-run", "--kubeconfig", str(dead_kubeconfig(tmp_path)),
         "--prometheus-url", "http://127.0.0.1:9", "--sync-timeout", "1s"],
        clean_environment(tmp_path),
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    assert "not acquired within 1s" in result.stdout
    assert "API server could not be reached" in result.stdout
    assert "not the leader" not in result.stdout


# ``python -m app.cli`` as a shell in a terminal starts it: with SIGINT at its default, so
# that Python turns a Ctrl-C into KeyboardInterrupt. A test run started in the background
# by a non-interactive shell (``pytest ... &``, as some CI runners start jobs) has SIGINT
# ignored, every process it starts inherits that, and Python then leaves it ignored: the
# simulation ran on to its end after the Ctrl-C test's SIGINT and exited 0 (the servers,
# which install their own handlers, stopped either way).
AS_FROM_A_TERMINAL = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from app.cli import main; sys.exit(main(sys.argv[1:]))"
)


def start_cli(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(stream: object, words: str) -> str:
    """What the process wrote until ``words`` (the process' own timeout bounds it)."""
    seen = ""
    while words not in seen:
        char = stream.read(1)  # type: ignore[attr-defined]
        assert char, f"the process ended before it said {words!r}: {seen}"
        seen += char
    return seen


SIGINT_CASES = {
    # command, the line that says it is running (stdout "O" or stderr "E"), exit code
    "extender": (["--log-format", "json", "extender", "--no-node-cache", "--port", "PORT"],
                 "Elistening on", 0),
    "demo": (["demo", "--port", "PORT"], "OTry it", 0),
    "simulate --jobs 1": (["simulate", "thousand-nodes", "--policies", "default", "--jobs", "1",
                           "--progress"], "E[", 130),
    "simulate --jobs 2": (["simulate", "thousand-nodes", "--policies", "default,crane", "--jobs",
                           "2", "--progress"], "Ein 2 processes", 130),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SIGINT_CASES))
def test_ctrl_c_stops_cleanly_in_bounded_time(name: str, tmp_path: Path) -> None:
    import signal

    argv, ready, code = SIGINT_CASES[name]
    argv = [str(free_port()) if arg == "PORT" else arg for arg in argv]
    process = start_cli(argv, clean_environment(tmp_path))
    try:
        said = read_until(process.stdout if ready[0] == "O" else process.stderr, ready[1:])
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)  # no hang: the bound is the test
    finally:
        process.kill()
        process.wait()
    # Read on through the same buffered streams (communicate() would skip their buffers).
    assert process.stderr is not None
    err = (said if ready[0] == "E" else "") + process.stderr.read()
    assert "Traceback" not in err, err
    assert process.returncode == code, err
    if name.startswith("simulate"):
        assert "interrupted" in err.splitlines()[-1]
    if name == "extender":  # --log-format json: the app's lines and uvicorn's alike
        lines = [json.loads(line) for line in err.splitlines() if line.strip()]
        assert {"app.extender.main", "uvicorn.error"} <= {line["logger"] for line in lines}


def test_a_deep_policy_on_hot_reload_is_counted_and_a_deleted_one_logged(tmp_path: Path) -> None:
    policy = write(tmp_path / "policy.yaml", POLICY_CPU_ONLY)
    port = free_port()
    process = start_cli(
        ["extender", "--no-node-cache", "--port", str(port), "--policy", str(policy),
         "--policy-poll-interval", "50ms"],
        clean_environment(tmp_path),
    )  # fmt: skip

    def errors_counted() -> float:
        metrics = http_client.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        for line in metrics.splitlines():
            if line.startswith('loadaware_policy_reloads_total{result="error"}'):
                return float(line.split()[-1])
        return 0.0

    try:
        read_until(process.stderr, "listening on")
        wait_for(lambda: answers(port))
        write(policy, DEEP)
        wait_for(lambda: errors_counted() == 1)
        policy.unlink()
        wait_for(lambda: errors_counted() == 2)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.stderr is not None
    err = process.stderr.read()
    assert "Traceback" not in err, err
    assert "nested too deeply" in err
    assert f"policy file {policy} is gone" in err


def answers(port: int) -> bool:
    try:
        return http_client.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


def test_old_variable_names_still_work_with_a_deprecation_warning(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    env = clean_environment(tmp_path)
    listed = cli_zygote.run(["simulate"], {**env, "LOADAWARE_LIST": "true"})
    configured = cli_zygote.run(
        DESCHEDULER, {**env, "LOADAWARE_CONFIG": "/nonexistent/descheduler.yaml"}
    )
    assert listed.returncode == 0, listed.stderr
    assert "burst" in listed.stdout
    assert "LOADAWARE_LIST is deprecated: set LOADAWARE_SIMULATE_LIST instead" in listed.stderr
    # The old name is still read: the file it names is the one reported missing.
    assert "/nonexistent/descheduler.yaml" in one_error(configured)
    assert configured.returncode == 2
    assert (
        "LOADAWARE_CONFIG is deprecated: set LOADAWARE_DESCHEDULER_CONFIG instead"
        in configured.stderr
    )


def test_simulate_shows_progress_when_asked_and_no_plots_hint_without_plots(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    scenario = write(tmp_path / "s.yaml", TINY_SCENARIO.replace("SEED", "1"))
    result = cli_zygote.run(
        ["simulate", str(scenario), "--policies", "default", "--progress"],
        clean_environment(tmp_path),
        hidden=["matplotlib"],
    )
    assert result.returncode == 0, result.stderr
    assert "] 20/20" in result.stderr  # the bar, with no terminal
    assert "plots" not in result.stderr.lower()
    assert "| default" in result.stdout


def test_global_flags_are_accepted_between_policy_and_check(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    policy = write(tmp_path / "p.yaml", POLICY_CPU_ONLY)
    result = cli_zygote.run(
        ["policy", "--log-level", "warning", "check", str(policy)], clean_environment(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert "cpu_usage_avg_5m" in result.stdout


def test_a_host_never_listened_on_is_not_logged_as_serving_any_client(
    results: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    # --allow-unauthenticated on a host that does not resolve: the warning that the port
    # serves ANY client came before the failure to listen; it is logged once bound.
    result = results["a host that does not resolve"]
    assert "cannot listen" in one_error(result)
    assert "ANY client" not in result.stderr


# --- issue 46: Ctrl-C during a Prometheus query that never answers ---

# command, exit code: 130 for a one-shot command, 0 for a loop (app/commandline/flags.py)
HUNG_PROMETHEUS_COMMANDS = {
    "explain node": (["explain", "node", "hot"], 130),
    "descheduler --once": (["descheduler", "--once"], 130),  # with its lease, as in a pod
    "descheduler --once --dry-run": (["descheduler", "--once", "--dry-run",
                                      "--no-leader-elect"], 130),
    "descheduler": (["descheduler", "--no-leader-elect", "--health-port", "0"], 0),
    "annotator": (["annotator", "--no-leader-elect", "--health-port", "0"], 0),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HUNG_PROMETHEUS_COMMANDS))
def test_ctrl_c_during_a_prometheus_query_that_never_answers_stops_at_once(
    name: str, fake_kube: FakeKube, tmp_path: Path
) -> None:
    """The query runs in a worker thread: asyncio.run waited for it at its end (28-89 s,
    up to --query-timeout), where it is now abandoned. The stand-in accepts the
    connection and never answers; the query timeout is far longer than the bound."""
    import signal

    from tests.descheduler import cluster
    from tests.explain.test_cli import kubeconfig

    cluster.seed(fake_kube.store, memory=False)
    config = kubeconfig(tmp_path / "kubeconfig", fake_kube.url)
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        hung.settimeout(60)
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        argv, code = HUNG_PROMETHEUS_COMMANDS[name]
        process = start_cli(
            [*argv, "--prometheus-url", url, "--query-timeout", "600s", "--kubeconfig", config],
            clean_environment(tmp_path),
        )  # fmt: skip
        try:
            connection, _ = hung.accept()  # the query is under way
            with connection:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=15)  # no hang: the bound is the test (the query: 600 s)
        finally:
            process.kill()
            process.wait()
    assert process.stderr is not None
    err = process.stderr.read()
    assert "Traceback" not in err, err
    assert process.returncode == code, err
    if code == 130:
        assert err.splitlines()[-1] == "loadaware: interrupted", err
    else:
        assert err.splitlines()[-1].endswith(f"app.runtime.service: {name} stopped"), err


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_every_url_the_demo_prints_answers(host: str, tmp_path: Path) -> None:
    # ``demo --host ::1`` printed http://::1:PORT, which curl and httpx refuse.
    process = start_cli(["demo", "--host", host, "--port", str(free_port())],
                        clean_environment(tmp_path))  # fmt: skip
    try:
        assert process.stdout is not None
        banner = read_until(process.stdout, "| grep loadaware_")
        urls = re.findall(r"curl -s (http://\S+)", banner)
        assert len(urls) == 5, banner
        for url in urls:
            if url.endswith(("/filter", "/prioritize")):
                continue  # they need a body (the printed -d)
            assert http_client.get(url, timeout=10).status_code == 200, url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_base_url_puts_an_ipv6_address_in_brackets() -> None:
    from app.extender.main import http_base_url

    assert http_base_url("::1", 8888) == "http://[::1]:8888"
    assert http_base_url("127.0.0.1", 8888) == "http://127.0.0.1:8888"
    assert http_base_url("localhost", 80) == "http://localhost:80"
