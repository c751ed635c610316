"""The file loaders (policy, descheduler configuration, simulator scenario) under fuzz.

Random YAML text, random documents and one-change mutations of the shipped files: each
either loads, or fails with the loader's own error type and a message that names the
field that was changed. Never a traceback, never another exception type.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from app.policy import PolicyError
from app.policy.schema import policy_from_mapping, policy_from_yaml
from app.rebalance.config import ConfigError, config_from_mapping, config_from_yaml
from app.simulate.scenario import (
    ScenarioError,
    builtin_names,
    builtin_text,
    scenario_from_mapping,
    scenario_from_yaml,
)
from tests.fuzz.budget import examples
from tests.fuzz.documents import mutations, values

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Loader:
    name: str
    error: type[ValueError]
    from_mapping: Callable[[Any, str], Any]
    from_yaml: Callable[[str, str], Any]
    text: Callable[[], str]  # a valid document's text

    def __str__(self) -> str:
        return self.name

    @functools.cached_property
    def valid(self) -> Any:
        """The valid document, parsed when a test first needs it: read at the top of the
        module, the shipped files and scenarios were parsed in every xdist worker's
        collection."""
        return yaml.safe_load(self.text())


def shipped(path: str) -> Callable[[], str]:
    return functools.partial((REPO / path).read_text, encoding="utf-8")


LOADERS = [
    Loader(
        "policy",
        PolicyError,
        policy_from_mapping,
        policy_from_yaml,
        shipped("deploy/base/policy.yaml"),
    ),
    Loader(
        "descheduler config",
        ConfigError,
        config_from_mapping,
        config_from_yaml,
        shipped("deploy/base/descheduler-config.yaml"),
    ),
    *(
        Loader(
            f"scenario {name}",
            ScenarioError,
            scenario_from_mapping,
            scenario_from_yaml,
            functools.partial(builtin_text, name),
        )
        for name in builtin_names()
    ),
]


def test_the_valid_documents_load() -> None:
    for loader in LOADERS:
        loader.from_mapping(loader.valid, "fuzz.yaml")


def load_or_own_error(loader: Loader, load: Callable[[], Any]) -> str | None:
    """None when it loaded; the message of the loader's own error otherwise."""
    try:
        load()
    except loader.error as error:
        message = str(error)
        assert message.startswith("fuzz.yaml: "), message
        assert "Traceback" not in message
        return message
    return None


yaml_texts = st.text(
    st.sampled_from(list("abc:-[]{}'\"!&*|>#%@`,?\n \t0123456789.\\")), max_size=60
) | values.map(lambda value: yaml.safe_dump(value, allow_unicode=True))


@pytest.mark.parametrize("loader", LOADERS[:3], ids=str)
@examples(150)
@given(text=yaml_texts)
def test_random_yaml_loads_or_gives_the_loaders_own_error(loader: Loader, text: str) -> None:
    load_or_own_error(loader, lambda: loader.from_yaml(text, "fuzz.yaml"))


@pytest.mark.parametrize("loader", LOADERS[:3], ids=str)
@examples(150)
@given(document=values)
def test_random_documents_give_the_loaders_own_error(loader: Loader, document: Any) -> None:
    load_or_own_error(loader, lambda: loader.from_mapping(document, "fuzz.yaml"))


def mutation_named(message: str, path: tuple[Any, ...]) -> bool:
    """Does the message name a field on the changed path (or the field that went missing)?"""
    names = [str(step) for step in path if isinstance(step, str)]
    return any(name in message for name in names)


@pytest.mark.parametrize("loader", LOADERS, ids=str)
@examples(120)
@given(data=st.data())
def test_a_mutated_valid_file_loads_or_names_the_changed_field(
    loader: Loader, data: st.DataObject
) -> None:
    document, path = data.draw(mutations(loader.valid))
    message = load_or_own_error(loader, lambda: loader.from_mapping(document, "fuzz.yaml"))
    if message is not None:
        assert mutation_named(message, path), (path, message)


def test_every_shipped_file_nests_far_below_the_bracket_bound() -> None:
    from app.documents.reading import MAX_BRACKET_DEPTH, bracket_depth

    texts = {str(loader): yaml.safe_dump(loader.valid, default_flow_style=True)
             for loader in LOADERS}  # fmt: skip
    texts["policy file"] = (REPO / "deploy/base/policy.yaml").read_text(encoding="utf-8")
    for name, text in texts.items():
        assert bracket_depth(text) <= 10 < MAX_BRACKET_DEPTH, name


@pytest.mark.parametrize("loader", LOADERS[:3], ids=str)
def test_brackets_nested_past_the_bound_are_refused_before_parsing(loader: Loader) -> None:
    from app.documents.reading import MAX_BRACKET_DEPTH

    at_the_bound = "[" * MAX_BRACKET_DEPTH + "]" * MAX_BRACKET_DEPTH
    # Parsed: a list (not a mapping), so refused by the loader's check of the top level.
    assert "nested too deeply" not in (load_or_own_error(
        loader, lambda: loader.from_yaml(at_the_bound, "fuzz.yaml")) or "")  # fmt: skip
    deeper = "x: " + "{a: " * 60 + "[" * (MAX_BRACKET_DEPTH - 59)
    message = load_or_own_error(loader, lambda: loader.from_yaml(deeper, "fuzz.yaml"))
    assert message == "fuzz.yaml: not valid YAML: nested too deeply"
