"""docs/ cannot drift from the code: the reference is generated, and every command,
flag, variable and path the docs mention exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from app.cli import build_parser
from app.commandline.flags import RENAMED
from app.rebalance.config import DeschedulerConfig
from tests.conftest import E2E_ASSETS_ENV
from tests.deploy.manifests import ROOT, actions_of, env_vars_of, subcommands

GENERATOR = ROOT / "scripts" / "docs_reference.py"

DOCS = [
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
    ROOT / "scheduler-config" / "README.md",
    ROOT / "deploy" / "prometheus" / "README.md",
    ROOT / "deploy" / "grafana" / "README.md",
]


def load_generator() -> ModuleType:
    """scripts/docs_reference.py, a maintainer's script outside the package."""
    spec = importlib.util.spec_from_file_location("docs_reference", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docs_reference = load_generator()


def test_the_reference_is_what_the_code_generates() -> None:
    assert (ROOT / "docs" / "reference.md").read_text() == docs_reference.render(), (
        "docs/reference.md is out of date: run scripts/docs_reference.py"
    )


def environment_of(command: str) -> set[str]:
    """The variables a subcommand's flags read, as their help texts name them."""
    helps = (a.help or "" for a in actions_of(subcommands()[command]))
    return {m.group(1) for h in helps if (m := re.search(r"\[env (\w+)\]", h))}


def test_the_reference_lists_every_subcommand_and_flag() -> None:
    text = (ROOT / "docs" / "reference.md").read_text()
    for command in subcommands():
        assert f"`loadaware {command}" in text
        assert environment_of(command) <= env_vars_of(command)
        for variable in environment_of(command):
            assert f"`{variable}`" in text


def test_the_reference_lists_every_descheduler_config_field_with_its_description() -> None:
    text = (ROOT / "docs" / "reference.md").read_text()
    text = text.split("## Descheduler configuration", 1)[1]
    for name, field in DeschedulerConfig.model_fields.items():
        row = next(
            (line for line in text.splitlines() if line.startswith(f"| `{field.alias}` |")), None
        )
        assert row is not None, f"{name} missing from the reference"
        assert " ".join((field.description or "").split()) in row


def _flags_by_command() -> dict[str, set[str]]:
    flags = {}
    for name, parser in subcommands().items():
        flags[name] = {o for a in actions_of(parser) for o in a.option_strings}
    return flags


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_and_flags_exist(path: Path) -> None:
    flags = _flags_by_command()
    known_variables = {v for c in subcommands() for v in environment_of(c)}
    known_variables |= set(docs_reference.OTHER_ENVIRONMENT)
    top_helps = (a.help or "" for a in build_parser()._actions)  # the global flags'
    known_variables |= {m.group(1) for h in top_helps if (m := re.search(r"\[env (\w+)\]", h))}
    known_variables.add(E2E_ASSETS_ENV)  # read by the test suite, not the product
    known_variables |= {old for old in RENAMED if old.startswith("LOADAWARE_")}  # still read
    text = path.read_text()
    for line in re.findall(r"loadaware (\w+)([^\n`|]*)", text):
        command, rest = line
        if command not in flags:
            continue  # prose such as "loadaware reads ..."
        for flag in re.findall(r"(--[a-z][a-z0-9-]+)", rest):
            assert flag in flags[command], f"{path.name}: loadaware {command} has no {flag}"
    for variable in re.findall(r"\bLOADAWARE_[A-Z_]+\b", text):
        if variable.endswith("_"):
            continue
        if variable == "LOADAWARE_SOME_FLAG":
            continue
        assert variable in known_variables, f"{path.name}: {variable} is not read by the code"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_repository_paths_exist(path: Path) -> None:
    for mentioned in re.findall(r"`((?:deploy|scheduler-config|docs)/[\w./-]*)", path.read_text()):
        if "<" in mentioned:
            continue
        assert (ROOT / mentioned.rstrip("/.")).exists(), f"{path.name}: {mentioned} does not exist"


def test_the_reference_has_no_unformatted_help_and_every_flag_its_variable_and_default() -> None:
    text = (ROOT / "docs" / "reference.md").read_text()
    assert "%(" not in text
    assert "%%" not in text
    assert "SUPPRESS" not in text
    flag_rows = [line for line in text.splitlines() if line.startswith("| `--")]
    assert len(flag_rows) > 80
    for row in flag_rows:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        flag, variable, default = cells[0], cells[1], cells[2]
        assert variable.startswith("`LOADAWARE_"), row
        assert default, f"{flag}: no default shown"
    assert "| `--log-level` | `LOADAWARE_LOG_LEVEL` | `info` |" in text


def test_one_environment_variable_means_one_thing_in_every_command() -> None:
    """A variable several commands read (LOADAWARE_KUBECONFIG) takes the same values in
    each; a flag of one command alone (explain's and capture's
    --output, which differ) has the command in its variable's name."""
    seen: dict[str, tuple[str, str, object]] = {}  # variable: (command, flag, choices)
    for command, parser in subcommands().items():
        for action in actions_of(parser):
            named = re.search(r"\[env (\w+)\]", action.help or "")
            if not named:
                continue
            flag = max(action.option_strings, key=len)
            choices = action.choices and tuple(action.choices)
            if named.group(1) in seen:
                first_command, first_flag, first_choices = seen[named.group(1)]
                where = (named.group(1), command, flag, first_command, first_flag)
                assert choices == first_choices, where
            else:
                seen[named.group(1)] = (command, flag, choices)


# A flag followed by its default in parentheses: "`--soft-taint-hold` (10m)".
FLAG_WITH_DEFAULT = re.compile(r"`(--[a-z][a-z-]*)` \(([^()\s,:;]+)[,:;)]")


def test_a_default_quoted_beside_a_soft_taint_flag_is_the_flag_s_default() -> None:
    """The rule's defaults may be tuned in app/load/taints.py: prose that quotes one
    must follow (docs/reference.md is generated; these are written by hand)."""
    defaults = {
        option: shown.group(1)
        for action in actions_of(subcommands()["annotator"])
        if (shown := re.search(r"\(default: ([^)]*)\) \[env", action.help or ""))
        for option in action.option_strings
    }
    quoted = [
        (path.name, flag, value)
        for path in DOCS
        for flag, value in FLAG_WITH_DEFAULT.findall(path.read_text(encoding="utf-8"))
        if flag.startswith("--soft-taint")
    ]
    assert len(quoted) >= 8, quoted
    wrong = [(name, flag, value, defaults.get(flag)) for name, flag, value in quoted
             if defaults.get(flag) != value]  # fmt: skip
    assert wrong == [], wrong
