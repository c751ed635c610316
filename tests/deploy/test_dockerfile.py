"""The Dockerfile, tested as far as possible without building an image."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.deploy.dockerfile import Instruction, ignore_patterns, ignored, key_values, stages
from tests.deploy.manifests import ROOT, base, of_kind, pod_spec

DOCKERFILE = (ROOT / "Dockerfile").read_text()
IGNORE = ignore_patterns(ROOT / ".dockerignore")


def build_stage() -> list[Instruction]:
    return stages(DOCKERFILE)[0]


def final_stage() -> list[Instruction]:
    return stages(DOCKERFILE)[-1]


def one(stage: list[Instruction], keyword: str) -> str:
    (found,) = (i.argument for i in stage if i.keyword == keyword)
    return found


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            env |= key_values(instruction.argument)
    return env


def copied_sources() -> list[str]:
    sources = []
    for instruction in build_stage():
        if instruction.keyword == "COPY":
            *from_context, _destination = shlex.split(instruction.argument)
            sources += from_context
    return sources


def install_commands() -> list[str]:
    """The build stage's RUN commands after its first COPY: the install of loadaware.
    (The RUN before it installs the C compiler with apt-get.)"""
    stage = build_stage()
    first_copy = next(n for n, i in enumerate(stage) if i.keyword == "COPY")
    return [i.argument for i in stage[first_copy:] if i.keyword == "RUN"]


def test_the_dockerfile_has_a_build_stage_and_a_runtime_stage_on_slim_python() -> None:
    assert len(stages(DOCKERFILE)) == 2
    assert "python:3.11-slim" in DOCKERFILE
    assert any(i.keyword == "COPY" and "--from=build" in i.argument for i in final_stage())


def test_every_file_the_build_copies_exists_and_reaches_the_context() -> None:
    sources = copied_sources()
    assert "constraints.txt" in sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert not ignored(source, IGNORE), f"COPY {source}: excluded by .dockerignore"


def test_dockerignore_keeps_host_builds_out() -> None:
    assert ignored("app/extender/_verdict_index.cpython-311-x86_64-linux-gnu.so", IGNORE)
    assert ignored("app/extender/__pycache__/index.cpython-311.pyc", IGNORE)
    assert ignored(".venv/bin/python", IGNORE)
    assert not ignored("app/extender/_verdict_index.c", IGNORE)


def test_the_install_is_pinned_by_the_constraints_file() -> None:
    (install,) = (c for c in install_commands() if " install " in c)
    assert "-c constraints.txt" in install
    pinned = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    requirements = importlib.metadata.requires("loadaware") or []
    runtime = {
        r.split(";")[0].split(">")[0].split("=")[0].strip().lower()
        for r in requirements
        if "extra ==" not in r
    }
    assert runtime <= pinned, f"not pinned in constraints.txt: {runtime - pinned}"


def test_the_entrypoint_is_the_loadaware_console_script_in_exec_form() -> None:
    stage = final_stage()
    assert json.loads(one(stage, "ENTRYPOINT")) == ["loadaware"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["loadaware"] == "app.cli:main"
    venv = env_of(build_stage())["VENV"]
    assert env_of(stage)["PATH"].split(":")[0] == f"{venv}/bin"
    assert one(stage, "COPY") == f"--from=build {venv} {venv}"


def test_the_image_runs_as_the_numeric_non_root_user_the_deployments_name() -> None:
    user, group = one(final_stage(), "USER").split(":")
    assert user.isdigit(), user
    assert group.isdigit(), group
    assert int(user) != 0
    for deployment in of_kind(base(), "Deployment"):  # the base runs only loadaware's image
        security = pod_spec(deployment)["securityContext"]
        assert security["runAsUser"] == int(user)
        assert security["runAsGroup"] == int(group)


def test_the_image_labels_carry_the_project_version() -> None:
    labels: dict[str, str] = {}
    for instruction in final_stage():
        if instruction.keyword == "LABEL":
            labels |= key_values(instruction.argument)
    version_arg = key_values(next(i.argument for i in final_stage() if "VERSION=" in i.argument))
    assert version_arg["VERSION"] == importlib.metadata.version("loadaware")
    for key in ("title", "description", "version", "licenses"):
        assert labels[f"org.opencontainers.image.{key}"], key
    description = labels["org.opencontainers.image.description"]
    for part in ("annotator", "extender", "descheduler", "simulator"):
        assert part in description, part


def test_the_header_names_every_component_the_image_runs() -> None:
    from app.cli import build_parser

    header = DOCKERFILE.split("\n\n", 1)[0]
    components = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    for name in components.choices:
        assert f" {name}" in header, name


def _context_copy(destination: Path) -> None:
    """The build context as the Dockerfile's COPY lines and .dockerignore make it."""
    for source in copied_sources():
        path = ROOT / source
        if path.is_dir():
            for file in path.rglob("*"):
                relative = file.relative_to(ROOT).as_posix()
                if file.is_file() and not ignored(relative, IGNORE):
                    (destination / relative).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(file, destination / relative)
        else:
            shutil.copy2(path, destination / source)


def test_the_build_stage_install_commands_give_a_working_loadaware_with_the_native_index(
    tmp_path: Path,
) -> None:
    context = tmp_path / "src"
    context.mkdir()
    _context_copy(context)
    assert not list(context.rglob("*.so")), "a host-built index leaked into the context"
    # `python` is the base interpreter, as in the image (not this test's virtualenv).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(getattr(sys, "_base_executable", sys.executable))
    venv = tmp_path / "venv"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))},
        **env_of(build_stage()),
        # pip byte-compiles every module it installs (~7 of the ~26 CPU-s this test
        # took): the image wants that, but nothing here reads it, and pip reports a
        # module that does not compile without failing the install either way.
        "PIP_COMPILE": "false",  # pip reads PIP_NO_COMPILE=1 as "compile"
        "VENV": str(venv),
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    for command in install_commands():
        result = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=context,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, f"RUN {command}\n{result.stdout}\n{result.stderr}"
    check = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-I",
            "-c",
            "import app, app.extender.index as i, app.extender.request_pod as e; "
            "print(app.__file__, i.implementation_of(i.new_verdict_index()), "
            "e.native_pod_demand is not None)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    location, implementation, native_demand = check.stdout.split()
    assert implementation == "native"
    assert native_demand == "True"
    assert Path(location).is_relative_to(venv)
    # The base image's pip installed into the virtualenv, which has none of its own: the
    # runtime stage copies no package installer.
    assert not list((venv / "bin").glob("pip*"))
    assert not list(venv.glob("lib/python*/site-packages/pip"))
    version = subprocess.run(
        [str(venv / "bin" / "loadaware"), "extender", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "--policy" in version.stdout
