"""The shipped manifests and scheduler configs must match the code they configure."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.annotator.main import DEFAULT_HEALTH_PORT as ANNOTATOR_PORT
from app.descheduler.main import DEFAULT_HEALTH_PORT as DESCHEDULER_PORT
from app.extender.main import DEFAULT_PORT
from app.policy import DEFAULT_POLICY_YAML, policy_from_yaml
from app.rebalance.config import config_from_yaml
from tests.deploy.manifests import (
    DEPLOY,
    ROOT,
    SCHEDULER_CONFIG,
    Obj,
    base,
    documents,
    env_of,
    env_vars_of,
    kustomizations,
    named,
    of_kind,
    pod_spec,
    pod_templates,
    render,
    subcommands,
    variable_of,
)

EXTENDER_VERBS = {"filter", "prioritize"}
LOADAWARE_IMAGE = "loadaware"


def scheduler_configs() -> list[Path]:
    return sorted(SCHEDULER_CONFIG.glob("*.yaml"))


@pytest.mark.parametrize("path", scheduler_configs(), ids=lambda p: p.name)
def test_scheduler_configs_call_verbs_the_extender_serves(path: Path) -> None:
    (config,) = documents(path)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    assert {extender["filterVerb"], extender["prioritizeVerb"]} == EXTENDER_VERBS
    assert extender["weight"] > 0
    assert extender["nodeCacheCapable"] is ("full-nodes" not in path.name)
    assert extender["urlPrefix"].startswith("https://") is extender.get("enableHTTPS", False)


SIDECAR_CONFIG = "kube-scheduler-config-second-scheduler.yaml"


@pytest.mark.parametrize("path", scheduler_configs(), ids=lambda p: p.name)
def test_scheduler_configs_reach_the_extender_service_on_its_port(path: Path) -> None:
    (config,) = documents(path)
    url = urlsplit(config["extenders"][0]["urlPrefix"])
    assert url.path in ("", "/")  # the extender serves /filter and /prioritize at the root
    if path.name == SIDECAR_CONFIG:
        # The extender beside the scheduler, in its pod, on loopback.
        objects = render(DEPLOY / "overlays" / "second-scheduler")
        pod = pod_spec(named(objects, "Deployment", "loadaware-scheduler"))
        (sidecar,) = (c for c in pod["containers"] if c.get("args", [])[:1] == ["extender"])
        assert url.hostname == env_of(sidecar)["LOADAWARE_HOST"] == "127.0.0.1"
        assert url.port == int(env_of(sidecar)["LOADAWARE_PORT"]) == DEFAULT_PORT
        return
    service = named(base(), "Service", "loadaware-extender")
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    (port,) = (p for p in service["spec"]["ports"] if p["name"] == "extender")
    assert url.port == port["port"] == DEFAULT_PORT


def test_the_extender_service_targets_the_port_the_extender_listens_on() -> None:
    objects = base()
    service = named(objects, "Service", "loadaware-extender")
    (container,) = pod_spec(named(objects, "Deployment", "loadaware-extender"))["containers"]
    env = env_of(container)
    listens = {"extender": int(env["LOADAWARE_PORT"]), "health": int(env["LOADAWARE_HEALTH_PORT"])}
    assert {p["name"] for p in service["spec"]["ports"]} == set(listens)
    for port in service["spec"]["ports"]:
        (container_port,) = (p for p in container["ports"] if p["name"] == port["targetPort"])
        assert container_port["containerPort"] == listens[port["name"]]
    template_labels = named(objects, "Deployment", "loadaware-extender")["spec"]["template"]
    template_labels = template_labels["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= template_labels.items()


def loadaware_containers() -> list[tuple[str, Obj]]:
    """Every loadaware container in the base and every overlay, named by where it is."""
    found = []
    for directory in kustomizations():
        for workload, spec in pod_templates(render(directory)):
            for container in spec["containers"]:
                if container["image"].split(":")[0].endswith(LOADAWARE_IMAGE):
                    name = f"{workload['kind']} {workload['metadata']['name']}"
                    found.append((f"{directory.relative_to(DEPLOY)}:{name}", container))
    return found


@pytest.mark.parametrize(
    ("where", "container"), loadaware_containers(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_workloads_run_real_subcommands_with_real_flags(where: str, container: Obj) -> None:
    command, *flags = container["args"]
    assert command in subcommands(), f"{where}: unknown subcommand {command!r}"
    options = {o for a in subcommands()[command]._actions for o in a.option_strings}
    assert set(flags) <= options, f"{where}: {command} has no {set(flags) - options}"
    known = env_vars_of(command)
    for variable in container.get("env", []):
        assert variable["name"] in known, f"{where}: {variable['name']} is not a flag of {command}"


def test_the_image_tag_is_the_project_version() -> None:
    version = importlib.metadata.version("loadaware")
    images = {c["image"] for _, c in loadaware_containers()}
    assert images == {f"{LOADAWARE_IMAGE}:{version}"}


def test_the_policy_configmap_holds_the_default_policy() -> None:
    configmap = named(base(), "ConfigMap", "loadaware-policy")
    text = configmap["data"]["policy.yaml"]
    assert text == DEFAULT_POLICY_YAML
    assert policy_from_yaml(text).spec == policy_from_yaml(DEFAULT_POLICY_YAML).spec
    # No hash suffix: the components reload the mounted file in place.
    assert configmap["metadata"]["name"] == "loadaware-policy"


# KubeSchedulerConfiguration v1 (kube-scheduler v1.36), the fields these files may use.
# kube-scheduler rejects unknown fields in strict decoding, so a typo here is a
# scheduler that does not start.
SCHEDULER_FIELDS: dict[str, set[str]] = {
    "": {
        "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
        "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
        "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders",
        "delayCacheUntilActive",
    },
    "leaderElection": {
        "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
        "resourceName", "resourceNamespace",
    },
    "clientConnection": {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"},
    "profiles": {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"},
    "extenders": {
        "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
        "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
        "ignorable",
    },
    "extenders.tlsConfig": {
        "insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData",
        "caData",
    },
}  # fmt: skip
GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")


def _unknown_fields(config: Obj) -> list[str]:
    unknown = [f"{k}" for k in config if k not in SCHEDULER_FIELDS[""]]
    for section in ("leaderElection", "clientConnection"):
        unknown += [
            f"{section}.{k}" for k in config.get(section, {}) if k not in SCHEDULER_FIELDS[section]
        ]
    for section in ("profiles", "extenders"):
        for item in config.get(section, []):
            unknown += [f"{section}[].{k}" for k in item if k not in SCHEDULER_FIELDS[section]]
    for extender in config.get("extenders", []):
        tls = extender.get("tlsConfig", {})
        unknown += [
            f"tlsConfig.{k}" for k in tls if k not in SCHEDULER_FIELDS["extenders.tlsConfig"]
        ]
    return unknown


@pytest.mark.parametrize("path", scheduler_configs(), ids=lambda p: p.name)
def test_scheduler_configs_use_only_v1_fields_with_valid_values(path: Path) -> None:
    (config,) = documents(path)
    assert _unknown_fields(config) == []
    (extender,) = config["extenders"]
    assert isinstance(extender["weight"], int)
    assert GO_DURATION.match(extender["httpTimeout"]), extender["httpTimeout"]
    for flag in ("nodeCacheCapable", "ignorable", "enableHTTPS"):
        assert isinstance(extender.get(flag, False), bool), flag
    assert extender["ignorable"] is True  # the safe default, see scheduler-config/README.md
    names = [p["schedulerName"] for p in config.get("profiles", [])]
    assert len(names) == len(set(names))


def test_the_second_scheduler_runs_the_shipped_profile() -> None:
    shipped = SCHEDULER_CONFIG / "kube-scheduler-config-second-scheduler.yaml"
    copy = DEPLOY / "components" / "second-scheduler" / "kube-scheduler-config.yaml"
    assert copy.read_text() == shipped.read_text()
    (config,) = documents(shipped)
    assert [p["schedulerName"] for p in config["profiles"]] == ["loadaware-scheduler"]
    assert config["leaderElection"]["resourceNamespace"] == "loadaware"
    assert "clientConnection" not in config  # in-cluster ServiceAccount


# Each scheduler config that calls the Service, and the install whose extender it fits:
# which TLS settings the scheduler sends, and which the extender then needs.
CONFIG_FOR_INSTALL = {
    "kube-scheduler-config.yaml": ("", {"caFile", "certFile", "keyFile", "serverName"}),
    "kube-scheduler-config-full-nodes.yaml": ("", {"caFile", "certFile", "keyFile", "serverName"}),
    "kube-scheduler-config-https.yaml": ("overlays/extender-tls", {"caFile", "serverName"}),
    "kube-scheduler-config-plain-http.yaml": ("overlays/extender-plain-http", set()),
}


def test_every_scheduler_config_is_matched_to_an_install() -> None:
    assert {p.name for p in scheduler_configs()} == {*CONFIG_FOR_INSTALL, SIDECAR_CONFIG}


@pytest.mark.parametrize("name", sorted(CONFIG_FOR_INSTALL))
def test_the_scheduler_configs_tls_matches_its_installs_extender(name: str) -> None:
    install, tls_fields = CONFIG_FOR_INSTALL[name]
    (config,) = documents(SCHEDULER_CONFIG / name)
    assert set(config["extenders"][0].get("tlsConfig", {})) == tls_fields
    (container,) = pod_spec(named(render(DEPLOY / install), "Deployment", "loadaware-extender"))[
        "containers"
    ]
    env = env_of(container)
    assert ("LOADAWARE_EXTENDER_TLS_CERT" in env) is bool(tls_fields)
    # A client certificate is sent exactly where the extender demands one.
    assert ("LOADAWARE_EXTENDER_CLIENT_CA" in env) is ("certFile" in tls_fields)
    unauthenticated = env.get("LOADAWARE_EXTENDER_ALLOW_UNAUTHENTICATED") == "true"
    assert unauthenticated is ("certFile" not in tls_fields)


def test_a_misspelled_scheduler_field_is_caught() -> None:
    config = {"kind": "KubeSchedulerConfiguration", "extenders": [{"nodeCacheCapabel": True}]}
    assert _unknown_fields(config) == ["extenders[].nodeCacheCapabel"]


FILE_VARIABLES = ("LOADAWARE_POLICY", "LOADAWARE_DESCHEDULER_CONFIG")


def visible_files(spec: Obj, container: Obj, configmaps: dict[str, Obj]) -> set[str]:
    """The paths at which the container sees a ConfigMap key (plain or projected volumes)."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    paths = set()
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        sources = (
            [volume] if "configMap" in volume else volume.get("projected", {}).get("sources", [])
        )
        for source in sources:
            if "configMap" in source:
                keys = configmaps[source["configMap"]["name"]]
                paths |= {f"{mount['mountPath']}/{key}" for key in keys}
    return paths


@pytest.mark.parametrize("directory", kustomizations(), ids=lambda d: d.name)
def test_every_file_a_workload_reads_is_a_key_of_a_mounted_configmap(directory: Path) -> None:
    objects = render(directory)
    configmaps = {c["metadata"]["name"]: c["data"] for c in of_kind(objects, "ConfigMap")}
    for workload, spec in pod_templates(objects):
        for container in spec["containers"]:
            visible = visible_files(spec, container, configmaps)
            for variable, path in env_of(container).items():
                if variable in FILE_VARIABLES:
                    assert path in visible, f"{workload['metadata']['name']}: {path} not mounted"


def _descheduler_config_map() -> Obj:
    return named(base(), "ConfigMap", "loadaware-descheduler-config")


def test_the_descheduler_configmap_holds_the_shipped_file_and_it_loads() -> None:
    configmap = _descheduler_config_map()
    assert configmap["metadata"]["name"] == "loadaware-descheduler-config"  # reloadable in place
    text = configmap["data"]["descheduler.yaml"]
    assert text == (DEPLOY / "base" / "descheduler-config.yaml").read_text()
    config = config_from_yaml(text, "deploy/base/descheduler-config.yaml")
    assert config.dry_run is False
    assert "kube-system" in config.evictable_namespaces.exclude
    assert "loadaware" in config.evictable_namespaces.exclude


def test_the_descheduler_is_elected_probed_on_its_health_port_and_live_in_the_base() -> None:
    deployment = named(base(), "Deployment", "loadaware-descheduler")
    assert deployment["spec"]["replicas"] == 2
    (container,) = pod_spec(deployment)["containers"]
    env = env_of(container)
    assert "LOADAWARE_LEADER_ELECT" not in env  # on by default: only the leader evicts
    assert "LOADAWARE_DESCHEDULER_DRY_RUN" not in env
    (port,) = container["ports"]
    assert port["containerPort"] == int(env["LOADAWARE_HEALTH_PORT"]) == DESCHEDULER_PORT
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": port["name"]}


def test_the_annotator_is_probed_on_the_health_port_it_listens_on() -> None:
    # The port the docs name (troubleshooting's port-forward) is the flag's default.
    (container,) = pod_spec(named(base(), "Deployment", "loadaware-annotator"))["containers"]
    listens = int(env_of(container).get("LOADAWARE_HEALTH_PORT", ANNOTATOR_PORT))
    (port,) = container["ports"]
    assert port["containerPort"] == listens == ANNOTATOR_PORT
    troubleshooting = (ROOT / "docs" / "troubleshooting.md").read_text()
    assert f"deploy/loadaware-annotator {listens}:{listens}" in troubleshooting


def test_soft_taints_are_off_in_the_base_and_on_in_their_overlay_with_the_policies() -> None:
    variable = variable_of("annotator", "--soft-taints")
    (container,) = pod_spec(named(base(), "Deployment", "loadaware-annotator"))["containers"]
    assert variable not in env_of(container)  # the flag's default: off
    objects = render(DEPLOY / "overlays" / "soft-taints")
    (container,) = pod_spec(named(objects, "Deployment", "loadaware-annotator"))["containers"]
    assert env_of(container)[variable] == "true"
    policies = {d["metadata"]["name"] for d in of_kind(objects, "ValidatingAdmissionPolicy")}
    assert policies == {
        "loadaware-annotator-node-annotations",
        "loadaware-node-annotation-writers",
        "loadaware-document-writers",
        "loadaware-descheduler-node-writes",
    }
    # The component names the tuning variables in comments: the ones the flags read.
    patch = DEPLOY / "components" / "annotator-soft-taints" / "deployment-patch.yaml"
    for flag in ("--soft-taint-max-share", "--soft-taint-hold", "--soft-taint-release-margin"):
        assert variable_of("annotator", flag) in patch.read_text()
    # One mode: the descheduler plans beside the scheduler the soft taints steer.
    configmap = named(objects, "ConfigMap", "loadaware-descheduler-config")
    config = config_from_yaml(configmap["data"]["descheduler.yaml"], "overlays/soft-taints")
    assert config.scheduler == "soft-taints"
    base_config = config_from_yaml(_descheduler_config_map()["data"]["descheduler.yaml"])
    assert base_config.scheduler == "extender"


def test_the_soft_taint_descheduler_config_is_the_base_s_but_for_its_scheduler() -> None:
    """kustomize reads only below a component's folder, so the component holds a copy:
    it must not drift from the base (every threshold and limit the same)."""
    copy = DEPLOY / "components" / "annotator-soft-taints" / "descheduler-config.yaml"
    ours = config_from_yaml(copy.read_text(), str(copy))
    theirs = config_from_yaml((DEPLOY / "base" / "descheduler-config.yaml").read_text())
    assert ours == theirs.model_copy(update={"scheduler": "soft-taints"})
    base_lines = (DEPLOY / "base" / "descheduler-config.yaml").read_text().splitlines()
    copy_lines = [line for line in copy.read_text().splitlines() if line not in base_lines]
    assert copy_lines[-1] == "scheduler: soft-taints"
    assert all(line.startswith("#") for line in copy_lines[:-1])  # its header


def test_the_dry_run_overlay_only_plans() -> None:
    objects = render(DEPLOY / "overlays" / "descheduler-dry-run")
    (container,) = pod_spec(named(objects, "Deployment", "loadaware-descheduler"))["containers"]
    assert env_of(container)["LOADAWARE_DESCHEDULER_DRY_RUN"] == "true"


CRON_EVERY_N_MINUTES = re.compile(r"^\*/(\d+) \* \* \* \*$")


def test_the_cronjob_overlay_replaces_the_deployment_and_runs_once_per_interval() -> None:
    objects = render(DEPLOY / "overlays" / "descheduler-cronjob")
    assert "loadaware-descheduler" not in {
        d["metadata"]["name"] for d in of_kind(objects, "Deployment")
    }
    cronjob = named(objects, "CronJob", "loadaware-descheduler")
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    ((_, spec),) = [(w, s) for w, s in pod_templates(objects) if w["kind"] == "CronJob"]
    (container,) = spec["containers"]
    assert container["args"] == ["descheduler", "--once"]
    schedule = CRON_EVERY_N_MINUTES.match(cronjob["spec"]["schedule"])
    assert schedule is not None
    # The debounce count on the Nodes only carries over when interval is the schedule.
    config = config_from_yaml(_descheduler_config_map()["data"]["descheduler.yaml"])
    assert config.interval == int(schedule.group(1)) * 60


def test_every_loadaware_component_passes_the_load_filter_as_system_critical() -> None:
    # Issue 42: a tenant that makes every node read hot must not keep loadaware's own
    # pods off them; the load filter lets system-critical pods through
    # (app.load.is_exempt_from_filter), so every component runs as one.
    deployments = {o["metadata"]["name"]: pod_spec(o) for o in of_kind(base(), "Deployment")}
    assert {"loadaware-annotator", "loadaware-extender", "loadaware-descheduler"} <= set(
        deployments
    )
    for name, spec in deployments.items():
        assert spec.get("priorityClassName") == "system-cluster-critical", name
