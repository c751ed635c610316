"""What ``loadaware capture`` does once its flags are parsed: read the cluster
(``kube``, ``catalog``) and Prometheus' history (``history``), and write the scenario
(``document``) as YAML."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import yaml

from app.capture.catalog import Catalog, build_catalog
from app.capture.classes import class_labels
from app.capture.document import (
    KEY_BYTES,
    SIMULATION_STEP,
    Names,
    anonymize_descheduler,
    anonymize_policy,
    node_groups,
    observed,
    workloads,
)
from app.capture.history import (
    CaptureError,
    PromSource,
    QueryStats,
    check_inputs,
    point_count,
    record,
)
from app.capture.kube import cluster_reader, read_cluster
from app.commandline import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    progress_bar,
)
from app.documents import parse_yaml, read_bytes, read_file
from app.kube import (
    DESCHEDULER_CONFIGMAP,
    POLICY_CONFIGMAP,
    ClusterReader,
    ClusterUnreadable,
    KubeConfigError,
    OwnConfig,
    make_client,
)
from app.objects import format_duration
from app.policy import PolicyError, policy_from_mapping
from app.prom import (
    PrometheusSource,
    prometheus_settings_from_args,
    redact_url,
)
from app.rebalance import ConfigError, config_from_mapping
from app.simulate import ScenarioError, scenario_from_mapping


def _policy(text: str, source: str) -> dict[str, Any]:
    """A policy document, checked by the policy's schema (PolicyError names the field)."""
    document = parse_yaml(text, source, PolicyError)
    policy_from_mapping(document, source)
    return dict(document)


def _descheduler(text: str, source: str) -> dict[str, Any]:
    """A descheduler configuration, checked by its schema (ConfigError names the field)."""
    document = parse_yaml(text, source, ConfigError)
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: expected a mapping")
    config_from_mapping(document, source)
    return document


def _check_output(path: Path | None) -> None:
    """Refuse an --output that cannot be written, before the capture's work is done:
    a missing folder, a folder, a file that cannot be opened for writing."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"--output {path}: is a folder; name a file")
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"--output {path}: no folder {folder}; create it first")
    try:
        if path.exists():  # opened to append, so that nothing in it changes yet
            with path.open("a", encoding="utf-8"):
                pass
        else:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(descriptor)
            path.unlink()
    except OSError as error:
        raise UsageError(f"--output {path}: cannot write it: {error.strerror or error}") from None


async def _config_map(
    reader: ClusterReader,
    config: OwnConfig,
    namespace: str,
    check: Callable[[str, str], dict[str, Any]],
) -> dict[str, Any] | None:
    """One of loadaware's configuration ConfigMaps, checked; None when it is absent."""
    found = await reader.config_text(config, namespace)
    if found is None:
        return None
    text, source = found
    return check(text, f"the cluster's {source}")


# Points per series a capture takes (--range / --step + 1): each workload and node keeps
# an array of them, each answer is chunked by them, and the scenario lists them. 720h at
# 1m is 43,201; --step 1ms over 24h was 86,400,001, gigabytes and 235,000 queries.
MAX_CAPTURE_POINTS = 50_000


def _check_points(range_s: float, step_s: float) -> None:
    points = point_count(0.0, range_s, step_s)
    if points > MAX_CAPTURE_POINTS:
        shortest = math.ceil(range_s / (MAX_CAPTURE_POINTS - 1))
        raise UsageError(
            f"--range {format_duration(range_s)} at --step {format_duration(step_s)} is "
            f"{points:,} points per series, more than the {MAX_CAPTURE_POINTS:,} a capture "
            f"takes: use --step {format_duration(shortest)} or longer, or a shorter --range"
        )


MAX_KEY_FILE_BYTES = 64 * 2**10  # a key is 32 bytes or more; no key needs more than this


def _names(args: argparse.Namespace) -> Names:
    """``--anonymize`` with a random key, or keyed by ``--anonymize-key``'s file."""
    path: Path | None = getattr(args, "anonymize_key", None)
    if path is None:
        return Names(bool(args.anonymize))
    # A regular file of at most MAX_KEY_FILE_BYTES: /dev/zero was read until the kernel
    # stopped the process.
    key = read_bytes(path, "--anonymize-key file", UsageError, MAX_KEY_FILE_BYTES)
    if len(key) < KEY_BYTES:
        raise UsageError(
            f"--anonymize-key {path}: holds {len(key)} bytes, at least {KEY_BYTES} needed; "
            f"make one with: head -c {KEY_BYTES} /dev/urandom > {path}"
        )
    return Names(True, key)


async def _read_kube(args: argparse.Namespace) -> tuple[Catalog, dict[str, Any] | None,
                                                        dict[str, Any] | None]:  # fmt: skip
    reader = cluster_reader(make_client(args.kubeconfig))
    namespace = args.install_namespace
    try:
        objects = await read_cluster(reader)
        policy = descheduler = None
        if args.policy is None:
            policy = await _config_map(reader, POLICY_CONFIGMAP, namespace, _policy)
        if args.descheduler_config is None:
            descheduler = await _config_map(
                reader, DESCHEDULER_CONFIGMAP, namespace, _descheduler
            )
    finally:
        await reader.close()
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
    if usage.wrong_node and not usage.start_pods:
        raise CaptureError(
            f"no usable cAdvisor series: those of all {len(usage.wrong_node)} pods came from "
            "another node than the pod's or named none; the series need a 'node' label "
            "that Prometheus attaches from service discovery (docs/security.md)"
        )
    labels = class_labels(policy, names.anonymous)  # what the classes' selectors read
    found, silent = workloads(catalog, usage, replicas, step_s, names, labels)
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
        document["policy"] = anonymize_policy(policy, names)
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
        f"{f'; {len(usage.wrong_node)} pods with series not from their own node dropped' if usage.wrong_node else ''}"  # noqa: E501
        f"), {stats.queries} queries, {stats.samples:,} samples (largest answer "
        f"{stats.largest_answer:,})"
    )
    if stats.dropped_points:
        summary += (
            f"; {stats.dropped_points:,} points outside the range or at no finite time dropped"
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
        _check_points(args.range, args.step)
        # Every input is checked before the capture's work: the files, where it goes.
        policy = (
            _policy(*read_file(args.policy, "--policy file", PolicyError))
            if args.policy
            else None
        )
        descheduler = (
            _descheduler(*read_file(args.descheduler_config, "--descheduler-config file",
                                    ConfigError))
            if args.descheduler_config
            else None
        )  # fmt: skip
        _check_output(args.output)
        names = _names(args)
        catalog, cluster_policy, cluster_descheduler = asyncio.run(_read_kube(args))
    except (UsageError, ValueError, KubeConfigError) as error:
        err.write(f"loadaware capture: error: {error}\n")
        return EXIT_USAGE
    except (CaptureError, ClusterUnreadable) as error:
        err.write(f"loadaware capture: error: {error}\n")
        return EXIT_FAILED
    source = PrometheusSource(settings)
    show = progress_bar("querying Prometheus", err) if args.progress or err.isatty() else None
    end_s = args.end if args.end is not None else time.time()
    try:
        document, _, summary = capture(
            catalog, source, redact_url(settings.url), end_s, args.range, args.step,
            name=args.name, names=names,
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
        try:
            with args.output.open("w", encoding="utf-8") as file:
                dump(document, file)
        except OSError as error:  # checked before the capture; a disk may fill since
            err.write(f"loadaware capture: error: --output {args.output}: cannot write it: "
                      f"{error.strerror or error}\n")  # fmt: skip
            return EXIT_FAILED
    err.write(f"{summary}; {time.perf_counter() - started:.1f}s\n")
    return EXIT_OK
