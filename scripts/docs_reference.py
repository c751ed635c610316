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
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the repository's `app` importable
    sys.path.insert(0, str(ROOT))

from app.cli import build_parser  # noqa: E402
from app.commandline.flags import ENV_PREFIX, EXIT_MEANINGS, RENAMED  # noqa: E402
from app.documents import MAX_CONFIG_BYTES, MAX_SCENARIO_BYTES, size_text  # noqa: E402
from app.extender.index import IMPLEMENTATION_ENV  # noqa: E402
from app.kube import workload_usage as published  # noqa: E402
from app.objects.durations import format_duration  # noqa: E402
from app.policy import API_VERSION as POLICY_API_VERSION  # noqa: E402
from app.policy import (  # noqa: E402
    MAX_WINDOW_S,
    MIN_WINDOW_S,
    DurationS,
    DynamicSchedulerPolicy,
    PolicySpec,
    usage_metric,
    window_text,
)
from app.rebalance import MAX_BACKOFF_ROUNDS, NOISE_SHARE, SITUATION_CHANGE, Outcome  # noqa: E402
from app.rebalance.aftermath import THROTTLE_RISE  # noqa: E402
from app.rebalance.config import MIN_INTERVAL_S, DeschedulerConfig  # noqa: E402
from app.rebalance.outcome import SkipCode  # noqa: E402
from app.rebalance.victims import (  # noqa: E402
    DELETION_COST_ANNOTATION,
    DO_NOT_DISRUPT_ANNOTATION,
    EVICT_ANNOTATION,
    PREFER_NO_EVICTION_ANNOTATION,
    SAFE_TO_EVICT_ANNOTATION,
)

REFERENCE = ROOT / "docs" / "reference.md"

HEADER = """\
# Configuration reference

Generated from the code by `scripts/docs_reference.py`; do not edit by hand
(`tests/deploy/test_docs.py` fails when this file is out of date).

Every flag can also be set as an environment variable, by one rule: a flag several
commands share, meaning the same in each, is `LOADAWARE_<FLAG>` (`--prometheus-url`:
`LOADAWARE_PROMETHEUS_URL`); every other flag names its command,
`LOADAWARE_<COMMAND>_<FLAG>` (`LOADAWARE_SIMULATE_JSON`, `LOADAWARE_DESCHEDULER_DRY_RUN`).
The command line wins. One concept has one flag in every command
(`--descheduler-config`, `--install-namespace`); the older names in "Older names" below
still work, each with a deprecation warning logged once.
Booleans take `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`). Every duration
takes Go syntax (`500ms`, `90s`, `2m`, `1h30m`) or plain seconds, from 1ms to 720h
(connection timeouts from 100ms); ports lie in 1-65535 (0 turns a health port off);
counts are whole numbers of at least 1; seeds of at least 0; addresses are IP
addresses or host names. A bad value ends the command with one line naming the flag
(or variable) and what is valid, a hint to `--help`, and exit code 2. A variable's value
is checked as the flag's would be (`LOADAWARE_EXPLAIN_OUTPUT=yaml` exits 2 as
`-o yaml` does), and a negative value is refused as a bad value (`--reservation-ttl -5s`).

Files (the policy, the descheduler configuration, `explain pod -f`'s manifest and a
`simulate` scenario) are read under the same rules, and a file that breaks one ends
the command with one line naming the file and the field, and exit code 2:

- A file must be a regular file (not a device such as `/dev/zero`, a pipe or a folder)
  of at most {config_limit} ({scenario_limit} for a scenario, which may hold captured
  usage series); no more of it than that is ever read.
- YAML: a key written twice in one mapping is an error (a second, empty `predicate:`
  silently dropped every filter); a boolean is not a number (`weight: yes`) and a
  number not a boolean (`dryRun: 1`).
- Durations take Go syntax and lie from 1ms to 720h, as on the command line; `0s` only
  where a field allows 0 (it turns that setting off). The descheduler's `interval` is at
  least {min_interval}.
- A policy's `apiVersion`, where given, is crane's
  `{policy_api_version}`; a metric name is a Prometheus metric name or
  a node annotation key (`cpu_usage_avg_5m` is both), and a name meant as a percentile
  is written as "Usage metrics" below says.

Ctrl-C (SIGINT) ends a one-shot command (`policy check`, `explain`, `descheduler --once`,
`simulate`, `capture`) within a second, a Prometheus query under way included, with
exit code 130; a server or a loop stops with exit code 0.
"""

OTHER_ENVIRONMENT = {
    IMPLEMENTATION_ENV: "`auto` (default), `native` or `python`: which verdict index the "
    "extender uses; `python` forces the pure-Python fallback (`app.load.prioritize`'s rule "
    "itself), "
    "`native` fails without the C one",
}

# What each policy field means. The generator refuses a field that has no entry here, so
# a new field cannot ship undocumented.
POLICY_MEANING = {
    "apiVersion": "`scheduler.policy.crane.io/v1alpha1`, as crane writes it; no other",
    "kind": "`DynamicSchedulerPolicy`",
    "spec.syncPolicy": "the metrics the annotator copies from Prometheus, one entry each",
    "spec.syncPolicy[].name": "metric name: the Prometheus series and the node annotation key "
    "(a Prometheus metric name or an annotation key)",
    "spec.syncPolicy[].period": "how often the annotator queries it, at least 1s; also sets "
    "how long a value stays fresh (period + 5m)",
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
    "spec.packing": "loadaware's addition, optional: score toward a target real usage "
    "(TargetLoadPacking's shape, every priority metric), so that new pods fill used nodes "
    "instead of waking idle ones (docs/tuning.md, consolidation)",
    "spec.packing.enabled": "off unless set to true: crane's score (the free fraction) applies",
    "spec.packing.target": "the usage fraction (0..1, exclusive) a metric's share peaks at: it "
    "rises from `target` on an idle node to 1 there, then falls to 0 on a full node",
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
    "spec.classes": "loadaware's addition, optional: classes of pods, each judged by its own "
    "limits and weights (docs/tuning.md, \"Classes of pods\"); none: every pod alike, as crane",
    "spec.classes[].name": "the class's name: 1-32 lower-case letters, digits and `_`; its "
    "usage is the metrics `<name>:cpu_usage` and `<name>:mem_usage`",
    "spec.classes[].minPriority": "the lowest pod priority (`spec.priority`) in the class",
    "spec.classes[].maxPriority": "the highest; two classes' ranges may not overlap",
    "spec.classes[].selector": "optional: a label selector the pod must match too (else it is "
    "in no class)",
    "spec.classes[].selector.matchLabels": "labels the pod must carry",
    "spec.classes[].selector.matchExpressions": "requirements, as in Kubernetes",
    "spec.classes[].selector.matchExpressions[].key": "a label key",
    "spec.classes[].selector.matchExpressions[].operator": "`In`, `NotIn`, `Exists` or "
    "`DoesNotExist`",
    "spec.classes[].selector.matchExpressions[].values": "the values for `In` and `NotIn`",
    "spec.classes[].predicate": "limits for this class's pods: each replaces the policy's limit "
    "of the same metric, or adds one",
    "spec.classes[].predicate[].name": "a metric from syncPolicy, or a class usage "
    "`<class>:cpu_usage` / `<class>:mem_usage` (what that class's pods use on the node)",
    "spec.classes[].predicate[].maxLimitPecent": "the limit, a fraction of 1; 0 disables the "
    "policy's limit of that metric for this class",
    "spec.classes[].priority": "score terms for this class's pods, in place of the policy's "
    "(none: the policy's)",
    "spec.classes[].priority[].name": "a metric from syncPolicy, or a class usage",
    "spec.classes[].priority[].weight": "its weight in the score",
    "spec.estimation.workloadUsage": "estimate a pod bound through the scheduler at its "
    "workload's observed per-pod usage where that is at least 3 times its estimate from "
    "requests and limits (at most its limit), and its CPU at most at it where it is below "
    "that estimate (a workload measured on 3 pods or more); off: from requests and limits alone",
    "spec.nodePools": "loadaware's addition, optional: node pools, each with its own limits "
    "(docs/tuning.md, \"Node pools\"). A node in no pool gets `spec.predicate`; a node two "
    "pools select is an error: refused at load where the selectors show it, else the node "
    "gets `spec.predicate` and is logged",
    "spec.nodePools[].name": "the pool's name (a DNS label), as logs, `explain` and "
    "`policy check` show it",
    "spec.nodePools[].nodeSelector": "the pool's nodes: a label selector over node labels "
    "(at least one term)",
    "spec.nodePools[].nodeSelector.matchLabels": "labels a node must have, each with this value",
    "spec.nodePools[].nodeSelector.matchExpressions": "requirements a node's labels must meet",
    "spec.nodePools[].nodeSelector.matchExpressions[].key": "a label key",
    "spec.nodePools[].nodeSelector.matchExpressions[].operator": "`In`, `NotIn`, `Exists` or "
    "`DoesNotExist`",
    "spec.nodePools[].nodeSelector.matchExpressions[].values": "for `In` and `NotIn` (at "
    "least one); none for `Exists` and `DoesNotExist`",
    "spec.nodePools[].predicate": "the limits that differ in the pool, metric by metric: a "
    "metric named here takes this limit (0 turns it off), the others keep `spec.predicate`'s; "
    "each metric must be in syncPolicy",
    "spec.nodePools[].predicate[].name": "a metric from syncPolicy",
    "spec.nodePools[].predicate[].maxLimitPecent": "the pool's limit, as in `spec.predicate`",
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
        default = ""
        if not field.is_required():
            default = _default_text(field.get_default(call_default_factory=True))
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
    if origin is Annotated:  # a checked type (app/policy/schema.py's Number, Switch)
        return _config_type(args[0])
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
        # The configuration's own sections (camelCase by their alias generator); a model
        # it borrows from the policy (nodePools' nodeSelector) is described in its row.
        if nested is not None and nested.model_config.get("alias_generator") is not None:
            yield from _config_rows(nested, f"{path}.")


def descheduler_config_section() -> list[str]:
    lines = [
        "## Descheduler configuration (`DeschedulerConfiguration`)",
        "",
        "`loadaware descheduler --descheduler-config FILE` reads it",
        "(`deploy/base/descheduler-config.yaml` is the shipped one) and reloads it on change;",
        "a broken new file keeps the previous one in force. Unknown fields are errors.",
        "Thresholds are real usage in % of allocatable, read from the node annotations.",
        "",
        "| field | type | default | meaning |",
        "|---|---|---|---|",
        *_config_rows(DeschedulerConfig, ""),
        "",
        "Annotations it honours on pods and Nodes, whatever the configuration says (skip",
        "codes in `docs/troubleshooting.md`):",
        "",
        "| annotation | on | effect |",
        "|---|---|---|",
        f"| `{SAFE_TO_EVICT_ANNOTATION}: \"false\"` | pod | never evicted (`opted_out`), "
        "as cluster-autoscaler leaves it; not overridden by the evict annotation |",
        f"| `{DO_NOT_DISRUPT_ANNOTATION}: \"true\"` | pod or Node | never evicted, nor any "
        "pod of such a Node (`opted_out`), as Karpenter leaves them |",
        f"| `{PREFER_NO_EVICTION_ANNOTATION}` (any value) | pod | evicted only when nothing "
        "else on its node reaches targetThresholds; ignored on a pod that uses more than it "
        "requests of the resource its node is hot on; a consolidation drain, which empties "
        "its node, moves it as any other pod |",
        f"| `{DELETION_COST_ANNOTATION}` | pod | a higher cost goes later among pods of "
        "equal priority and QoS; ignored like prefer-no-eviction |",
        f"| `{EVICT_ANNOTATION}` (any value) | pod | evictable past the soft protections "
        "(local storage, PVCs, bare pods, priority, minPodAge, minReplicas), as in "
        "descheduler |",
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
        "`[cpu cores, memory bytes, pods]`: one running pod's usage, the 90th percentile of "
        "the workload's pods, and how many running pods it was measured on (a workload "
        "measured on fewer than 3 is left out, and an entry without the count raises "
        "nothing; no more of its pods are raised at once than that: docs/security.md); at "
        f"most {published.MAX_WORKLOADS} workloads, those with the most pods first; values "
        f"outside 0..{published.MAX_CPU_CORES:g} cores and 0..64 TiB are skipped |",
        "",
        "Anything unreadable or stale leaves every estimate from requests and limits alone.",
        "",
    ]


# What each skip code means. The generator refuses a code that has no entry here.
SKIP_MEANING = {
    "protected": "a protected pod: DaemonSet, mirror, bare, local storage, PVC, "
    "system-critical, `priorityThreshold`, `minPodAge`, `minReplicas`",
    "eviction_limit": "`maxNoOfPodsToEvictTotal`, `PerNode` or `PerNamespace` reached",
    "cooldown": "its workload lost a pod within `workloadCooldown`, or it is a replacement "
    "still within `returnCooldown`",
    "workload_limit": "`maxMigratingPerWorkload` reached in this run",
    "workload_unavailable": "one more would make more of its workload unavailable than "
    "`maxUnavailablePerWorkload`",
    "last_replica": "the last Ready replica of its workload (`evictLastReplica: false`)",
    "pdb": "a PodDisruptionBudget allows no more disruptions",
    "nothing_to_move": "it uses none of the resource its node is hot on",
    "other_resource": "it is mostly a resource its node is not hot on",
    "gain_too_small": "the evictions planned from its node would leave it hot and lower it "
    "by less than `minimumGain`",
    "no_destination": "no destination takes it the way kube-scheduler would and stays "
    "below `thresholds`",
    "back_on_source": "with `scheduler: requests` or `soft-taints`, kube-scheduler would put "
    "the replacement back on its node",
    "backed_off": "its node's or its workload's recent evictions did not help: left alone "
    f"for interval x 2^(k-1), at most {MAX_BACKOFF_ROUNDS} intervals, after k such evictions "
    f"in a row; a node resumes early when its usage moved more than {SITUATION_CHANGE:g} since "
    "(docs/troubleshooting.md, \"Is the descheduler helping?\")",
    "hot_landing": "beside a stock kube-scheduler, the nodes it would choose among for the "
    "replacement are, on average, made hotter than the eviction cools the source",
    "wave_ahead": "with `scheduler: soft-taints`, a wave of pods is still arriving (one "
    "created after another, the next due) whose next pod would take every node "
    "kube-scheduler may put it on above `targetThresholds`: the run stands down until the "
    "wave has arrived or a node has room for it",
    "unproven_landing": "with `scheduler: requests`, a node kube-scheduler would choose for "
    "the replacement cannot be shown to stay under `targetThresholds` with every pod there "
    "at its limit (a pod without a limit: no proof); beside that scheduler a move that "
    "heats its landing later cannot be undone",
    "opted_out": "the pod (`cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"`, "
    "`karpenter.sh/do-not-disrupt: \"true\"`) or its Node (`karpenter.sh/do-not-disrupt: "
    "\"true\"`) opts out of disruption",
    "within_requests": "the pod uses no more than it requests, and the node's excess comes "
    "from pods above their requests that stay on it (`held hot`)",
    "already_evicted": "evicted earlier in this run or recorded in the memory",
    "recheck": "the live re-check just before the eviction call refused it",
}


def skip_codes_section() -> list[str]:
    codes = [code.value for code in SkipCode]
    missing = [code for code in codes if code not in SKIP_MEANING]
    if missing or set(SKIP_MEANING) - set(codes):
        raise KeyError(
            f"skip codes {missing} have no meaning: add them to SKIP_MEANING in "
            "scripts/docs_reference.py, and to the lists in docs/troubleshooting.md and the "
            "README's descheduler metrics"
            if missing
            else f"SKIP_MEANING names codes SkipCode lacks: {set(SKIP_MEANING) - set(codes)}"
        )
    return [
        "## Skip codes",
        "",
        "Why the descheduler did not evict a pod: the `reason` of",
        "`loadaware_descheduler_pods_skipped_total` and the code `loadaware explain node`",
        "prints beside each skipped pod (the free-text reason beside it names the workload).",
        "",
        "| code | meaning |",
        "|---|---|",
        *(f"| `{code}` | {SKIP_MEANING[code]} |" for code in codes),
        "",
    ]


def exit_codes_section() -> list[str]:
    return [
        "## Exit codes",
        "",
        "The same in every command; each command's `--help` ends with what they mean for it.",
        "A server or loop stopped by SIGTERM or SIGINT exits 0.",
        "",
        "| code | meaning |",
        "|---|---|",
        *(f"| {code} | {meaning} |" for code, meaning in EXIT_MEANINGS.items()),
        "",
    ]


def _component_registries() -> dict[str, Any]:
    """Each component's metrics, registered on a registry of its own, as it registers them."""
    from prometheus_client import CollectorRegistry

    from app.annotator.telemetry import AnnotatorMetrics
    from app.descheduler.telemetry import DeschedulerMetrics
    from app.extender.telemetry import EstimateCollector, ExtenderMetrics

    registries = {name: CollectorRegistry() for name in ("extender", "annotator", "descheduler")}
    ExtenderMetrics(registries["extender"])
    registries["extender"].register(EstimateCollector(dict, list))
    AnnotatorMetrics(registries["annotator"])
    DeschedulerMetrics(registries["descheduler"])
    return registries


# The leader-elected components' 0/1 leadership gauge (app/runtime/service.py), named by
# each component where it builds its service.
LEADER_GAUGES = {
    "annotator": "loadaware_annotator_is_leader",
    "descheduler": "loadaware_descheduler_is_leader",
}
LEADER_HELP = "1 while this replica holds the Lease (or runs without leader election), else 0."


def _labels(registry: Any, family: Any) -> list[str]:
    names: set[str] = set(getattr(family, "_labelnames", ()))
    for collector, exported in registry._collector_to_names.items():
        if family.name in exported or f"{family.name}_total" in exported:
            names |= set(getattr(collector, "_labelnames", ()))
    for sample in family.samples:
        names |= set(sample.labels)
    return sorted(names - {"le", "quantile"})


def metric_rows() -> dict[str, list[tuple[str, str, str, str]]]:
    """Per component: (name as scraped, type, labels, help) for every metric it exports."""
    rows: dict[str, list[tuple[str, str, str, str]]] = {}
    for component, registry in _component_registries().items():
        found = []
        for family in registry.collect():
            name = family.name + ("_total" if family.type == "counter" else "")
            labels = ", ".join(f"`{label}`" for label in _labels(registry, family))
            found.append((name, family.type, labels, _cell(family.documentation)))
        if component in LEADER_GAUGES:
            found.append((LEADER_GAUGES[component], "gauge", "", LEADER_HELP))
        rows[component] = sorted(found)
    return rows


def metrics_section() -> list[str]:
    lines = [
        "## Metrics",
        "",
        "Every metric each component serves on `/metrics` (the extender on its verbs' port",
        "and, with `--health-port`, there; the annotator and the descheduler on",
        "`--health-port`). `deploy/prometheus/loadaware-alerts.yaml` alerts on them.",
        "",
    ]
    for component, rows in metric_rows().items():
        lines += [f"### `loadaware {component}`", "", "| metric | type | labels | meaning |"]
        lines += ["|---|---|---|---|"]
        lines += [f"| `{name}` | {kind} | {labels} | {text} |" for name, kind, labels, text in rows]
        lines += [""]
    return lines


def eviction_outcomes_section() -> list[str]:
    return [
        "## Eviction outcomes",
        "",
        "`loadaware_descheduler_eviction_outcomes_total{outcome}` (a space written `_`), "
        "`loadaware report` and the simulator's table judge each eviction `settleTime` after "
        "its run (`app/rebalance/aftermath.py`): "
        + ", ".join(f"`{o.value}`" for o in Outcome)
        + f". It **helped** when its source is cooler, less what other pods that left or "
        f"came explain, by more than {NOISE_SHARE:g} of what it moved; it **backfired** "
        "when the source is hotter than other pods explain by more than that, or its "
        "replacement made the destination hot, or its workload was OOM-killed more or "
        f"throttled {THROTTLE_RISE:g} times as much, after than before (the live "
        "descheduler reads both from cAdvisor, `app/prom/pod_health.py`; unknown where not "
        "scraped); else it had **no effect** (a replacement back on the source included).",
        "",
    ]


RULES = ROOT / "deploy" / "prometheus" / "loadaware-rules.yaml"


def usage_metrics_section() -> list[str]:
    """The metrics deploy/prometheus records, read from its rules file."""
    lines = [
        "### Usage metrics",
        "",
        "The metrics `deploy/prometheus/loadaware-rules.yaml` records, each a percentage of",
        "the node (0-100) per `instance`; the annotator writes a metric's value as a",
        "fraction onto each Node under the metric's name. A policy may name any other",
        "Prometheus metric (a recording rule of your own). A name meant as a percentile",
        "(`*_usage_p…`) must read `<cpu|mem>_usage_p<1-99>_avg_<window>`, the window a",
        f"whole number of `m`, `h` or `d` from {window_text(MIN_WINDOW_S)} to "
        f"{window_text(MAX_WINDOW_S)}, or the",
        "policy is refused; one the rules do not record (`cpu_usage_p99_avg_6h`) needs a",
        "rule of your own of the same form (`quantile_over_time(0.99,",
        "cpu_usage_avg_5m[6h:5m])`: over a window longer than an hour, a 5-minute mean",
        "every 5 minutes, as the `_1d` rules take them; over an hour or less, every",
        "sample). `loadaware simulate` computes every name of this form the same way,",
        "and `loadaware policy check FILE --prometheus-url URL` says which ones Prometheus",
        "has no series for.",
        "",
        "| metric | what it is | rule |",
        "|---|---|---|",
    ]
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            meaning = usage_metric(rule["record"])
            if meaning is not None:  # not the *_usage_active levels the others read
                expr = " ".join(rule["expr"].split())
                lines.append(f"| `{rule['record']}` | {meaning.text()} | `{expr}` |")
    return [*lines, ""]


def render() -> str:
    saved = _without_environment()
    try:
        body = [
            HEADER.format(
                config_limit=size_text(MAX_CONFIG_BYTES),
                scenario_limit=size_text(MAX_SCENARIO_BYTES),
                min_interval=format_duration(MIN_INTERVAL_S),
                policy_api_version=POLICY_API_VERSION,
            ),
            *commands_section(),
            *policy_section(),
            *usage_metrics_section(),
            *descheduler_config_section(),
            *workload_usage_section(),
            *exit_codes_section(),
            *skip_codes_section(),
            *metrics_section(),
            *eviction_outcomes_section(),
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
