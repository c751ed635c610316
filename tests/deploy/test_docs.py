"""docs/ cannot drift from the code: the reference is generated, and every command,
flag, variable and path the docs mention exists."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from app.cli import build_parser
from app.commandline.flags import EXIT_MEANINGS, INTERRUPTED_TEXT, RENAMED
from app.rebalance.config import DeschedulerConfig
from app.rebalance.outcome import SkipCode
from tests.conftest import E2E_ASSETS_ENV
from tests.deploy.manifests import DEPLOY, ROOT, actions_of, env_vars_of, render, subcommands

GENERATOR = ROOT / "scripts" / "docs_reference.py"

DOCS = [
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
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
            assert flag not in RENAMED or path.name in ("reference.md", "CHANGELOG.md"), (
                f"{path.name}: loadaware {command} {flag} is an older name: write {RENAMED[flag]}"
            )
    for variable in re.findall(r"\bLOADAWARE_[A-Z_]+\b", text):
        if variable.endswith("_"):
            continue
        if variable == "LOADAWARE_SOME_FLAG":
            continue
        assert variable in known_variables, f"{path.name}: {variable} is not read by the code"
        assert variable not in RENAMED or path.name in ("reference.md", "CHANGELOG.md"), (
            f"{path.name}: {variable} is an older name: write {RENAMED[variable]}"
        )


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


# --- the same flags, variables, metrics, skip codes and exit codes everywhere ---

# The pages an operator reads, held to the code (the reference is generated from it).
OPERATOR_DOCS = [ROOT / "README.md", ROOT / "docs" / "reference.md",
                 ROOT / "docs" / "troubleshooting.md"]  # fmt: skip


@pytest.mark.parametrize("path", OPERATOR_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flag_an_operator_page_names_is_a_current_flag(path: Path) -> None:
    """Named alone too (`--soft-taint-hold`), not only after its command; these pages
    name no other tool's flags. An older name is the reference's "Older names" only."""
    current = {o for flags in _flags_by_command().values() for o in flags}
    current |= {o for a in build_parser()._actions for o in a.option_strings}
    named = set(re.findall(r"`(--[a-z][a-z0-9-]+)", path.read_text()))
    assert len(named) > 10
    unknown = sorted(f for f in named if f not in current and f not in RENAMED)
    assert unknown == [], f"{path.relative_to(ROOT)} names {unknown}: no command has them"
    if path.name != "reference.md":
        old = sorted(f"{f} (now {RENAMED[f]})" for f in named if f in RENAMED)
        assert old == [], f"{path.relative_to(ROOT)} names older flags: {old}"


def known_metrics() -> set[str]:
    """Every series name the components export, as scraped (a histogram's parts too)."""
    known = set()
    for rows in docs_reference.metric_rows().values():
        for name, kind, _, _ in rows:
            known.add(name)
            if kind == "histogram":
                known |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return known


def test_every_metric_in_the_code_is_in_the_metrics_reference() -> None:
    reference = (ROOT / "docs" / "reference.md").read_text().split("## Metrics", 1)[1]
    in_code = {
        name
        for path in (ROOT / "app").rglob("*.py")
        for name in re.findall(r"\"(loadaware_[a-z_]+)\"", path.read_text())
    }
    assert len(in_code) > 40
    missing = sorted(n for n in in_code if f"`{n}`" not in reference
                     and f"`{n}_total`" not in reference)  # fmt: skip
    assert missing == [], (
        f"{missing}: exported by the code, missing from docs/reference.md's Metrics: register "
        "the collector in _component_registries (or LEADER_GAUGES) of scripts/docs_reference.py "
        "and run it"
    )


METRIC_DOCS = [*DOCS, *sorted((ROOT / "deploy").rglob("*.yaml")),
               *sorted((ROOT / "deploy").rglob("*.json"))]  # fmt: skip


@pytest.mark.parametrize("path", METRIC_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_metric_the_docs_and_rules_name_is_exported(path: Path) -> None:
    named = set(re.findall(r"\bloadaware_[a-z_]*[a-z]\b", path.read_text()))
    unknown = sorted(named - known_metrics())
    assert unknown == [], (
        f"{path.relative_to(ROOT)} names {unknown}, which no component exports "
        "(docs/reference.md, Metrics, lists those that exist)"
    )


def test_a_page_that_lists_skip_codes_lists_every_one() -> None:
    """Each list of them (a paragraph or table that names `eviction_limit`), not just
    the page somewhere."""
    codes = [code.value for code in SkipCode]
    lists = 0
    for path in DOCS:
        for paragraph in re.split(r"\n\s*\n", path.read_text()):
            if "`eviction_limit`" not in paragraph:
                continue
            lists += 1
            missing = [code for code in codes if f"`{code}`" not in paragraph]
            assert missing == [], (
                f"{path.relative_to(ROOT)} lists skip codes without {missing}: add them "
                f"(app/rebalance/outcome.py SkipCode; docs/reference.md, Skip codes):\n"
                f"{paragraph[:300]}"
            )
    assert lists >= 3  # the README's metric, the reference's table, explain node's
    assert "`eviction_limit`" in (ROOT / "docs" / "troubleshooting.md").read_text()


EXIT_TABLE = "\n".join(f"| {code} | {meaning} |" for code, meaning in EXIT_MEANINGS.items())


@pytest.mark.parametrize("path", OPERATOR_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_exit_codes_are_told_one_way(path: Path) -> None:
    text = path.read_text()
    assert EXIT_TABLE in text, (
        f"{path.relative_to(ROOT)} needs the exit-code table, as docs/reference.md has it "
        "(app/commandline/flags.py EXIT_MEANINGS):\n" + EXIT_TABLE
    )
    for code in re.findall(r"\bexit(?:s| code| codes?:?)\s+\**(\d+)\b", text):
        assert int(code) in EXIT_MEANINGS, f"{path.relative_to(ROOT)}: exit code {code}?"
    # 130 has one wording: no page says it another way.
    for said in re.findall(r"\**130\**[^|\n]{0,60}", text):
        if "interrupt" in said:
            assert EXIT_MEANINGS[130] in " ".join(text.split()), said


def test_every_command_s_help_says_130_the_one_way() -> None:
    for command, parser in subcommands().items():
        for child in [parser, *(c for a in parser._actions
                                if isinstance(a, argparse._SubParsersAction)
                                for c in a.choices.values())]:  # fmt: skip
            told = " ".join(f"{child.description or ''} {child.epilog or ''}".split())
            if "130" in told:
                assert INTERRUPTED_TEXT in told, (command, told)
    assert INTERRUPTED_TEXT in (build_parser().epilog or "")


def _readme_flag_table(heading: str) -> dict[str, str]:
    """The README's first flag table under ``heading``: each flag and its variable."""
    section = (ROOT / "README.md").read_text().split(f"\n{heading}\n", 1)[1]
    table = section.split("\n| flag |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = line.split(" | ")
        flags_in_row = [f for f in re.findall(r"`(--[a-z][a-z0-9-]+)`", cells[0])
                        if not f.startswith("--no-")]  # fmt: skip
        variables = re.findall(r"`(LOADAWARE_\w+)`", cells[1]) if len(cells) > 1 else []
        for index, flag in enumerate(flags_in_row):
            rows[flag] = variables[min(index, len(variables) - 1)] if variables else ""
    return rows


def test_the_readme_extender_table_has_every_flag_with_its_variable() -> None:
    table = _readme_flag_table("## The scheduler extender")
    shown = {
        max((f for f in a.option_strings if not f.startswith("--no-")), key=len): a
        for a in actions_of(subcommands()["extender"])
        if a.option_strings and a.help != argparse.SUPPRESS and "--help" not in a.option_strings
        and "--log-level" not in a.option_strings and "--log-format" not in a.option_strings
    }
    missing = sorted(set(shown) - set(table))
    assert missing == [], (
        f"README.md, the extender's flag table, lacks rows for {missing}: add one each, "
        "| `--flag` | `ITS_VARIABLE` | default | meaning |, as its --help says"
    )
    for flag, variable in table.items():
        assert flag in shown, f"README.md's extender table lists {flag}, which it does not have"
        named = re.search(r"\[env (\w+)\]", shown[flag].help or "")
        assert named is not None
        assert variable == named.group(1), (
            f"README.md: {flag} reads {named.group(1)}, not {variable}"
        )


CLUSTER_WIDE = ("ClusterRole", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def test_the_uninstall_names_every_cluster_wide_object_the_overlays_make() -> None:
    """Cluster-wide objects outlive the namespace: the uninstall steps must name each
    (the admission bindings before the cleanup they would refuse)."""
    steps = (ROOT / "docs" / "install.md").read_text().split("## Uninstall", 1)[1]
    made = {
        (item["kind"], item["metadata"]["name"])
        for directory in [DEPLOY, *sorted((DEPLOY / "overlays").iterdir())]
        for item in render(directory)
        if item["kind"] in CLUSTER_WIDE
    }
    assert len(made) >= 6
    missing = sorted(name for _, name in made if f"`{name}`" not in steps and name not in steps)
    assert missing == [], f"docs/install.md, Uninstall, does not name {missing}"
    assert steps.index("validatingadmissionpolicybinding") < steps.index("kubectl delete -k")


# Where the README lists each component's metrics: the heading of its section and the
# words that start the list.
README_METRIC_LISTS = {
    "extender": ("## The scheduler extender", "| `GET /metrics` |"),
    "annotator": ("## The node annotator", "- **Metrics**:"),
    "descheduler": ("## The real-load descheduler", "Metrics: "),
}


def test_the_readme_lists_every_metric_of_each_component() -> None:
    """A list may shorten a name to what follows the component's prefix (`_syncs_total`)."""
    readme = (ROOT / "README.md").read_text()
    rows = docs_reference.metric_rows()
    for component, (heading, start) in README_METRIC_LISTS.items():
        text = readme.split(f"\n{heading}\n", 1)[1].split(start, 1)[1]
        text = text.split("\n", 1)[0] if start.startswith("|") else text.split("\n\n", 1)[0]
        listed = {
            name if name.startswith("loadaware_") else f"loadaware_{component}{name}"
            for name in re.findall(r"`((?:loadaware)?_[a-z_]+)(?:\{[^}]*\})?`", text)
        }
        exported = {row[0] for row in rows[component]}
        assert exported - listed == set(), (
            f"README.md, {heading}, lists its metrics without {sorted(exported - listed)}: "
            "add them there (docs/reference.md, Metrics, is generated and has them)"
        )
        assert listed - exported == set(), (
            f"README.md, {heading}, lists {sorted(listed - exported)}, which "
            f"loadaware {component} does not export"
        )


# Commands that run once and end (Ctrl-C before the end: 130); the others serve until
# stopped (SIGTERM or SIGINT: 0). The descheduler's --once is told in its description.
ONE_SHOT = {"policy check", "explain pod", "explain node", "report", "simulate", "capture",
            "descheduler"}  # fmt: skip


def _runnable() -> dict[str, argparse.ArgumentParser]:
    found = {}
    for command, parser in subcommands().items():
        children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not children:
            found[command] = parser
        for action in children:
            found |= {f"{command} {name}": child for name, child in action.choices.items()}
    return found


@pytest.mark.parametrize("command", sorted(_runnable()))
def test_every_command_s_help_tells_its_exit_codes(command: str) -> None:
    parser = _runnable()[command]
    told = " ".join(f"{parser.description or ''} {parser.epilog or ''}".split())
    assert re.search(r"[Ee]xit codes:", told), (
        f"loadaware {command} --help does not tell its exit codes: add an epilog "
        "'exit codes: 0 ..., 1 ..., 2 ...' with the meanings of app/commandline/flags.py"
    )
    codes = {int(c) for c in re.findall(r"(?:codes:|,) (\d+) ", told.split("xit codes:", 1)[1])}
    assert codes <= set(EXIT_MEANINGS), (command, codes)
    assert (INTERRUPTED_TEXT in told) is (command in ONE_SHOT), (
        f"loadaware {command} --help: a one-shot command ends its exit codes with "
        f"'{INTERRUPTED_TEXT}' (INTERRUPTED_TEXT), a server does not"
    )


def test_no_page_or_help_says_the_first_descheduler_run_only_observes() -> None:
    """A first run, without memory, acts like any other (app/descheduler/descheduler.py)."""
    helps = [p.description or "" for p in _runnable().values()]
    pages = [path.read_text() for path in DOCS]
    for text in [*helps, *pages]:
        assert not re.search(r"first (run|time)[^.]{0,40}only observ", " ".join(text.split()))
    description = " ".join((_runnable()["descheduler"].description or "").split())
    assert "a first run included: it acts like any other" in description


def test_the_readme_names_every_descheduler_flag() -> None:
    """Its "Flags, endpoints and metrics" names each flag, or its group (the Prometheus
    and leader-election flags, which the annotator shares)."""
    text = (ROOT / "README.md").read_text().split("### Flags, endpoints and metrics", 1)[1]
    text = text.split("\n\n", 2)[1]
    grouped = ("--prometheus-", "--query-timeout", "--leader-elect", "--lease-", "--log-")
    flags = {
        f for a in actions_of(subcommands()["descheduler"]) if a.help != argparse.SUPPRESS
        for f in a.option_strings if f.startswith("--") and not f.startswith("--no-")
        and f != "--help" and not f.startswith(grouped)
    }  # fmt: skip
    missing = sorted(f for f in flags if f"`{f}`" not in text)
    assert missing == [], (
        f"README.md, the descheduler's \"Flags, endpoints and metrics\", does not name "
        f"{missing}: add them to its list"
    )


def test_the_compatibility_matrix_names_what_ships() -> None:
    """The versions the README's matrix states are the ones the repository pins."""
    matrix = (ROOT / "README.md").read_text().split("## Compatibility", 1)[1].split("\n## ")[0]
    scheduler = (DEPLOY / "components" / "second-scheduler" / "deployment.yaml").read_text()
    image = re.search(r"image: (registry\.k8s\.io/kube-scheduler:v[\d.]+)", scheduler)
    assert image is not None
    assert f"`{image.group(1)}`" in matrix
    python_image = re.search(r"ARG PYTHON_IMAGE=(\S+)", (ROOT / "Dockerfile").read_text())
    assert python_image is not None
    assert f"`{python_image.group(1)}`" in matrix
    requires = re.search(r'requires-python = ">=([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert requires is not None
    assert f"{requires.group(1)} or newer" in matrix
    assert "ValidatingAdmissionPolicy" in matrix  # and so 1.30 or newer for the overlays using it
