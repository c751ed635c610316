"""``loadaware simulate``: run a scenario under several policies and compare them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from app.simulate.cluster import Run, SimulatedCluster
from app.simulate.policies import DEFAULT_POLICIES, available, plan_for, unavailable_reason
from app.simulate.report import (
    PLOTS_HINT,
    as_json,
    markdown_table,
    plots_available,
    summarise,
    write_plots,
)
from app.simulate.scenario import Scenario, ScenarioError, builtin_names, load_scenario

DESCRIPTION = """\
Run a scenario (a built-in NAME or a YAML FILE) under several scheduling policies on
the same seed, with the production load model, estimate and descheduler planner
making every decision, and print one Markdown table row per policy.
"""


def add_parser(components: Any) -> None:
    parser = components.add_parser(
        "simulate",
        help="compare scheduling policies on a simulated cluster",
        description=DESCRIPTION,
    )
    parser.add_argument("scenario", nargs="?", help="built-in scenario name or scenario file")
    parser.add_argument("--list", action="store_true", help="list the built-in scenarios")
    parser.add_argument(
        "--policies",
        default=None,
        help="comma-separated policies (default: every available one of "
        f"{','.join(DEFAULT_POLICIES)})",
    )
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument(
        "--plots",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a PNG heat map per scenario into DIR",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar even when stderr is not a terminal",
    )
    parser.set_defaults(run=run)


def list_scenarios(out: TextIO) -> None:
    for name in builtin_names():
        scenario = load_scenario(name)
        first_line = scenario.description.strip().splitlines()[0] if scenario.description else ""
        out.write(f"{name:24} {first_line}\n")


def progress_bar(label: str, stream: TextIO) -> Callable[[int, int], None]:
    width = 30
    last = [-1]

    def show(done: int, total: int) -> None:
        filled = done * width // total
        if filled == last[0] and done != total:
            return
        last[0] = filled
        stream.write(f"\r{label:24} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done == total:
            stream.write("\n")
        stream.flush()

    return show


def simulate_all(
    scenario: Scenario, policies: Sequence[str], show_progress: bool, err: TextIO
) -> list[tuple[Run, float]]:
    results = []
    for name in policies:
        progress = progress_bar(name, err) if show_progress else None
        started = time.perf_counter()
        run = SimulatedCluster(scenario, plan_for(name)).simulate(progress)
        results.append((run, time.perf_counter() - started))
    return results


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    if args.list:
        list_scenarios(out)
        return 0
    if not args.scenario:
        err.write("loadaware simulate: name a scenario or use --list\n")
        return 2
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as error:
        err.write(f"loadaware simulate: {error}\n")
        return 2
    if args.seed is not None:
        scenario = scenario.model_copy(update={"seed": args.seed})
    if args.policies is None:
        policies = available()
    else:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        for name in policies:
            reason = unavailable_reason(name)
            if reason is not None:
                err.write(f"loadaware simulate: --policies: {name}: {reason}\n")
                return 2
    skipped = [p for p in DEFAULT_POLICIES if p not in policies and unavailable_reason(p)]
    show_progress = args.progress or err.isatty()
    results = simulate_all(scenario, policies, show_progress, err)
    summaries = [summarise(r) for r, _ in results]
    if args.json:
        document = as_json(scenario.name, scenario.seed, summaries)
        document["seconds"] = {r.policy: round(s, 3) for r, s in results}
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(f"### {scenario.name} (seed {scenario.seed})\n\n")
        out.write(markdown_table(summaries) + "\n")
        timings = ", ".join(f"{r.policy} {s:.1f}" for r, s in results)
        out.write(f"\nseconds per policy: {timings}\n")
        for name in skipped if args.policies is None else []:
            out.write(f"\n{name}: not run: {unavailable_reason(name)}\n")
    if args.plots is not None:
        if plots_available():
            path = write_plots([r for r, _ in results], args.plots)
            err.write(f"plots: {path}\n")
        else:
            err.write(f"loadaware simulate: no plots written: {PLOTS_HINT}\n")
    elif not plots_available() and not args.json:
        err.write(f"{PLOTS_HINT}, then pass --plots DIR\n")
    return 0
