"""``loadaware capture``: a live cluster and its Prometheus history as a scenario file.

Reads nodes, workloads, pods and PDBs from the API server (list only), the cluster's
loadaware policy and descheduler configuration where installed, and per-pod usage,
per-node usage and replica counts over ``--range`` at ``--step`` from Prometheus; writes
a scenario that ``loadaware simulate FILE`` replays from the real placement, with a
fidelity check against what Prometheus recorded (docs/simulate.md).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from app.commandline import (
    INTERRUPTED_TEXT,
    add_deprecated_alias,
    add_flag,
    duration,
    kubernetes_namespace,
)
from app.kube import DESCHEDULER_CONFIGMAP, POLICY_CONFIGMAP
from app.prom import add_prometheus_flags

# Reading the cluster and Prometheus and writing the scenario is ``commands``, imported
# once the flags are parsed: `--help` and a bad flag pay for neither client.

DESCRIPTION = """\
Read a live cluster (Kubernetes API, read-only) and its Prometheus history, and write
a scenario that 'loadaware simulate FILE' replays from the real placement.
"""


def _flag(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    add_flag(parser, flag, **kwargs)


def _own_flag(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """A flag of capture alone: its variable says so (LOADAWARE_CAPTURE_OUTPUT, not the
    LOADAWARE_OUTPUT another command could mean otherwise)."""
    add_flag(parser, flag, command="capture", **kwargs)


def add_parser(components: Any) -> None:
    parser = components.add_parser(
        "capture",
        help="capture a live cluster as a scenario to replay",
        description=DESCRIPTION,
        epilog="exit codes: 0 captured, 1 the cluster or Prometheus could not be read, 2 bad "
        "usage or configuration (flags, files, a policy that does not validate), "
        + INTERRUPTED_TEXT,
    )
    _flag(parser, "--kubeconfig", metavar="FILE", default_text="in-cluster, then $KUBECONFIG",
             help="kubeconfig file")  # fmt: skip
    add_prometheus_flags(parser)
    _own_flag(parser, "--range", type=duration, default="24h", metavar="DURATION",
             help="how far back the history goes")  # fmt: skip
    _own_flag(parser, "--step", type=duration, default="5m", metavar="DURATION",
             help="the history's resolution: one point per workload and node a STEP")  # fmt: skip
    _own_flag(parser, "--end", type=_moment, metavar="TIME", default_text="now",
             help="when the history ends: RFC 3339 or Unix seconds")  # fmt: skip
    _own_flag(parser, "--output", type=Path, metavar="FILE", default_text="stdout",
             help="write the scenario here")  # fmt: skip
    _own_flag(parser, "--name", default="capture", metavar="NAME",
              help="the scenario's name")  # fmt: skip
    _own_flag(parser, "--anonymize", action="store_true",
             help="replace every name (nodes, workloads, labels) with a keyed hash")  # fmt: skip
    _own_flag(parser, "--anonymize-key", type=Path, metavar="FILE",
              default_text="a random key per capture",
              help="key the --anonymize hash with this file's bytes (at least 32), for the "
                   "same names in every capture made with it; implies --anonymize")  # fmt: skip
    _flag(parser, "--policy", type=Path, metavar="FILE",
             default_text=f"the cluster's {POLICY_CONFIGMAP.name} ConfigMap, else crane's default",
             help="the DynamicSchedulerPolicy to replay with")  # fmt: skip
    _flag(parser, "--descheduler-config", type=Path, metavar="FILE",
             default_text=f"the cluster's {DESCHEDULER_CONFIGMAP.name} ConfigMap, else defaults",
             help="the DeschedulerConfiguration to replay with")  # fmt: skip
    add_flag(parser, "--install-namespace", default="loadaware", metavar="NAMESPACE",
             type=kubernetes_namespace, old_variable="LOADAWARE_LOADAWARE_NAMESPACE",
             help="where loadaware runs: its policy and descheduler ConfigMaps")  # fmt: skip
    add_deprecated_alias(parser, "--loadaware-namespace", "--install-namespace",
                         "install_namespace", type=kubernetes_namespace)  # fmt: skip
    _own_flag(parser, "--progress", action="store_true",
             help="show a progress bar even when stderr is not a terminal")  # fmt: skip
    parser.set_defaults(run=run)


# How far past this machine's clock --end may lie: the clocks of this machine and of
# Prometheus differ a little. Past it, the end is a typo (3000-01-01), and a history that
# ends there would be empty.
END_SKEW_S = 300.0


def _moment(text: str) -> float:
    moment = math.nan
    try:
        moment = float(text)
    except ValueError:
        with contextlib.suppress(ValueError, OverflowError):
            moment = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    if not math.isfinite(moment) or moment < 0:
        raise argparse.ArgumentTypeError(
            f"expected RFC 3339 (2026-01-02T15:04:05Z) or Unix seconds, got {text!r}"
        )
    now_s = time.time()
    if moment > now_s + END_SKEW_S:
        now = datetime.fromtimestamp(now_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise argparse.ArgumentTypeError(
            f"{text!r} is in the future (now is {now}): the history ends at the latest "
            f"{END_SKEW_S / 60:g} minutes from now"
        )
    return moment


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from app.capture.commands import run

    return run(args, out, err)
