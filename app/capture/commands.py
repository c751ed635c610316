"""What ``loadaware capture`` does once its flags are parsed: read the cluster
(``kube``, ``catalog``) and Prometheus' history (``history``), and write the scenario
(``document``) as YAML."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import yaml

from app.capture.catalog import Catalog, build_catalog
from app.capture.document import (
    SIMULATION_STEP,
    Names,
    anonymize_descheduler,
    node_groups,
    observed,
    workloads,
)
from app.capture.history import CaptureError, PromSource, QueryStats, check_inputs, record
from app.capture.kube import read_cluster, read_config_map
from app.commandline import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    progress_bar,
)
from app.documents import parse_yaml, read_file
from app.kube import KubeConfigError, make_client
from app.prom import (
    PrometheusSource,
    prometheus_settings_from_args,
    redact_url,
)
from app.simulate import ScenarioError, scenario_from_mapping

POLICY_CONFIG_MAP = ("loadaware-policy", "policy.yaml")
DESCHEDULER_CONFIG_MAP = ("loadaware-descheduler-config", "descheduler.yaml")


def _file_mapping(path: Path, what: str) -> dict[str, Any]:
    # Read as every YAML input is: a regular file of at most 1 MiB (--policy /dev/zero
    # was read until the kernel killed the process), UTF-8.
    text, _ = read_file(path, f"{what} file", UsageError)
    document = parse_yaml(text, f"{what} {path}", UsageError)
    if not isinstance(document, dict):
        raise UsageError(f"{what} {path}: expected a mapping")
    return document


async def _read_kube(args: argparse.Namespace) -> tuple[Catalog, dict[str, Any] | None,
                                                        dict[str, Any] | None]:  # fmt: skip
    client = make_client(args.kubeconfig)
    try:
        objects = await read_cluster(client)
        policy = descheduler = None
        if args.policy is None:
            text = await read_config_map(client, args.loadaware_namespace, *POLICY_CONFIG_MAP)
            policy = parse_yaml(text, "the cluster's policy", CaptureError) if text else None
        if args.descheduler_config is None:
            text = await read_config_map(
                client, args.loadaware_namespace, *DESCHEDULER_CONFIG_MAP
            )
            descheduler = (
                parse_yaml(text, "the cluster's descheduler config", CaptureError)
                if text
                else None
            )
    finally:
        await client.close()
    catalog = build_catalog(objects.nodes, objects.pods, objects.controllers, objects.budgets)
    return catalog, policy, descheduler


def capture(
    catalog: Catalog,
    source: PromSource,
    where: str,
    end_s: float,
    range_s: float,
    step_s: float,
    *,
    name: str = "capture",
    names: Names | None = None,
    policy: dict[str, Any] | None = None,
    descheduler: dict[str, Any] | None = None,
    progress: Any = None,
) -> tuple[dict[str, Any], QueryStats, str]:
    """The scenario document, what its queries cost, and a one-line summary."""
    names = names or Names()
    start_s = end_s - range_s
    check_inputs(source, start_s, end_s, where)
    usage, node_history, replicas, stats = record(
        source, catalog, start_s, end_s, step_s, progress
    )
    found, silent = workloads(catalog, usage, replicas, step_s, names)
    start = datetime.fromtimestamp(start_s).astimezone().isoformat(timespec="seconds")
    document: dict[str, Any] = {
        "name": names(name),
        "description": f"Captured by loadaware capture: {range_s / 3600:g} h of history from "
        f"{start if not names.anonymous else 'the start'}, one point every {step_s:g}s.",
        "duration": f"{range_s:g}s",
        "step": SIMULATION_STEP,
        "start": start if not names.anonymous else None,
        "nodes": node_groups(catalog.nodes, names),
        "workloads": found,
    }
    if document["start"] is None:
        del document["start"]
    if policy is not None:
        document["policy"] = policy
    if descheduler is not None:
        document["descheduler"] = anonymize_descheduler(descheduler, names)
    recorded = observed(node_history, catalog, step_s, names)
    if recorded is not None:
        document["observed"] = recorded
    start_pods = len(usage.start_pods)
    summary = (
        f"captured {len(catalog.nodes)} nodes in {len(document['nodes'])} shapes, "
        f"{len(found)} workloads ({start_pods} pods at the start"
        f"{f'; {silent} without usage left out' if silent else ''}"
        f"{f'; {len(usage.unmatched)} pods of no known workload' if usage.unmatched else ''}"
        f"), {stats.queries} queries, {stats.samples:,} samples (largest answer "
        f"{stats.largest_answer:,})"
    )
    if recorded is None:
        summary += "; no per-node series (cAdvisor series without a 'node' label): no fidelity"
    return document, stats, summary


SERIES_MARK = re.compile(r"'@series(\d+)@'")


def dump(document: dict[str, Any], out: TextIO) -> None:
    """The scenario as YAML; each series as one flow list written as text, not through
    the YAML representer, which would make an object per number (hundreds of MiB for
    a large cluster)."""
    series: list[list[float]] = []
    marked = _mark_series(document, series)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(marked, Dumper=dumper, sort_keys=False, default_flow_style=None, width=120)
    for line in text.splitlines(keepends=True):
        out.write(SERIES_MARK.sub(lambda m: _flow(series[int(m.group(1))]), line))


def _mark_series(value: Any, series: list[list[float]]) -> Any:
    if isinstance(value, dict):
        return {k: _mark_series(v, series) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > 4 and all(isinstance(v, float) for v in value):
            series.append(value)
            return f"@series{len(series) - 1}@"
        return [_mark_series(v, series) for v in value]
    return value


def _flow(values: list[float]) -> str:
    # YAML 1.1 reads a float only with a dot: 1e-05 would be a string, 1.0e-05 is not.
    texts = (repr(v) if "e" not in repr(v) or "." in repr(v) else repr(v).replace("e", ".0e")
             for v in values)  # fmt: skip
    return "[" + ", ".join(texts) + "]"


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout  # looked up now, so that a redirection is followed
    err = err or sys.stderr
    started = time.perf_counter()
    try:
        settings = prometheus_settings_from_args(args)
        if args.step <= 0 or args.range < args.step:
            raise UsageError(f"--range ({args.range:g}s) must be at least one --step "
                             f"({args.step:g}s), and --step above 0")  # fmt: skip
        policy = _file_mapping(args.policy, "--policy") if args.policy else None
        descheduler = (
            _file_mapping(args.descheduler_config, "--descheduler-config")
            if args.descheduler_config
            else None
        )
        catalog, cluster_policy, cluster_descheduler = asyncio.run(_read_kube(args))
    except (UsageError, ValueError, KubeConfigError) as error:
        err.write(f"loadaware capture: error: {error}\n")
        return EXIT_USAGE
    except CaptureError as error:
        err.write(f"loadaware capture: error: {error}\n")
        return EXIT_FAILED
    source = PrometheusSource(settings)
    show = progress_bar("querying Prometheus", err) if args.progress or err.isatty() else None
    end_s = args.end if args.end is not None else time.time()
    try:
        document, _, summary = capture(
            catalog, source, redact_url(settings.url), end_s, args.range, args.step,
            name=args.name, names=Names(args.anonymize),
            policy=policy if policy is not None else cluster_policy,
            descheduler=descheduler if descheduler is not None else cluster_descheduler,
            progress=show,
        )  # fmt: skip
        scenario_from_mapping(document, "the captured scenario")
    except CaptureError as error:
        err.write(f"loadaware capture: error: {error}\n")
        return EXIT_FAILED
    except ScenarioError as error:
        err.write(f"loadaware capture: error: the captured scenario does not validate: {error}\n")
        return EXIT_FAILED
    finally:
        source.close()
    if args.output is None:
        dump(document, out)
    else:
        with args.output.open("w", encoding="utf-8") as file:
            dump(document, file)
    err.write(f"{summary}; {time.perf_counter() - started:.1f}s\n")
    return EXIT_OK
