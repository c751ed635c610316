"""The names and the age limit of the ConfigMaps loadaware keeps in the API, which the
components' flags show as defaults: here, apart from the modules that read and write
those ConfigMaps (and the Kubernetes client they import), so that a command's ``--help``
and a bad flag need no client."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ANNOTATOR_LEASE_NAME",
    "DESCHEDULER_CONFIGMAP",
    "DESCHEDULER_LEASE_NAME",
    "POLICY_CONFIGMAP",
    "STATE_NAME",
    "WORKLOAD_USAGE_MAX_AGE_S",
    "WORKLOAD_USAGE_NAME",
    "OwnConfig",
]


@dataclass(frozen=True, slots=True)
class OwnConfig:
    """A ConfigMap an operator writes loadaware's configuration into: its name, and the
    key that holds the YAML (``app.kube.reads.ClusterReader.config_text`` reads it)."""

    name: str
    key: str


# deploy/base/kustomization.yaml makes both from the files of deploy/base.
POLICY_CONFIGMAP = OwnConfig("loadaware-policy", "policy.yaml")
DESCHEDULER_CONFIGMAP = OwnConfig("loadaware-descheduler-config", "descheduler.yaml")

# The leader elections' Leases (--lease-name), named in the shipped Roles.
ANNOTATOR_LEASE_NAME = "loadaware-annotator"
DESCHEDULER_LEASE_NAME = "loadaware-descheduler"

STATE_NAME = "loadaware-descheduler-state"  # the descheduler's state (``state``)
WORKLOAD_USAGE_NAME = "loadaware-workload-usage"  # each workload's usage (``workload_usage``)
# A workload-usage document older than this is stale: a few of the annotator's rounds
# (the policy's shortest sync period, 3m by default). The extender's
# --workload-usage-max-age.
WORKLOAD_USAGE_MAX_AGE_S = 600.0
