"""``loadaware explain pod|node``: its flags; reading the cluster and printing the answer
is ``commands``, imported only once the flags are parsed (the Kubernetes and Prometheus
clients, the planner: `--help` and a bad flag pay for none of them)."""

from __future__ import annotations

import argparse
from typing import Any

from app.commandline import (
    INTERRUPTED_TEXT,
    add_deprecated_alias,
    add_flag,
    count,
    kubernetes_name,
    kubernetes_namespace,
)
from app.kube import DESCHEDULER_CONFIGMAP, POLICY_CONFIGMAP
from app.kube import STATE_NAME as DEFAULT_STATE_NAME
from app.prom import add_prometheus_flags

DEFAULT_INSTALL_NAMESPACE = "loadaware"


def pod_reference(text: str) -> str:
    """``NAMESPACE/NAME``, each part a name the API server could hold."""
    namespace, slash, name = text.partition("/")
    if not slash or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    kubernetes_namespace(namespace)
    kubernetes_name(name)
    return text

EXIT_CODES = (
    "exit codes: 0 explained, 1 the cluster (or the pod or node asked about) could not be "
    "read, 2 bad usage or configuration (flags, files, a policy that does not validate), "
    + INTERRUPTED_TEXT
)

HELP = "why a pod goes where it goes, and what the descheduler makes of a node (read-only)"
DESCRIPTION = """\
Explain loadaware's decisions from the cluster as it is now. Read-only: it lists Nodes,
Pods, PodDisruptionBudgets and a pod's Events and gets loadaware's ConfigMaps; the
roles in deploy/base/explain-rbac.yaml are enough.

  pod   every node's verdict for a pod, by the same load model and estimate the
        extender runs, the score parts, and the node the extender would prefer;
        for a Pending pod, kube-scheduler's last FailedScheduling message
  node  whether the descheduler sees a node as a source, a destination or neither,
        and which pods it would move off it or skip, with the skip codes
"""

POD_DESCRIPTION = """\
Every node's verdict for the pod, as the extender gives it: the load model on the
node's annotations, with the extender's estimate of the pods bound since the node's
last sample added (the pod itself left out: it was judged before it was bound). For
the failed predicate: the measured value, the estimate added for recent pods, the
value used and the limit. The score: each priority metric's free share x weight, the
hot value, the 0-100 score and the 0-10 extender score. The preferred node is the
passing node with the highest score among those kube-scheduler's own node rules
(selector, affinity, taints, cordon) offer to the extender.

Not visible from outside the extender: the reservations it holds for a few seconds
between kube-scheduler choosing a node and the binding reaching its watch.

Nodes are ranked: where the pod runs, the preferred node, the nodes the load filter
refuses (hottest first), then the rest by score; the first --top are shown, --all
shows every node, -o json always holds every node.
"""

NODE_DESCRIPTION = """\
The plan the descheduler would make now (the same planner, on every node and pod,
with the debounce rounds and recent evictions from its memory ConfigMap), read for
one node: its class (source, debouncing, destination, neutral, no-data, excluded)
and why, the pods it would move off it and where, the pods it would skip with their
codes, and the pods it would send to it.

Per-pod usage comes from Prometheus with --prometheus-url (the configuration's
podUsageQueries, as the descheduler runs them). Without it, each pod's usage is the
extender's estimate from its requests and limits, which the descheduler itself never
acts on: it evicts nothing while Prometheus cannot give per-pod usage.
"""

POD_EPILOG = f"""\
examples:
  loadaware explain pod shop/web-7d4f9-abcde
  loadaware explain pod -f pod.yaml --all
  loadaware explain pod shop/web-7d4f9-abcde -o json | jq '.nodes[] | select(.passes | not)'

{EXIT_CODES}
"""

NODE_EPILOG = f"""\
examples:
  loadaware explain node worker-3
  loadaware explain node worker-3 --prometheus-url http://prometheus.monitoring:9090

{EXIT_CODES}
"""


def _common_flags(parser: argparse.ArgumentParser, json_holds: str) -> None:
    add_flag(
        parser,
        "--output",
        short="-o",
        command="explain",
        choices=("text", "json"),
        default="text",
        metavar="FORMAT",
        help=f"text (for a person, fits a screen) or json (for tools, {json_holds})",
    )
    add_flag(
        parser,
        "--kubeconfig",
        metavar="FILE",
        default_text="in-cluster config, then $KUBECONFIG, then ~/.kube/config",
        help="kubeconfig file",
    )
    add_flag(
        parser,
        "--install-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        default=DEFAULT_INSTALL_NAMESPACE,
        help=f"where loadaware runs: its policy ConfigMap ({POLICY_CONFIGMAP.name}), the "
        f"descheduler's configuration ({DESCHEDULER_CONFIGMAP.name}) and memory",
    )
    add_flag(
        parser,
        "--policy",
        metavar="FILE",
        help="DynamicSchedulerPolicy YAML to explain with, instead of the policy in force",
        default_text=f"the {POLICY_CONFIGMAP.name} ConfigMap, else the built-in crane defaults",
    )


def add_parser(components: Any) -> None:
    explain = components.add_parser(
        "explain",
        help=HELP,
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = explain.add_subparsers(dest="what", required=True, metavar="WHAT")
    pod = what.add_parser(
        "pod",
        help="every node's verdict and score for a pod, and the node the extender prefers",
        description=POD_DESCRIPTION,
        epilog=POD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pod.add_argument(
        "pod", nargs="?", type=pod_reference, metavar="NAMESPACE/NAME", help="a pod in the cluster"
    )
    add_flag(
        pod,
        "--filename",
        short="-f",
        command="explain",
        metavar="FILE",
        help="a Pod manifest, for a pod not created yet (instead of NAMESPACE/NAME)",
    )
    add_flag(
        pod,
        "--all",
        command="explain",
        action="store_true",
        help="show every node, not only the first --top",
    )
    add_flag(
        pod,
        "--top",
        command="explain",
        type=count,
        default=10,
        metavar="N",
        help="how many nodes to show",
    )
    _common_flags(pod, "every node")
    pod.set_defaults(run=run_pod)

    node = what.add_parser(
        "node",
        help="whether the descheduler sees a node as a source or destination, and its pods",
        description=NODE_DESCRIPTION,
        epilog=NODE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    node.add_argument("node", type=kubernetes_name, metavar="NAME", help="a node in the cluster")
    _common_flags(node, "the node's class and every pod it would move, skip or receive")
    add_flag(
        node,
        "--descheduler-config",
        old_variable="LOADAWARE_CONFIG",
        metavar="FILE",
        help="DeschedulerConfiguration YAML to explain with, instead of the one in force",
        default_text=f"the {DESCHEDULER_CONFIGMAP.name} ConfigMap, else the built-in defaults",
    )
    add_deprecated_alias(node, "--config", "--descheduler-config", "descheduler_config")
    add_flag(
        node,
        "--state-name",
        metavar="NAME",
        type=kubernetes_name,
        default=DEFAULT_STATE_NAME,
        help="the descheduler's memory ConfigMap (its --state-name), in --install-namespace",
    )
    add_prometheus_flags(
        node, url_unset="none: each pod's usage is estimated from its requests and limits"
    )
    node.set_defaults(run=run_node)


def run_pod(args: argparse.Namespace) -> int:
    from app.explain.commands import run_pod

    return run_pod(args)


def run_node(args: argparse.Namespace) -> int:
    from app.explain.commands import run_node

    return run_node(args)
