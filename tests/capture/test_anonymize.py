"""Issue 42, point 4: ``capture --anonymize`` must not be reversible.

Each name was an unkeyed 48-bit SHA-256 prefix: a node name with an IP in it came back
in half a second over a /16, zones and instance types fell to a small dictionary, and
the same hash appeared in every capture of every cluster; the descheduler's
``nodeSelector`` and ``podUsageQueries`` went into the file verbatim, and the
unhashed selector no longer matched the hashed labels, so the replay changed.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

import pytest

from app.capture.catalog import CapturedNode
from app.capture.commands import _names
from app.capture.document import KEY_BYTES, Names, anonymize_descheduler, node_groups
from app.commandline import UsageError
from app.rebalance.config import DeschedulerConfig

NODE = "ip-10-0-3-17.eu-west-1.compute.internal"


def unkeyed(name: str) -> str:
    return "h" + hashlib.sha256(name.encode()).hexdigest()[:12]


def test_a_dictionary_of_likely_names_finds_nothing_back() -> None:
    names = Names(anonymous=True)
    hashed = names(NODE)
    # The old attack: hash every candidate the same way and look the hash up.
    candidates = {unkeyed(f"ip-10-0-{a}-{b}.eu-west-1.compute.internal"): (a, b)
                  for a in range(8) for b in range(256)}  # fmt: skip
    assert unkeyed(NODE) in candidates  # ...which found the old hash
    assert hashed not in candidates
    assert hashlib.sha256(NODE.encode()).hexdigest()[:16] not in hashed


def test_two_captures_name_the_same_node_differently_unless_given_one_key(
    tmp_path: Path,
) -> None:
    assert Names(anonymous=True)(NODE) != Names(anonymous=True)(NODE)
    key = tmp_path / "key"
    key.write_bytes(b"k" * KEY_BYTES)
    args = argparse.Namespace(anonymize=False, anonymize_key=key)
    first, second = _names(args), _names(args)
    assert first.anonymous  # the key file implies --anonymize
    assert first(NODE) == second(NODE) != Names(True, b"x" * KEY_BYTES)(NODE)


def test_a_short_or_missing_key_file_is_one_clear_error(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(b"secret")
    with pytest.raises(UsageError, match="at least 32 needed"):
        _names(argparse.Namespace(anonymize=True, anonymize_key=short))
    with pytest.raises(UsageError, match="--anonymize-key"):
        _names(argparse.Namespace(anonymize=True, anonymize_key=tmp_path / "missing"))


@pytest.mark.parametrize("selector", [{"pool": "batch"}, "pool=batch", "pool==batch"])
def test_the_descheduler_s_node_selector_is_mapped_as_the_nodes_labels_are(
    selector: dict[str, str] | str,
) -> None:
    names = Names(anonymous=True)
    config = {
        "apiVersion": "loadaware.io/v1alpha1",
        "kind": "DeschedulerConfiguration",
        "nodeSelector": selector,
        "evictableNamespaces": {"include": ["shop"]},
        "podUsageQueries": {"cpu": 'sum by (namespace, pod) (x{cluster="prod-eu"})'},
    }
    document = anonymize_descheduler(config, names)
    node = CapturedNode(NODE, 4, 2**34, {"pool": "batch", "kubernetes.io/hostname": NODE}, ())
    (group,) = node_groups([node], names)
    assert document["nodeSelector"] == group["labels"]  # the replay selects the same nodes
    assert document["evictableNamespaces"] == {"include": [names("shop")]}
    assert "podUsageQueries" not in document  # free text: cluster name, namespaces
    text = repr(document)
    for word in ("pool", "batch", "shop", "prod-eu"):
        assert word not in text
    DeschedulerConfig.model_validate(document)  # still a configuration the replay reads


def test_without_anonymize_the_configuration_is_kept_as_it_is() -> None:
    config = {"nodeSelector": "pool=batch", "podUsageQueries": {"cpu": "x"}}
    assert anonymize_descheduler(config, Names()) == config


def test_node_pools_are_mapped_as_the_nodes_labels_are_in_the_policy_and_configuration() -> None:
    import yaml

    from app.capture.document import anonymize_policy
    from app.objects import NodeInfo
    from app.policy import DEFAULT_POLICY_YAML, policy_from_mapping
    from app.rebalance import pool_of

    names = Names(anonymous=True)
    selector = {
        "matchLabels": {"pool": "gpu"},
        "matchExpressions": [
            {"key": "zone", "operator": "NotIn", "values": ["eu-1"]},
            {"key": "team", "operator": "Exists"},
        ],
    }
    policy: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    policy["spec"]["nodePools"] = [{"name": "gpu", "nodeSelector": selector,
                                    "predicate": [{"name": "cpu_usage_avg_5m",
                                                   "maxLimitPercent": 0.4}]}]  # fmt: skip
    config = {"nodePools": [{"name": "gpu", "nodeSelector": selector,
                             "targetThresholds": {"cpu": 40}}]}  # fmt: skip
    mapped_policy = policy_from_mapping(anonymize_policy(policy, names))
    mapped_config = DeschedulerConfig.model_validate(anonymize_descheduler(config, names))
    labels = {"pool": "gpu", "team": "ml", "kubernetes.io/hostname": NODE}
    (group,) = node_groups([CapturedNode(NODE, 4, 2**34, labels, ())], names)
    replayed = NodeInfo(names(NODE), {}, None, labels=group["labels"])
    # The replay puts the node in the same pool, in both files.
    match = mapped_policy.node_pools.match(replayed.labels)
    assert match.pool == names("gpu")
    assert pool_of(mapped_config, replayed).name == names("gpu")
    text = repr(anonymize_policy(policy, names)) + repr(anonymize_descheduler(config, names))
    for word in ("gpu", "zone", "eu-1", "team", "'pool'"):
        assert word not in text
    assert anonymize_policy(policy, Names()) == policy
