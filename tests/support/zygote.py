"""``python -m app.cli`` in a fresh process for each case, without paying for every
case's start-up: a zygote (as Android starts its apps, and as some test runners run
their tests).

One helper process, started once per pytest worker that asks for it, imports the
third-party libraries the command line uses (PRELOADED in zygote_process.py: pydantic,
yaml, numpy, the Kubernetes and Prometheus clients; never a module of ``app``), freezes
them out of the garbage collector's sight, then waits. For each case it forks a child
that takes the case's environment, working folder, argv and standard streams, and runs
``app.cli`` as ``python -m app.cli`` does (runpy, as ``__main__``, ``sys.path[0]`` the
working folder). The child imports ``app`` afresh, so what ``app`` does at import time
and what it loads lazily are what an operator meets; it ends as an interpreter does
(SystemExit or a traceback, threads joined, atexit, the streams flushed, every module
torn down, so that what a fresh process would print at its end, it prints too), and
its exit status, stdout and stderr are its own. A case then costs its own import of
``app``, its work and its end: a refused flag 0.04 CPU-s instead of 0.075, a policy
check 0.10 instead of 0.22, a command that builds a Kubernetes client 0.12 instead of
0.35 (on the 2-core CI machine, bytecode written as scripts/test has it).

What differs from a fresh interpreter, and why it does not matter where this is used:
- The libraries in PRELOADED are already imported. A case that would not import them
  finds them in ``sys.modules``. What a command loads is checked in tests/test_cli.py,
  in fresh interpreters. A case may hide a module (``hidden``: an optional library not
  installed), as ``python -c "sys.modules['matplotlib'] = None; ..."`` did.
- A preloaded library read the environment at its import (numpy its thread counts,
  prometheus_client its multiprocess folder): the zygote starts with the same clean
  environment as the cases (clean_environment), and a case only adds LOADAWARE_*
  variables, which no library reads. The child replaces ``os.environ`` (and so the C
  environment) with the case's.
- Signal dispositions are the zygote's, which are a fresh interpreter's: it started as
  one, from subprocess, and sets none. Nor does it configure logging: the libraries'
  loggers are as their import left them, as in a fresh interpreter that imports them.
  The hash seed is the zygote's for every case; ``random`` reseeds itself in a forked
  child.
- Descriptors: the child gets /dev/null, then a file each for stdout and stderr, on 0, 1
  and 2, and closes every other descriptor, as subprocess does with close_fds; stdin
  is /dev/null, not whatever the test run had. Its ``sys.std*`` objects are new, made
  as the interpreter made the zygote's (reopened: buffered or not by PYTHONUNBUFFERED,
  encoding, error handler, name), which a fresh interpreter in this environment makes.
- No thread runs in the zygote but numpy's OpenBLAS pool, idle; a fork copies only
  the thread that forks, and OpenBLAS stops its pool before a fork (its atfork
  handler) and starts it again when it is next used.
- What the zygote imported is frozen (gc.freeze): a child's collections skip it, as
  nothing of it is garbage. Unfrozen, every case's collections and its end walked, and
  so copied page by page, the whole preloaded heap: 0.07 CPU-s a case. Its end (the
  modules torn down) still costs about 0.02 CPU-s a case more than in a fresh
  interpreter: leaving the preloaded modules out of it would save that, and would
  hide what their teardown prints, so they are torn down.
So what depends on a real start stays a real subprocess, in the tests that use this:
Ctrl-C (the disposition of SIGINT in a background shell), a closed stdout at start
(``sys.stdout`` is None only in an interpreter started so), a closed pipe, what a test
does to a process while it runs (a signal, a port taken, a file changed), and every
check of what a command imports. tests/test_cli_bad_input.py checks that a case ends
the same in the zygote as in a fresh interpreter.
"""

from __future__ import annotations

import json
import locale
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[2]


def clean_environment(home: Path) -> dict[str, str]:
    """This process' environment as an operator's shell would have it: no LOADAWARE_*
    variables, no kubeconfig, no in-cluster API server, and HOME in ``home``."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOADAWARE_") and k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    return {**kept, "HOME": str(home)}


def decoded(raw: bytes) -> str:
    """Output as ``subprocess.run(..., text=True)`` gives it: the locale's encoding,
    universal newlines."""
    text = raw.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Zygote:
    """The client side: starts the zygote, asks it to run one case at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cases = 0
        (folder / "home").mkdir(parents=True)
        self.log = folder / "zygote.log"
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("zygote_process.py"))],
                cwd=ROOT,
                env=clean_environment(self.folder / "home"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path = ROOT,
        timeout: float = 60,
        *,
        stdout_to: Path | None = None,
        hidden: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """``python -m app.cli *argv`` with this environment and working folder, as
        ``subprocess.run(..., capture_output=True, text=True, timeout=timeout)``.
        ``stdout_to``: a file stdout is written to instead (/dev/full), the result's
        stdout then empty. ``hidden``: modules the case finds missing, as an optional
        library that is not installed (``sys.modules[name] = None``)."""
        self.cases += 1
        out, err = (self.folder / f"{self.cases}.{name}" for name in ("out", "err"))
        request = {"argv": argv, "env": env, "cwd": str(cwd), "timeout": timeout,
                   "stdout": str(stdout_to or out), "stderr": str(err),
                   "hidden": list(hidden)}  # fmt: skip
        stdin, stdout = self._pipes()
        case = None
        try:
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
            case = json.loads(stdout.readline() or "null")  # {"pid": ...}, as it forks
            reply = stdout.readline()
        except BaseException:
            # Interrupted (a test's own timeout): the case and the zygote are stopped (its
            # reply would answer the next request), and a new zygote started.
            if case:  # not yet reaped by the zygote, so the pid is still the case's
                os.kill(case["pid"], signal.SIGKILL)
            self.process.kill()
            self.process.wait()
            self.process = self._start()
            raise
        if not reply:
            raise RuntimeError(f"the zygote ended: {self.log.read_text(errors='replace')}")
        ended = json.loads(reply)
        args = [sys.executable, "-m", "app.cli", *argv]
        if ended["timed_out"]:
            raise subprocess.TimeoutExpired(args, timeout)
        said = b"" if stdout_to else out.read_bytes()
        return subprocess.CompletedProcess(
            args, ended["returncode"], decoded(said), decoded(err.read_bytes())
        )

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def stop(self) -> None:
        stdin, _ = self._pipes()
        stdin.close()  # the zygote ends at the end of its input
        try:
            self.process.wait(timeout=30)
        finally:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="session")
def cli_zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """One zygote for this worker, started when a test first asks for it."""
    zygote = Zygote(tmp_path_factory.mktemp("zygote"))
    try:
        yield zygote
    finally:
        zygote.stop()
