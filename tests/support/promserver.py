"""Run a real Prometheus (Debian's 2.42) for tests, and backfill data into it.

- `PrometheusServer`: one `prometheus` process on 127.0.0.1:<free port> over its
  own TSDB directory and a config with no scrape targets; `start()` waits for
  `/-/ready` and fails with the log tail if it does not come up.
- `import_openmetrics`: raw series via `promtool tsdb create-blocks-from openmetrics`.
- `backfill_recording_rules`: evaluates a rules file with
  `promtool tsdb create-blocks-from rules` in dependency stages (a rule that
  reads another rule's output needs that output in blocks the server has
  loaded), restarting the server after each stage so it opens the new blocks.

Backfilled blocks overlap in time, and Prometheus merges overlapping blocks
("vertical compaction") about a minute after it starts.  Values do not change,
but it costs CPU: call `PrometheusServer.wait_for_compaction()` before timing
anything.  The server runs with min = max block duration (2 h), so blocks that
do not overlap are never compacted.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.http_client import default_tls
from tests.support.ports import free_port

PROMETHEUS_BIN = os.environ.get("LOADAWARE_PROMETHEUS", "prometheus")
PROMTOOL_BIN = os.environ.get("LOADAWARE_PROMTOOL", "promtool")

_MINIMAL_CONFIG = """\
# loadaware test server: no scrape targets, data comes from backfilled blocks.
global:
  scrape_interval: 15s
  evaluation_interval: 15s
scrape_configs: []
"""

_live: set[PrometheusServer] = set()
_ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


class PrometheusError(RuntimeError):
    """Prometheus or promtool failed; the message carries their output."""


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise PrometheusError(
            f"{name!r} not found on PATH; install Debian's prometheus package "
            "(scripts/setup --for-tests does) to run the Prometheus tests"
        )
    return found


def _die_with_parent() -> None:
    # Linux: SIGTERM the child when the Python process that started it dies,
    # so a killed pytest run leaves no Prometheus behind.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _run(args: Sequence[str], what: str, timeout: float = 300.0) -> str:
    proc = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise PrometheusError(
            f"{what} failed (exit {proc.returncode}): {' '.join(args)}\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
        )
    return proc.stdout + proc.stderr


class PrometheusServer:
    """A Prometheus process serving `tsdb_dir` on 127.0.0.1; also a context manager.

    `workdir` holds the config and the log; the TSDB directory defaults to
    `workdir/tsdb`.  The port stays the same across `restart()`.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        tsdb_dir: Path | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.workdir = Path(workdir)
        self.tsdb_dir = Path(tsdb_dir) if tsdb_dir else self.workdir / "tsdb"
        self.port = port or free_port()
        self.extra_args = tuple(extra_args)
        self.config_path = self.workdir / "prometheus.yml"
        self.log_path = self.workdir / "prometheus.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def start(self, timeout: float = 30.0) -> None:
        if self.running:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(_MINIMAL_CONFIG)
        args = [
            _binary(PROMETHEUS_BIN),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.tsdb_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-admin-api",
            # Backfilled data lies partly in the future; keep it all.
            "--storage.tsdb.retention.time=30d",
            # Only one block level: non-overlapping blocks are never compacted.
            "--storage.tsdb.min-block-duration=2h",
            "--storage.tsdb.max-block-duration=2h",
            "--log.level=info",
            *self.extra_args,
        ]
        log = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        _live.add(self)
        self.started_at = time.monotonic()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        with httpx.Client(timeout=2.0, verify=default_tls()) as client:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    code = self._proc.returncode
                    self._proc = None
                    _live.discard(self)
                    raise PrometheusError(
                        f"prometheus exited with code {code} before becoming ready "
                        f"on {self.url}.\n--- log tail ({self.log_path}) ---\n{self.log_tail()}"
                    )
                try:
                    r = client.get(f"{self.url}/-/ready")
                    if r.status_code == 200:
                        return
                    last_error = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    last_error = repr(exc)
                time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise PrometheusError(
            f"prometheus on {self.url} not ready after {timeout:.0f}s ({last_error}).\n"
            f"--- log tail ({self.log_path}) ---\n{tail}"
        )

    def stop(self, timeout: float = 15.0) -> None:
        proc, self._proc = self._proc, None
        _live.discard(self)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def block_ranges(self) -> list[tuple[int, int]]:
        """(minTime, maxTime) in ms of the blocks on disk, sorted."""
        out = []
        for meta_file in self.tsdb_dir.glob("*/meta.json"):
            if not _ULID.fullmatch(meta_file.parent.name):
                continue  # a block being written or deleted
            with contextlib.suppress(FileNotFoundError, ValueError):
                meta = json.loads(meta_file.read_text())
                out.append((int(meta["minTime"]), int(meta["maxTime"])))
        return sorted(out)

    def overlapping_blocks(self) -> bool:
        ranges = self.block_ranges()
        return any(b[0] < a[1] for a, b in itertools.pairwise(ranges))

    def wait_for_compaction(self, timeout: float = 120.0) -> float:
        """Block until Prometheus has merged all overlapping blocks; returns the
        seconds waited (0 if none overlapped).

        It merges them about a minute after start.  With the single 2h block
        level this server runs with, nothing else is ever compacted, so after
        this the server does no background work.
        """
        t0 = time.monotonic()
        while self.overlapping_blocks():
            if time.monotonic() - t0 > timeout:
                raise PrometheusError(
                    f"blocks still overlap after {timeout:.0f}s\n{self.log_tail()}"
                )
            time.sleep(0.5)
        return time.monotonic() - t0

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_live):
        server.stop()


# --------------------------------------------------------------------------- backfill


def import_openmetrics(
    openmetrics_path: Path, tsdb_dir: Path, max_block_duration: str = "54h"
) -> None:
    """Turn an OpenMetrics file into blocks directly inside `tsdb_dir`.

    Do this while no server runs on `tsdb_dir` (or restart it afterwards).
    promtool re-reads the whole file once per output block, so a long block
    duration (54h is a compatible range) is ~4x faster than the default 2h
    for a day of data.
    """
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    _run(
        [
            _binary(PROMTOOL_BIN), "tsdb", "create-blocks-from", "openmetrics",
            "--quiet", f"--max-block-duration={max_block_duration}",
            str(openmetrics_path), str(tsdb_dir),
        ],
        "promtool create-blocks-from openmetrics",
    )


_NAME_CHARS = r"[A-Za-z0-9_:]"


def _reads(expr: str, name: str) -> bool:
    return re.search(rf"(?<!{_NAME_CHARS}){re.escape(name)}(?!{_NAME_CHARS})", expr) is not None


def rule_stages(rules_doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Split a rules file into stages that promtool can backfill one after another.

    Stage k holds the recording rules whose inputs are all raw series or the
    outputs of stages < k.  Groups keep their names and intervals, so the
    evaluation timestamps are those a live Prometheus would use.
    """
    rules = [
        (gi, rule) for gi, group in enumerate(rules_doc["groups"])
        for rule in group["rules"] if "record" in rule
    ]
    recorded = {rule["record"] for _, rule in rules}
    level: dict[str, int] = {}
    remaining = list(rules)
    while remaining:
        progressed = []
        for gi, rule in remaining:
            deps = [n for n in recorded if n != rule["record"] and _reads(rule["expr"], n)]
            if all(d in level for d in deps):
                level[rule["record"]] = 1 + max((level[d] for d in deps), default=-1)
                progressed.append((gi, rule))
        if not progressed:
            raise ValueError("recording rules depend on each other in a cycle")
        remaining = [r for r in remaining if r not in progressed]

    stages: list[dict[str, Any]] = []
    for k in range(max(level.values(), default=-1) + 1):
        groups = []
        for gi, group in enumerate(rules_doc["groups"]):
            picked = [r for g, r in rules if g == gi and level[r["record"]] == k]
            if picked:
                groups.append({**{k2: v for k2, v in group.items() if k2 != "rules"},
                               "rules": picked})
        stages.append({"groups": groups})
    return stages


@dataclass
class BackfillReport:
    stages: list[list[str]] = field(default_factory=list)  # recorded names per stage
    seconds: list[float] = field(default_factory=list)  # promtool + restart per stage


def backfill_recording_rules(
    server: PrometheusServer,
    rules_doc: dict[str, Any],
    start: float,
    end: float,
    *,
    stage_delay: float = 0.0,
    eval_interval: str = "30s",
) -> BackfillReport:
    """Evaluate `rules_doc` over [start, end] into `server`'s TSDB, stage by stage.

    Stage k starts at `start + k * stage_delay`, so that its first windows
    are already filled by the stages before.  `eval_interval` applies only to groups without
    an `interval:`; the step of each evaluation is the group's interval.
    The server is running again (with every stage loaded) on return.
    """
    report = BackfillReport()
    stages = rule_stages(rules_doc)
    server.start()
    with tempfile.TemporaryDirectory(prefix="loadaware-rules-") as tmp:
        for k, stage in enumerate(stages):
            t0 = time.monotonic()
            rules_file = Path(tmp) / f"stage{k}.yaml"
            rules_file.write_text(yaml.safe_dump(stage, sort_keys=False))
            out_dir = Path(tmp) / f"blocks{k}"
            stage_start = start + k * stage_delay
            _run(
                [
                    _binary(PROMTOOL_BIN), "tsdb", "create-blocks-from", "rules",
                    "--quiet",
                    f"--url={server.url}",
                    f"--start={int(stage_start)}",
                    f"--end={int(end)}",
                    f"--output-dir={out_dir}",
                    f"--eval-interval={eval_interval}",
                    str(rules_file),
                ],
                f"promtool create-blocks-from rules (stage {k})",
            )
            for block in out_dir.iterdir():
                if (block / "meta.json").exists():
                    shutil.move(str(block), server.tsdb_dir / block.name)
            server.restart()
            report.stages.append([r["record"] for g in stage["groups"] for r in g["rules"]])
            report.seconds.append(time.monotonic() - t0)
    return report


@contextlib.contextmanager
def temporary_prometheus(prefix: str = "loadaware-prom-") -> Iterator[PrometheusServer]:
    """A stopped server in a fresh temp dir, removed (with the process) on exit."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    server = PrometheusServer(workdir)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def promtool_test_rules(
    folder: Path, rules: Path, evaluation_interval: str, tests: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` on a copy of ``rules`` in ``folder``, with ``tests`` (each
    a group of input series and expectations) evaluated every ``evaluation_interval``."""
    (folder / rules.name).write_text(rules.read_text())
    document = {
        "rule_files": [rules.name],
        "evaluation_interval": evaluation_interval,
        "tests": tests,
    }
    path = folder / f"{rules.stem}_test.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run(
        [PROMTOOL_BIN, "test", "rules", str(path)],
        capture_output=True, text=True, check=False, timeout=120, cwd=folder,
    )  # fmt: skip
