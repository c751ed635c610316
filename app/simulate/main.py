"""``loadaware simulate``: run a scenario under several policies and compare them."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.commandline import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    INTERRUPTED_TEXT,
    UsageError,
    add_flag,
    count,
    env_name,
    progress_bar,
    seed,
)
from app.simulate.plotting import PLOTS_HINT, plots_available
from app.simulate.policies import DEFAULT_POLICIES, KNOWN_POLICIES, available, unavailable_reason

if TYPE_CHECKING:
    from app.simulate.cluster import Run
    from app.simulate.fidelity import Fidelity
    from app.simulate.scenario import Scenario
    from app.simulate.summary import Summary

# The scenario schema, the simulation (numpy, the planner) and the summaries are imported
# in the functions that use them: `--help` and a bad flag pay for none of them.

DESCRIPTION = """\
Run a scenario (a built-in NAME or a YAML FILE) under several scheduling policies on
the same seed, with the production load model, estimate and descheduler planner
making every decision, and print one Markdown table row per policy.
"""
EPILOG = (
    "exit codes: 0 done, 1 a failure while running (out of memory, output that cannot "
    "be written), 2 bad usage or configuration, " + INTERRUPTED_TEXT
)


def _simulate_flag(container: Any, flag: str, **kwargs: Any) -> None:
    """A flag of simulate's own: its variable says so (LOADAWARE_SIMULATE_JSON); the
    older generic name (LOADAWARE_JSON) still works, with a deprecation warning."""
    add_flag(container, flag, command="simulate", old_variable=env_name(flag), **kwargs)


def add_parser(components: Any) -> None:
    parser = components.add_parser(
        "simulate",
        help="compare scheduling policies on a simulated cluster",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("scenario", nargs="?", help="built-in scenario name or scenario file")
    _simulate_flag(parser, "--list", action="store_true", help="list the built-in scenarios")
    _simulate_flag(
        parser,
        "--policies",
        type=policy_list,
        metavar="NAMES",
        default_text=f"every available one of {','.join(DEFAULT_POLICIES)}",
        help="comma-separated policies",
    )
    _simulate_flag(
        parser,
        "--seed",
        type=seed,
        metavar="N",
        default_text="the scenario's own",
        help="override the scenario's seed",
    )
    _simulate_flag(
        parser,
        "--seeds",
        type=count,
        metavar="N",
        default=1,
        help="run N seeds (the scenario's seed and the N-1 after it) and report each "
        "number's median and range across them; plots show the first seed",
    )
    _simulate_flag(
        parser,
        "--jobs",
        type=count,
        metavar="N",
        default_text="1 for a scenario under 500,000 node-steps (nodes x steps), else the "
        "CPUs this process may use",
        help="run the policies in N processes at once (1: one after another, with a progress "
        "bar on a terminal)",
    )
    _simulate_flag(parser, "--json", action="store_true", help="print JSON instead of Markdown")
    _simulate_flag(
        parser,
        "--plots",
        type=Path,
        metavar="DIR",
        default_text="none",
        help="write a PNG heat map per scenario into DIR (needs the simulate extra)",
    )
    _simulate_flag(
        parser,
        "--progress",
        action="store_true",
        help="show progress even when stderr is not a terminal (a line per policy done "
        "with --jobs above 1)",
    )
    parser.set_defaults(run=run)


def policy_list(text: str) -> list[str]:
    """``--policies``: known names, comma-separated, at least one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(
            f"expected one or more of {','.join(KNOWN_POLICIES)}, got {text!r}"
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise argparse.ArgumentTypeError(
            f"{', '.join(twice)} named twice: name each policy once, got {text!r}"
        )
    for name in names:
        reason = unavailable_reason(name)
        if reason is not None:
            raise argparse.ArgumentTypeError(f"{name}: {reason}")
    return names


def first_sentence(text: str) -> str:
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def list_scenarios(out: TextIO) -> None:
    from app.simulate.scenario import builtin_names, load_scenario

    for name in builtin_names():
        scenario = load_scenario(name)
        lines = textwrap.wrap(first_sentence(scenario.description), width=72) or [""]
        out.write(f"{name:20} {lines[0]}\n")
        for line in lines[1:]:
            out.write(f"{'':20} {line}\n")


def check_plots_folder(folder: Path) -> None:
    """Refuse --plots before the simulation runs, rather than after."""
    if not plots_available():
        raise UsageError(f"--plots {folder}: matplotlib is not installed; {PLOTS_HINT}")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--plots {folder}: not a folder (name a folder for the PNG files)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--plots {folder}: cannot create it: {error.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--plots {folder}: not writable by this user")
    try:  # what access() cannot tell: /proc, a read-only mount, root's own refusals
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".loadaware-", suffix=".png"):
            pass
    except OSError as error:
        raise UsageError(
            f"--plots {folder}: cannot create a file in it: {error.strerror}"
        ) from None


# Below this many node-steps (nodes x steps) one policy's run takes well under a second,
# less than a worker process takes to start and import numpy: burst (2,400) ran in 0.55 s
# in one process and 1.7 s in two. thousand-nodes (2.9 million) takes about 1 s a policy.
PARALLEL_FROM_NODE_STEPS = 500_000


def default_jobs(scenario: Scenario) -> int:
    """--jobs when it is not given: 1 for a small scenario, else every usable CPU."""
    nodes = sum(group.count for group in scenario.nodes)
    return usable_cpus() if nodes * scenario.steps >= PARALLEL_FROM_NODE_STEPS else 1


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _timed_run(scenario: Scenario, name: str) -> tuple[str, Run, float]:
    from app.simulate.cluster import SimulatedCluster
    from app.simulate.policies import plan_for

    started = time.perf_counter()
    run = SimulatedCluster(scenario, plan_for(name)).simulate()
    return name, run, time.perf_counter() - started


def _ignore_interrupts() -> None:
    """In a worker: Ctrl-C is the main process' to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def simulate_all(
    scenario: Scenario, policies: Sequence[str], show_progress: bool, err: TextIO, jobs: int = 1
) -> list[tuple[Run, float]]:
    """Every policy's run, in ``policies`` order. With ``jobs`` above 1 the policies run
    in that many processes, each independent of the others (the slowest, the
    ``+desched`` ones, start first)."""
    from app.simulate.cluster import SimulatedCluster
    from app.simulate.policies import plan_for

    if jobs <= 1 or len(policies) <= 1:
        results = []
        for name in policies:
            progress = progress_bar(name, err) if show_progress else None
            started = time.perf_counter()
            run = SimulatedCluster(scenario, plan_for(name)).simulate(progress)
            results.append((run, time.perf_counter() - started))
        return results
    workers = min(jobs, len(policies))
    if show_progress:
        err.write(f"running {len(policies)} policies in {workers} processes\n")
        err.flush()
    context = multiprocessing.get_context("spawn")
    slowest_first = sorted(policies, key=lambda name: not name.endswith("+desched"))
    found: dict[str, tuple[Run, float]] = {}
    pool = context.Pool(workers, initializer=_ignore_interrupts)
    try:
        pending = [pool.apply_async(_timed_run, (scenario, name)) for name in slowest_first]
        while pending:
            pending[0].wait(0.2)  # a short wait, so that Ctrl-C is seen at once
            for result in [r for r in pending if r.ready()]:
                pending.remove(result)
                name, run, seconds = result.get()
                found[name] = (run, seconds)
                if show_progress:
                    err.write(f"{name:24} done in {seconds:.1f}s\n")
                    err.flush()
        pool.close()
    finally:
        pool.terminate()  # Ctrl-C or an error: the other runs are not waited for
        pool.join()
    return [found[name] for name in policies]


def replay_fidelity(scenario: Scenario, results: Sequence[tuple[Run, float]]) -> Fidelity | None:
    """For a captured scenario: how well ``default`` from the real placement reproduces
    what Prometheus recorded (run here when ``default`` was not asked for)."""
    from app.simulate.cluster import SimulatedCluster
    from app.simulate.fidelity import fidelity
    from app.simulate.policies import plan_for

    if scenario.observed is None:
        return None
    runs = [r for r, _ in results if r.policy == "default"]
    default = runs[0] if runs else SimulatedCluster(scenario, plan_for("default")).simulate()
    return fidelity(default, scenario)


def observed_node_hours_line(node_hours: float) -> str:
    return (
        f"the cluster ran {node_hours:.1f} node-hours over the range (the capture's "
        "observed.nodeCount): the +autoscaler policies' node-hours are what it would run"
    )


def run(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    from app.simulate.scenario import SIZE_HINT, ScenarioError, check_size, load_scenario

    # Looked up now, not at import: the CLI stands in for a stdout that was closed.
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if args.list:
        list_scenarios(out)
        return EXIT_OK
    if not args.scenario:
        err.write("loadaware simulate: error: name a scenario or use --list\n")
        return EXIT_USAGE
    try:
        scenario = load_scenario(args.scenario)
        if args.seed is not None:
            scenario = scenario.model_copy(update={"seed": args.seed})
        policies = args.policies if args.policies is not None else available()
        if args.jobs is None:
            args.jobs = default_jobs(scenario)
        check_size(scenario, len(policies))
        if not scenario.workloads:
            raise UsageError(
                f"{args.scenario}: the scenario has no workloads, so every policy would place "
                "nothing: add at least one under workloads"
            )
        if args.plots is not None:
            check_plots_folder(args.plots)
    except (ScenarioError, UsageError) as error:
        err.write(f"loadaware simulate: error: {error}\n")
        return EXIT_USAGE
    # The simulation and its summaries (numpy, the simulated cluster) once the scenario
    # and the flags that depend on it are known good.
    from app.simulate.classes import class_table
    from app.simulate.summary import (
        LEGEND,
        SPREAD_NOTE,
        as_json,
        markdown_table,
        spread_table,
        summarise,
        verdict,
        write_plots,
    )

    skipped = [p for p in DEFAULT_POLICIES if p not in policies and unavailable_reason(p)]
    show_progress = args.progress or err.isatty()
    seeds = [scenario.seed + i for i in range(args.seeds)]
    # Only the first seed's runs are kept whole (plots, timings); of the others only
    # their numbers, so that memory does not grow with --seeds.
    results: list[tuple[Run, float]] = []
    summaries: list[list[Summary]] = []
    seconds: list[dict[str, float]] = []
    try:
        for seed in seeds:
            seeded = scenario.model_copy(update={"seed": seed})
            runs = simulate_all(seeded, policies, show_progress, err, args.jobs)
            results = results or runs
            summaries.append([summarise(r) for r, _ in runs])
            seconds.append({r.policy: round(s, 3) for r, s in runs})
    except MemoryError:
        err.write(f"loadaware simulate: error: {scenario.name}: out of memory; {SIZE_HINT}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write(f"\nloadaware simulate: interrupted: {scenario.name} not finished\n")
        err.flush()
        return EXIT_INTERRUPTED
    replay = replay_fidelity(scenario, results)
    ran = scenario.observed.node_hours(scenario.duration_s) if scenario.observed else None
    if args.json:
        documents = []
        for seed, seed_summaries, seed_seconds in zip(seeds, summaries, seconds, strict=True):
            document = as_json(scenario.name, seed, seed_summaries)
            document["seconds"] = seed_seconds
            if replay is not None:
                document["fidelity"] = replay.as_json()
            if ran is not None:
                document["observedNodeHours"] = round(ran, 3)
            documents.append(document)
        body: Any = documents[0] if len(documents) == 1 else {"seeds": seeds, "runs": documents}
        out.write(json.dumps(body, indent=2) + "\n")
    else:
        if replay is not None:
            out.write(replay.line() + "\n\n")
        if ran is not None:
            out.write(observed_node_hours_line(ran) + "\n\n")
        if len(seeds) == 1:
            out.write(f"### {scenario.name} (seed {scenario.seed})\n\n")
            out.write(markdown_table(summaries[0]) + "\n")
        else:
            out.write(f"### {scenario.name} (seeds {seeds[0]}-{seeds[-1]})\n\n")
            out.write(SPREAD_NOTE + "\n\n")
            out.write(spread_table(summaries) + "\n")
        out.write("\n" + verdict(summaries) + "\n")
        by_class = class_table(scenario, [r for r, _ in results], [r.policy for r, _ in results])
        if by_class:  # classes of pods (spec.classes): each class's own numbers, first seed
            out.write(f"\nby class of pods (seed {seeds[0]}):\n\n{by_class}\n")
        out.write("\n" + textwrap.fill(LEGEND, width=100) + "\n")
        timings = ", ".join(f"{r.policy} {s:.1f}" for r, s in results)
        out.write(f"\nseconds per policy (seed {seeds[0]}): {timings}\n")
        for name in skipped if args.policies is None else []:
            out.write(f"\n{name}: not run: {unavailable_reason(name)}\n")
    if args.plots is not None:
        try:
            path = write_plots([r for r, _ in results], args.plots)
        except OSError as error:  # the folder was writable when the run started
            err.write(f"loadaware simulate: error: --plots {args.plots}: {error}\n")
            return EXIT_FAILED
        err.write(f"plots: {path}\n")
    return EXIT_OK
