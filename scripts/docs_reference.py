#!/usr/bin/env python3
"""Generate docs/reference.md from the code: every subcommand's flags and environment
variables (from the argparse parsers), every policy field and every descheduler
configuration field (from the pydantic models and their descriptions).

    .venv/bin/python scripts/docs_reference.py            # rewrite docs/reference.md
    .venv/bin/python scripts/docs_reference.py --check    # exit 1 if it is out of date

A maintainer's script, not a command of loadaware: it is not installed with the package.

New subcommands and flags appear by themselves; tests/deploy/test_docs.py fails when
the committed file differs from what this prints.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the repository's `app` importable
    sys.path.insert(0, str(ROOT))

from app.cli import build_parser  # noqa: E402
from app.commandline.flags import ENV_PREFIX, RENAMED  # noqa: E402
from app.extender.index import IMPLEMENTATION_ENV  # noqa: E402
from app.kube import workload_usage as published  # noqa: E402
from app.objects.durations import format_duration  # noqa: E402
from app.policy import DurationS, DynamicSchedulerPolicy, PolicySpec  # noqa: E402
from app.rebalance.config import DeschedulerConfig  # noqa: E402

REFERENCE = ROOT / "docs" / "reference.md"

HEADER = """\
# Configuration reference

Generated from the code by `scripts/docs_reference.py`; do not edit by hand
(`tests/deploy/test_docs.py` fails when this file is out of date).

Every flag `--some-flag` can also be set as the environment variable
`LOADAWARE_SOME_FLAG` (a flag of one command only names the command:
`LOADAWARE_SIMULATE_JSON`, `LOADAWARE_DESCHEDULER_CONFIG`); the command line wins.
Booleans take `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`). Every duration
takes Go syntax (`500ms`, `90s`, `2m`, `1h30m`) or plain seconds, from 1ms to 720h
(connection timeouts from 100ms); ports lie in 1-65535 (0 turns a health port off);
counts are whole numbers of at least 1; seeds of at least 0; addresses are IP
addresses or host names. A bad value ends the command with one line naming the flag
(or variable) and what is valid, a hint to `--help`, and exit code 2.
"""

OTHER_ENVIRONMENT = {
    IMPLEMENTATION_ENV: "`auto` (default), `native` or `python`: which verdict index the "
    "extender uses; `python` forces the pure-Python fallback (`app.load.wire`'s rule itself), "
    "`native` fails without the C one",
}

# What each policy field means. The generator refuses a field that has no entry here, so
# a new field cannot ship undocumented.
POLICY_MEANING = {
    "apiVersion": "`scheduler.policy.crane.io/v1alpha1`, as crane writes it",
    "kind": "`DynamicSchedulerPolicy`",
    "spec.syncPolicy": "the metrics the annotator copies from Prometheus, one entry each",
    "spec.syncPolicy[].name": "metric name: the Prometheus series and the node annotation key",
    "spec.syncPolicy[].period": "how often the annotator queries it; also sets how long a "
    "value stays fresh (period + 5m)",
    "spec.predicate": "filter rules: a node is rejected while a fresh value is above a limit",
    "spec.predicate[].name": "a metric from syncPolicy",
    "spec.predicate[].maxLimitPecent": "the limit, a fraction of 1 (0.65 = 65 %); 0 disables "
    "the rule. crane's spelling; `maxLimitPercent` is accepted too",
    "spec.priority": "score terms: free capacity `(1 - usage) * weight`, summed",
    "spec.priority[].name": "a metric from syncPolicy",
    "spec.priority[].weight": "its weight in the score (relative to the others)",
    "spec.hotValue": "the hot-value rule: recent bindings lower a node's score",
    "spec.hotValue[].timeRange": "a window of recent bindings",
    "spec.hotValue[].count": "every `count` bindings within `timeRange` add 1 to the hot "
    "value (10 score points)",
    "spec.estimation": "loadaware's addition, optional: burst-aware estimation of pods placed "
    'since a node\'s last sample (README "Burst-aware estimation")',
    "spec.estimation.enabled": "on unless set to false, also for a crane file without the section",
    "spec.estimation.factors": "the share of `max(request, limit)` a new pod is assumed to use",
    "spec.estimation.factors.cpu": "for CPU",
    "spec.estimation.factors.memory": "for memory",
    "spec.estimation.defaultPodUsage": "assumed usage of a pod that declares neither a request "
    "nor a limit for a resource",
    "spec.estimation.defaultPodUsage.cpu": "CPU in cores, or a quantity such as `100m`",
    "spec.estimation.defaultPodUsage.memory": "memory in bytes (default 200Mi), or a quantity "
    "such as `200Mi`",
    "spec.estimation.coveredAfter": "a sample covers a pod (replaces its estimate) only "
    "when taken at least this long after the pod's binding; at least 1s, so equal "
    "timestamps always count the pod",
    "spec.estimation.maxAge": "a pod stops counting this long after its binding, even "
    "without a newer sample",
    "spec.estimation.workloadUsage": "estimate a pod bound through the scheduler at its "
    "workload's observed per-pod usage where that is at least 3 times its estimate from "
    "requests and limits (at most its limit); off: from requests and limits alone",
}


def _without_environment() -> dict[str, str]:
    """Remove LOADAWARE_* variables (they change the parsers' defaults) and return them."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    for key in saved:
        del os.environ[key]
    return saved


def _commands(
    parser: argparse.ArgumentParser, path: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable (sub)command under ``parser``, depth first, in definition order."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for action in subparsers:
        for name, child in action.choices.items():
            yield from _commands(child, f"{path} {name}")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# What app.commandline.flags.add_flag appends to every help text: the default, then the variable.
_ENV_SUFFIX = re.compile(r"\s*\[env (\w+)\]$")
_DEFAULT_SUFFIX = re.compile(r"\s*\(default: ([^()]*(?:\([^()]*\)[^()]*)*)\)$")


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue  # a global flag repeated after the command name: listed once, above
        # Help texts are %-escaped for argparse; the reference shows them as printed.
        help_text = (action.help or "").replace("%%", "%")
        match = _ENV_SUFFIX.search(help_text)
        env = f"`{match.group(1)}`" if match else ""
        help_text = _ENV_SUFFIX.sub("", help_text)
        default = _DEFAULT_SUFFIX.search(help_text)
        shown = f"`{default.group(1)}`" if default else ""
        help_text = _DEFAULT_SUFFIX.sub("", help_text)
        if action.option_strings:
            names = ", ".join(f"`{o}`" for o in action.option_strings)
        else:
            names = f"`{action.metavar or action.dest.upper()}` (argument)"
        rows.append(f"| {names} | {env} | {shown} | {_cell(help_text)} |")
    return rows


def commands_section() -> list[str]:
    top = build_parser()
    lines = ["## Commands", "", "### Global flags", ""]
    lines += [
        "Accepted before or after the command name. `loadaware --version` prints the "
        f"version; {top.epilog} (the message names the input).",
        "",
    ]
    lines += ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    lines += [*_flag_rows(top), ""]
    for path, parser in _commands(top, "loadaware"):
        lines += [f"### `{path}`", ""]
        if parser.description:
            first = parser.description.strip().split("\n\n")[0]
            lines += [_cell(first), ""]
        if parser.epilog and parser.epilog.startswith("exit codes"):
            lines += [_cell(parser.epilog[0].upper() + parser.epilog[1:]) + ".", ""]
        lines += ["| flag | environment | default | meaning |", "|---|---|---|---|"]
        lines += [*_flag_rows(parser), ""]
    lines += ["### Other environment variables", "", "| variable | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in OTHER_ENVIRONMENT.items()]
    lines += ["", "### Older names", ""]
    lines += [
        "Still accepted, with a deprecation warning in the log; use the new name.",
        "",
        "| old | new |",
        "|---|---|",
    ]
    for old, new in sorted(RENAMED.items()):
        kind = "flag " if old.startswith("--") else "variable "
        lines.append(f"| {kind}`{old}` | {kind}`{new}` |")
    return [*lines, ""]


def _spellings(name: str, field: Any) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(c) for c in alias.choices if isinstance(c, str)]
    return [name]


def _constraint(field: Any) -> str:
    words = []
    for item in field.metadata:
        for attribute, symbol in (("gt", ">"), ("ge", "≥"), ("min_length", "length ≥")):
            value = getattr(item, attribute, None)
            if value is not None:
                words.append(f"{symbol} {value}")
    return ", ".join(words)


def _type_name(name: str, annotation: Any) -> str:
    if name.endswith("_s"):
        return "duration (Go syntax)"
    text = getattr(annotation, "__name__", str(annotation))
    return {"str": "string", "float": "number", "int": "integer", "bool": "boolean"}.get(
        text, "list"
    )


def _policy_rows(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, field in model.model_fields.items():
        spellings = _spellings(name, field)
        path = f"{prefix}{spellings[0]}"
        if path not in POLICY_MEANING:
            raise KeyError(f"policy field {path} has no meaning in POLICY_MEANING")
        others = ", ".join(f"`{s}`" for s in spellings[1:])
        default = "" if field.is_required() else _default_text(field.get_default())
        nested = _element_model(field.annotation)
        section = _section_model(field.annotation)
        if section is not None:
            default = "see below"
        elif name.endswith("_s") and not field.is_required():
            default = f"`{format_duration(field.get_default())}`"
        kind = (
            "list of entries"
            if nested
            else "section"
            if section
            else _type_name(name, field.annotation)
        )
        constraint = _constraint(field)
        yield (
            f"| `{path}` | {kind}{', ' + constraint if constraint else ''} | {default} | "
            f"{others} | {POLICY_MEANING[path]} |"
        )
        if nested is not None:
            yield from _policy_rows(nested, f"{path}[].")
        if section is not None:
            yield from _policy_rows(section, f"{path}.")


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a nested section (one object, not a list of entries), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _default_text(value: Any) -> str:
    return "empty" if value == () else f"`{value}`"


def _element_model(annotation: Any) -> type[BaseModel] | None:
    for argument in getattr(annotation, "__args__", ()):
        if isinstance(argument, type) and issubclass(argument, BaseModel):
            return argument
    return None


def policy_section() -> list[str]:
    lines = [
        "## Policy file (`DynamicSchedulerPolicy`)",
        "",
        "crane-scheduler's format, read unchanged. Unknown fields in `spec` are errors;",
        "`loadaware policy check FILE` validates a file and prints what it means.",
        "",
        "| field | type | default | also accepted | meaning |",
        "|---|---|---|---|---|",
    ]
    top = {k: v for k, v in DynamicSchedulerPolicy.model_fields.items() if k != "spec"}
    for name, field in top.items():
        path = _spellings(name, field)[0]
        lines.append(f"| `{path}` | string | `{field.get_default()}` | | {POLICY_MEANING[path]} |")
    lines += list(_policy_rows(PolicySpec, "spec."))
    unused = set(POLICY_MEANING) - {line.split("`")[1] for line in lines if line.startswith("| `")}
    if unused:
        raise KeyError(f"POLICY_MEANING names fields the model does not have: {sorted(unused)}")
    return [*lines, ""]


def _is_duration(field: FieldInfo) -> bool:
    return any(item in get_args(DurationS)[1:] for item in field.metadata)


def _config_type(annotation: Any) -> str:
    """A field's type in words: ``number``, ``map cpu/memory → number``, ``list of strings``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        return " or ".join(_config_type(a) for a in present) + ", optional"
    if origin is dict:
        keys = "/".join(get_args(args[0])) if get_origin(args[0]) is Literal else "string"
        return f"map {keys} → {_config_type(args[1])}"
    if origin is tuple:
        return f"list of {_config_type(args[0])}s"
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    names = {str: "string", float: "number", int: "integer", bool: "boolean"}
    return names.get(annotation, str(annotation))


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return str(value)


def _config_default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return ""  # its fields' rows follow
    text = format_duration(value) if _is_duration(field) else _value_text(value)
    return f"`{_cell(text)}`"


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _config_rows(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, field in model.model_fields.items():
        if not field.description:
            raise KeyError(f"descheduler config field {prefix}{name} has no description")
        path = f"{prefix}{field.alias or name}"
        kind = "duration (Go syntax)" if _is_duration(field) else _config_type(field.annotation)
        constraint = _constraint(field)
        yield (
            f"| `{path}` | {kind}{', ' + constraint if constraint else ''} | "
            f"{_config_default(field)} | {_cell(field.description)} |"
        )
        nested = _nested_model(field.annotation)
        if nested is not None:
            yield from _config_rows(nested, f"{path}.")


def descheduler_config_section() -> list[str]:
    lines = [
        "## Descheduler configuration (`DeschedulerConfiguration`)",
        "",
        "`loadaware descheduler --config FILE` reads it (`deploy/base/descheduler-config.yaml`",
        "is the shipped one) and reloads it on change; a broken new file keeps the previous",
        "one in force. Unknown fields are errors. Thresholds are real usage in % of",
        "allocatable, read from the node annotations.",
        "",
        "| field | type | default | meaning |",
        "|---|---|---|---|",
        *_config_rows(DeschedulerConfig, ""),
    ]
    return [*lines, ""]


def workload_usage_section() -> list[str]:
    return [
        "## Workload usage (`ConfigMap`)",
        "",
        "The annotator's leader writes it (`--workload-usage-name`, default "
        f"`{published.DEFAULT_NAME}`, in `--workload-usage-namespace`: its own), and the "
        "extender reads it (the same flags) for the estimate of a pod just bound "
        "(README, \"Burst-aware estimation\"). One key, "
        f"`{published.USAGE_KEY}`, holds a JSON document:",
        "",
        "| field | type | meaning |",
        "|---|---|---|",
        f"| `version` | integer | `{published.VERSION}`; any other version is unreadable |",
        "| `publishedAt` | number | Unix seconds of the write; more than "
        f"{published.FUTURE_SLACK_S:g}s ahead is unreadable, older than the extender's "
        "`--workload-usage-max-age` is stale |",
        "| `workloads` | map | `namespace/Kind/name` (a ReplicaSet as its Deployment) to "
        "`[cpu cores, memory bytes]`: one running pod's usage, the 90th percentile of the "
        f"workload's pods; at most {published.MAX_WORKLOADS} workloads, those with the most "
        f"pods first; values outside 0..{published.MAX_CPU_CORES:g} cores and 0..64 TiB "
        "are skipped |",
        "",
        "Anything unreadable or stale leaves every estimate from requests and limits alone.",
        "",
    ]


def render() -> str:
    saved = _without_environment()
    try:
        body = [
            HEADER,
            *commands_section(),
            *policy_section(),
            *descheduler_config_section(),
            *workload_usage_section(),
        ]
    finally:
        os.environ.update(saved)
    return "\n".join(body).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/docs_reference.py", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not REFERENCE.is_file() or REFERENCE.read_text() != text:
            print(f"{REFERENCE} is out of date: run scripts/docs_reference.py", file=sys.stderr)
            return 1
        return 0
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(text)
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
