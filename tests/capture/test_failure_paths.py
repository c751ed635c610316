"""What ``capture``, ``explain`` and the components say when the API server cannot be
read, or an input cannot be used: one line naming the input, and the documented exit
code (1: the cluster could not be read; 2: bad usage or configuration), never a
traceback. Capture's own inputs (``--output``, ``--policy``, ``--descheduler-config``)
are checked before it reads anything, so a capture's work is never lost to them.

Each case runs the real command line in a process forked by the CLI's zygote
(tests/support/zygote.py), with a clean environment, as an operator would meet it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from tests.support.http_stub import serving
from tests.support.zygote import Zygote, clean_environment

DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port
NO_PROMETHEUS = ["--prometheus-url", DOWN]


class NotAnApiServer(BaseHTTPRequestHandler):
    """A web server that knows no Kubernetes path: 404 and an HTML page to everything."""

    def do_GET(self) -> None:
        body = b"<html><body>no such page</body></html>"
        self.send_response(404, "File not found")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web_server() -> Iterator[str]:
    with serving(NotAnApiServer) as url:
        yield url


def kubeconfig(server: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": "abc"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


POLICY_WITHOUT_SYNC = "spec:\n  syncPolicy: []\n"


@dataclass(frozen=True)
class Case:
    argv: list[str]  # "@name": the file ``name`` below; "@web": the web server's URL
    says: list[str]  # every one of these is in the error line
    code: int
    files: dict[str, str | bytes] = field(default_factory=dict)


DOWN_CONFIG: dict[str, str | bytes] = {"kc.yaml": kubeconfig(DOWN)}
CAPTURE = ["capture", "--kubeconfig", "@kc.yaml", *NO_PROMETHEUS]

CASES: dict[str, Case] = {
    # --- the API server ---
    "capture: the API server is down": Case(
        CAPTURE, ["cannot list", "cannot reach the API server at http://127.0.0.1:9"], 1,
        DOWN_CONFIG),
    "capture: not an API server": Case(
        CAPTURE, ["cannot list", "is not a Kubernetes API server", "404"], 1,
        {"kc.yaml": "@web"}),
    "capture: an empty kubeconfig": Case(
        CAPTURE, ["kc.yaml", "empty or not a kubeconfig"], 2, {"kc.yaml": ""}),
    "capture: a kubeconfig that is no mapping": Case(
        CAPTURE, ["kc.yaml", "empty or not a kubeconfig"], 2, {"kc.yaml": "[1, 2]\n"}),
    "capture: a binary kubeconfig": Case(
        CAPTURE, ["kc.yaml", "not UTF-8"], 2, {"kc.yaml": b"\xff\xfe\x00"}),
    "explain pod: the API server is down": Case(
        ["explain", "pod", "shop/web", "--kubeconfig", "@kc.yaml"],
        ["cannot read", "cannot reach the API server at http://127.0.0.1:9"], 1, DOWN_CONFIG),
    "explain node: not an API server": Case(
        ["explain", "node", "n1", "--kubeconfig", "@kc.yaml"],
        ["cannot read", "is not a Kubernetes API server", "404"], 1, {"kc.yaml": "@web"}),
    "explain node: an empty kubeconfig": Case(
        ["explain", "node", "n1", "--kubeconfig", "@kc.yaml"],
        ["kc.yaml", "empty or not a kubeconfig"], 2, {"kc.yaml": ""}),
    "extender at start: an empty kubeconfig": Case(
        ["extender", "--kubeconfig", "@kc.yaml"],
        ["kc.yaml", "empty or not a kubeconfig"], 2, {"kc.yaml": ""}),
    "descheduler at start: an empty kubeconfig": Case(
        ["descheduler", "--once", "--dry-run", "--no-leader-elect", *NO_PROMETHEUS,
         "--kubeconfig", "@kc.yaml"],
        ["kc.yaml", "empty or not a kubeconfig"], 2, {"kc.yaml": ""}),
    # --- capture's own inputs, refused before the API server is asked (it is down
    # here: a check made after reading the cluster would say so instead) ---
    "capture: --output in a missing folder": Case(
        [*CAPTURE, "--output", "@missing/scenario.yaml"], ["--output", "no folder"], 2,
        DOWN_CONFIG),
    "capture: --output is a folder": Case(
        [*CAPTURE, "--output", "@"], ["--output", "is a folder"], 2, DOWN_CONFIG),
    "capture: --output cannot be written": Case(
        [*CAPTURE, "--output", "/proc/version"], ["--output /proc/version", "cannot write"],
        2, DOWN_CONFIG),
    "capture: --policy that does not validate": Case(
        [*CAPTURE, "--policy", "@p.yaml"], ["p.yaml", "syncPolicy"], 2,
        {**DOWN_CONFIG, "p.yaml": POLICY_WITHOUT_SYNC}),
    "capture: a binary --policy": Case(
        [*CAPTURE, "--policy", "@p.yaml"], ["p.yaml", "not UTF-8"], 2,
        {**DOWN_CONFIG, "p.yaml": b"\x00\xff\xfe binary"}),
    "capture: --descheduler-config that does not validate": Case(
        [*CAPTURE, "--descheduler-config", "@d.yaml"], ["d.yaml", "evictionsPerSecond"], 2,
        {**DOWN_CONFIG, "d.yaml": "evictionsPerSecond: -1\n"}),
    "capture: a --step that makes millions of points": Case(
        [*CAPTURE, "--range", "24h", "--step", "1ms"],
        ["--range 24h at --step", "86,400,001 points", "use --step 2s or longer"], 2,
        DOWN_CONFIG),
    "capture: --anonymize-key /dev/zero": Case(
        [*CAPTURE, "--anonymize-key", "/dev/zero"],
        ["/dev/zero", "--anonymize-key file", "not a regular file"], 2, DOWN_CONFIG),
    "capture: an --anonymize-key past 64 KiB": Case(
        [*CAPTURE, "--anonymize-key", "@key"],
        ["key", "--anonymize-key file", "larger than the limit of 64 KiB"], 2,
        {**DOWN_CONFIG, "key": b"k" * (64 * 2**10 + 1)}),
    "capture: a binary --descheduler-config": Case(
        [*CAPTURE, "--descheduler-config", "@d.yaml"], ["d.yaml", "not UTF-8"], 2,
        {**DOWN_CONFIG, "d.yaml": b"\xff\xfe"}),
}  # fmt: skip


def run_case(zygote: Zygote, case: Case, folder: Path, web: str) -> tuple[int, str]:
    folder.mkdir()
    for name, content in case.files.items():
        content = kubeconfig(web) if content == "@web" else content
        target = folder / name
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    argv = [f"{folder}/{arg[1:]}" if arg.startswith("@") else arg for arg in case.argv]
    result = zygote.run(argv, clean_environment(folder), cwd=folder)
    return result.returncode, result.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_an_unreadable_cluster_or_input_is_one_line_and_a_documented_code(
    name: str, cli_zygote: Zygote, web_server: str, tmp_path: Path
) -> None:
    case = CASES[name]
    code, err = run_case(cli_zygote, case, tmp_path / "case", web_server)
    assert "Traceback" not in err, err
    assert code == case.code, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    for words in case.says:
        assert words in errors[0], errors[0]
    others = [line for line in err.splitlines() if line != errors[0]]
    for line in others:  # a hint to --help, log lines of the components
        assert line.startswith("(run 'loadaware") or " WARNING " in line, err


def test_an_existing_output_is_left_as_it_was_when_the_capture_fails(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    """The check of --output opens it without changing it; the capture then fails on
    the API server, and the file still holds what it held."""
    config = tmp_path / "kc.yaml"
    config.write_text(kubeconfig(DOWN), encoding="utf-8")
    output = tmp_path / "scenario.yaml"
    output.write_text("an earlier capture\n", encoding="utf-8")
    argv = ["capture", "--kubeconfig", str(config), *NO_PROMETHEUS, "--output", str(output)]
    result = cli_zygote.run(argv, clean_environment(tmp_path), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "cannot reach the API server" in result.stderr
    assert output.read_text(encoding="utf-8") == "an earlier capture\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kc.yaml", "scenario.yaml"]


def test_a_new_output_is_not_left_behind_when_the_capture_fails(
    cli_zygote: Zygote, tmp_path: Path
) -> None:
    config = tmp_path / "kc.yaml"
    config.write_text(kubeconfig(DOWN), encoding="utf-8")
    argv = ["capture", "--kubeconfig", str(config), *NO_PROMETHEUS,
            "--output", str(tmp_path / "new.yaml")]  # fmt: skip
    result = cli_zygote.run(argv, clean_environment(tmp_path), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert not (tmp_path / "new.yaml").exists()
