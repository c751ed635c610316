"""The zygote of tests/support/zygote.py, run as a script (``python zygote_process.py``):
it imports the libraries in PRELOADED, then forks one child per request on its stdin,
which becomes ``python -m app.cli`` for that request. It imports nothing of ``tests``
or ``app`` (and no pytest): a case must find in ``sys.modules`` only what a fresh
interpreter and PRELOADED put there.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import sys
from collections.abc import Mapping
from typing import BinaryIO, TextIO, TypedDict

# What the command line imports from outside ``app`` and the standard library, where a
# case gets far enough to need it: its policy and file schemas, the Kubernetes client it
# builds before it refuses a kubeconfig, the metrics registry, the load model's numpy.
# Not what only a running server loads (fastapi, uvicorn): no case gets that far.
PRELOADED = (
    "yaml",
    "pydantic",
    "pydantic.alias_generators",
    "numpy",
    "numpy.typing",
    "orjson",
    "httpx2",
    "lightkube",
    "lightkube.config.kubeconfig",
    "lightkube.config.models",
    "lightkube.core.exceptions",
    "lightkube.models.core_v1",
    "lightkube.models.meta_v1",
    "lightkube.resources.core_v1",
    "lightkube.types",
    "prometheus_client",
    "prometheus_client.core",
    "prometheus_client.registry",
    "prometheus_client.utils",
)


class Request(TypedDict):
    """A case, as tests/support/zygote.py sends it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout: float
    stdout: str
    stderr: str
    hidden: list[str]


def serve() -> Request | None:
    """Answer each request on stdin with its child's pid as it forks, then with how the
    child ended; None in the zygote once its input ends, the request in each child."""
    while line := sys.stdin.buffer.readline():
        request: Request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        answer({"pid": pid})
        ended = os.pidfd_open(pid)
        timed_out = not select.select([ended], [], [], request["timeout"])[0]
        if timed_out:  # as subprocess.run's timeout: the child is killed
            os.kill(pid, signal.SIGKILL)
        os.close(ended)
        _, status = os.waitpid(pid, 0)
        reply = {"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out}
        answer(reply)
    return None


def answer(reply: Mapping[str, object]) -> None:
    sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
    sys.stdout.buffer.flush()


def become(request: Request) -> None:
    """Turn this forked child into ``python -m app.cli`` started for ``request``."""
    streams = [os.open(os.devnull, os.O_RDONLY)]
    for path in (request["stdout"], request["stderr"]):
        streams.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
    for fd, opened in enumerate(streams):
        os.dup2(opened, fd)  # inheritable, as a fresh process' own 0, 1 and 2
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    # New objects on 0, 1 and 2, made as the interpreter made the zygote's at its start.
    sys.stdin = reopened(0, sys.stdin)
    sys.stdout = reopened(1, sys.stdout)
    sys.stderr = reopened(2, sys.stderr)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # as ``python -m``: the working folder first
    sys.argv = ["-m", *request["argv"]]  # runpy puts the module's path first
    for name in request["hidden"]:
        sys.modules[name] = None  # type: ignore[assignment]  # "import name" fails


def reopened(fd: int, like: TextIO) -> io.TextIOWrapper:
    """A stream on ``fd`` as ``like`` (a standard stream of this interpreter) was made:
    buffered or not (PYTHONUNBUFFERED), line by line or not, its encoding, error
    handler, name and mode, and no newline translation (create_stdio in CPython)."""
    assert isinstance(like, io.TextIOWrapper)
    raw = io.FileIO(fd, like.mode, closefd=False)
    raw.name = like.name  # "<stdout>", as the interpreter names it
    buffer: BinaryIO = raw
    if not isinstance(like.buffer, io.FileIO):
        buffer = io.BufferedReader(raw) if like.mode == "r" else io.BufferedWriter(raw)
    stream = io.TextIOWrapper(
        buffer,
        encoding=like.encoding,
        errors=like.errors,
        newline="\n",
        line_buffering=like.line_buffering,
        write_through=like.write_through,
    )
    stream.mode = like.mode  # type: ignore[misc]
    return stream


if __name__ == "__main__":
    import gc
    import importlib
    import runpy

    for module in PRELOADED:
        importlib.import_module(module)
    gc.collect()
    gc.freeze()  # no collection in a child walks (and so copies) what the zygote holds
    case = serve()
    if case is None:
        sys.exit(0)
    become(case)
    del case
    runpy.run_module("app.cli", run_name="__main__", alter_sys=True)
