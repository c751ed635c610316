"""A real Kubernetes control plane for end-to-end tests, from binaries the user names.

``LOADAWARE_KUBE_ASSETS`` names a folder holding ``etcd``, ``kube-apiserver``,
``kube-controller-manager`` and ``kube-scheduler`` (as envtest's ``KUBEBUILDER_ASSETS``
does for Go operators). :class:`ControlPlane` starts etcd, the API server and the
controller manager on free loopback ports in a folder of its own, and can start a
kube-scheduler with any KubeSchedulerConfiguration and the extender beside it.

No kubelet runs: Nodes are API objects the tests create (Ready, untainted: the
node-lifecycle controller is not among CONTROLLERS and the API server does not taint
new Nodes), and the harness plays the kubelet's part where a test needs it:
:meth:`kubelet_mark_ready` turns bound pods Running and Ready, :meth:`kubelet_reap`
finishes Terminating pods.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from lightkube import ALL_NS, Client, KubeConfig, codecs
from lightkube.core.exceptions import ApiError
from lightkube.models.core_v1 import ResourceQuotaSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import DaemonSet, Deployment, ReplicaSet, StatefulSet
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Namespace, Node, Pod, ResourceQuota
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
)

from tests.support.ports import free_port

ASSETS_ENV = "LOADAWARE_KUBE_ASSETS"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# Namespaces that tests create carry this label, so that wipe() finds them all.
TEST_LABEL = "e2e.loadaware.io/test"
REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")

SHARED_MEMORY = Path("/dev/shm")  # a tmpfs on Linux
ETCD_DIR_PREFIX = "loadaware-e2e-etcd-"  # then the owner's process id
FIRST_POLL_S = 0.1  # wait_until's first pause; each next one is 1.5 times as long

# The controllers the tests rely on, and no others: the workload controllers make the
# pods (and their owner references) that the descheduler, capture and the workload-usage
# tests read; disruption keeps a PDB's disruptionsAllowed, which the Eviction API checks.
# All of them ('*') cost three times the idle CPU: the garbage collector and resource
# quota rediscover and watch every resource type, and others write to objects no test
# reads (the TTL controller annotates every Node). No namespace controller: wipe()
# retires namespaces rather than deleting them (see there).
CONTROLLERS = ("deployment-controller", "replicaset-controller", "statefulset-controller",
               "daemonset-controller", "job-controller", "disruption-controller")  # fmt: skip
# What wipe() deletes in a test's namespace, in this order: the owners before what they
# own (there is no garbage collector), so that no controller makes a pod again; then the
# pods (force-deleted: there is no kubelet to finish them) and the budgets.
WORKLOAD_KINDS = (Deployment, StatefulSet, DaemonSet, Job, ReplicaSet)
RETIRED = "retired"  # TEST_LABEL's value on a namespace wipe() has emptied
CLOSED_QUOTA = "e2e-no-more-pods"  # the ResourceQuota that closes it to new pods


class HarnessError(RuntimeError):
    """The control plane could not be started or did not behave; the message says why."""


def assets_dir() -> Path | None:
    """The folder named by LOADAWARE_KUBE_ASSETS, or None when the variable is unset.

    Raises HarnessError when it is set but does not hold the four binaries.
    """
    value = os.environ.get(ASSETS_ENV, "").strip()
    if not value:
        return None
    folder = Path(value)
    missing = [b for b in BINARIES if not os.access(folder / b, os.X_OK)]
    if missing:
        raise HarnessError(
            f"{ASSETS_ENV}={value}: no executable {', '.join(missing)} there; the folder must "
            f"hold {', '.join(BINARIES)} (e.g. unpack kube-assets-*.tar.xz into it)"
        )
    return folder


def wait_until(
    predicate: Callable[[], T | None],
    timeout_s: float,
    what: str,
    interval_s: float = 0.5,
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that.

    The first polls come quickly (most conditions hold within a moment), then further
    apart, up to ``interval_s``: a long wait (pods binding, a taint's hold) asks the API
    server less often. The last poll is at the deadline, never after it.

    The deadline is generous by design: it only ends a test that would otherwise hang,
    and its message says what never happened.
    """
    deadline = time.monotonic() + timeout_s
    pause_s = min(FIRST_POLL_S, interval_s)
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except (ApiError, OSError, urllib.error.URLError) as error:
            last_error = error
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            suffix = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}{suffix}")
        time.sleep(min(pause_s, left_s))
        pause_s = min(pause_s * 1.5, interval_s)


def _run(*args: str | Path) -> None:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise HarnessError(f"{' '.join(map(str, args))} failed: {done.stderr.strip()}")


@functools.cache
def _tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """One context per CA for the readiness polls (every 0.2 s). Without a CA (a
    component's self-signed serving certificate) nothing is verified, so no trust store
    is loaded: ssl.create_default_context() reads the system's (~20 ms of CPU a poll)."""
    if ca_file is not None:
        return ssl.create_default_context(cafile=str(ca_file))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _https_ok(url: str, ca_file: Path | None, token: str | None = None) -> bool:
    context = _tls_context(ca_file)
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, context=context, timeout=5) as answer:
        return bool(answer.status == 200)


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return bool(answer.status == 200)


@dataclass
class Process:
    """One child process with its log file; stopped with SIGTERM, then SIGKILL."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=15)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: be killed when the test process dies, however it dies
    (a crash or SIGKILL skips every cleanup, and a control plane would be left running).
    Linux sends the signal when the thread that started the child ends: start processes
    from a thread that lives as long as they should (the harness uses the main thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _start(
    name: str, args: Sequence[str | Path], logs: Path, env: Mapping[str, str] | None = None
) -> Process:
    log_path = logs / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            [str(a) for a in args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() takes its children too
            env=dict(env) if env is not None else None,
            preexec_fn=_die_with_parent,
        )
    return Process(name, popen, log_path)


def _wait_healthy(process: Process, check: Callable[[], bool], timeout_s: float) -> None:
    def healthy() -> bool:
        if not process.alive():
            raise HarnessError(
                f"{process.name} exited with {process.popen.returncode}; "
                f"tail of {process.log_path}:\n{process.log_tail()}"
            )
        try:
            return check()
        except (OSError, urllib.error.URLError):
            return False

    try:
        # A process is ready within a second or two, and a test waits on it: poll
        # often (a local /readyz is cheap) rather than back off.
        wait_until(healthy, timeout_s, f"{process.name} to become healthy", interval_s=0.1)
    except AssertionError as error:
        raise HarnessError(f"{error}; tail of {process.log_path}:\n{process.log_tail()}") from None


@dataclass
class Pki:
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    sa_key: Path
    sa_pub: Path


# ECDSA P-256 keys: openssl makes one in a millisecond, where an RSA-2048 key took
# 0.1-0.5 CPU-s; a control plane's keys and certificates now cost 0.05 CPU-s, not 0.55.
EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def _make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = folder / "ca.key", folder / "ca.crt"
    _run("openssl", "req", "-x509", "-new", "-nodes", *EC_KEY, "-keyout", ca_key,
         "-out", ca_cert, "-days", "2", "-subj", "/CN=loadaware-e2e-ca")  # fmt: skip
    ext = folder / "apiserver.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
    )
    key, csr, cert = folder / "apiserver.key", folder / "apiserver.csr", folder / "apiserver.crt"
    _run("openssl", "req", "-new", "-nodes", *EC_KEY, "-keyout", key, "-out", csr,
         "-subj", "/CN=kube-apiserver")  # fmt: skip
    _run("openssl", "x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key,
         "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)  # fmt: skip
    sa_key, sa_pub = folder / "sa.key", folder / "sa.pub"
    _run("openssl", "genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", sa_key)  # fmt: skip
    _run("openssl", "pkey", "-in", sa_key, "-pubout", "-out", sa_pub)
    return Pki(ca_cert, ca_key, cert, key, sa_key, sa_pub)


def _write_kubeconfig(path: Path, server: str, ca_file: Path, token: str, user: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "e2e", "context": {"cluster": "e2e", "user": user, "namespace": "default"}}
        ],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Scheduler:
    """A running kube-scheduler: its process, effective config file and log."""

    process: Process
    config_path: Path

    @property
    def log_path(self) -> Path:
        return self.process.log_path


@dataclass
class Extender:
    """A running ``loadaware extender`` subprocess."""

    process: Process
    url: str

    @property
    def log_path(self) -> Path:
        return self.process.log_path


@dataclass
class ControlPlane:
    """etcd, kube-apiserver and kube-controller-manager on free loopback ports."""

    assets: Path
    workdir: Path
    processes: list[Process] = field(default_factory=list)
    api_url: str = ""
    kubeconfig: Path = Path()
    ca_file: Path = Path()
    admin_token: str = ""
    # Identities in the static token file: user name -> token (tests may bind RBAC to them).
    tokens: dict[str, str] = field(default_factory=dict)
    _client: Client | None = None
    _etcd_dir: Path | None = None  # in memory, removed by stop()

    # Users the token file knows besides admin; tests bind RBAC roles to them.
    EXTRA_USERS = ("system:kube-scheduler", "loadaware-annotator", "loadaware-descheduler",
                   "loadaware-extender", "tenant", "loadaware-explain")  # fmt: skip

    def start(self) -> ControlPlane:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        pki = _make_pki(self.workdir / "pki")
        self.ca_file = pki.ca_cert
        self.admin_token = secrets.token_hex(16)
        self.tokens = {"admin": self.admin_token}
        lines = [f'{self.admin_token},admin,admin-uid,"system:masters"']
        for user in self.EXTRA_USERS:
            token = secrets.token_hex(16)
            self.tokens[user] = token
            lines.append(f"{token},{user},{user}-uid")
        token_file = self.workdir / "pki" / "tokens.csv"
        token_file.write_text("\n".join(lines) + "\n")

        etcd_port, etcd_peer, api_port, kcm_port = (free_port() for _ in range(4))
        etcd = _start(
            "etcd",
            [self.assets / "etcd", "--data-dir", self._etcd_data_dir(),
             "--listen-client-url", f"http://127.0.0.1:{etcd_port}",
             "--listen-peer-url", f"http://127.0.0.1:{etcd_peer}"],
            logs,
        )  # fmt: skip
        self.processes.append(etcd)
        _wait_healthy(etcd, lambda: _http_ok(f"http://127.0.0.1:{etcd_port}/health"), 60)

        self.api_url = f"https://127.0.0.1:{api_port}"
        apiserver = _start(
            "kube-apiserver",
            [self.assets / "kube-apiserver",
             f"--etcd-servers=http://127.0.0.1:{etcd_port}",
             "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
             f"--secure-port={api_port}",
             f"--tls-cert-file={pki.apiserver_cert}", f"--tls-private-key-file={pki.apiserver_key}",
             f"--client-ca-file={pki.ca_cert}",
             f"--token-auth-file={token_file}",
             f"--service-account-key-file={pki.sa_pub}",
             f"--service-account-signing-key-file={pki.sa_key}",
             "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
             "--api-audiences=https://kubernetes.default.svc.cluster.local",
             "--service-cluster-ip-range=10.0.0.0/24",
             "--authorization-mode=Node,RBAC",
             "--disable-admission-plugins=TaintNodesByCondition,ServiceAccount",
             "--allow-privileged=true",
             "--enable-priority-and-fairness=false",
             "--profiling=false",
             # As the controller manager: no garbage collector (see CONTROLLERS).
             "--enable-garbage-collector=false",
             # A watch cache per resource type, each watching etcd, is for many
             # clients of a big cluster; here lists and watches go straight to etcd,
             # with the same answers, and the idle API server uses half the CPU.
             "--watch-cache=false",
             "--v=1"],
            logs,
        )  # fmt: skip
        self.processes.append(apiserver)
        _wait_healthy(
            apiserver,
            lambda: _https_ok(f"{self.api_url}/readyz", pki.ca_cert, self.admin_token),
            180,
        )
        self.kubeconfig = _write_kubeconfig(
            self.workdir / "admin.kubeconfig", self.api_url, pki.ca_cert, self.admin_token, "admin"
        )
        kcm = _start(
            "kube-controller-manager",
            [self.assets / "kube-controller-manager",
             f"--kubeconfig={self.kubeconfig}",
             "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
             f"--controllers={','.join(CONTROLLERS)}",
             "--use-service-account-credentials=false",
             f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
             f"--cluster-signing-cert-file={pki.ca_cert}",
             f"--cluster-signing-key-file={pki.ca_key}",
             "--leader-elect=false", "--v=1"],
            logs,
        )  # fmt: skip
        self.processes.append(kcm)
        _wait_healthy(kcm, lambda: _https_ok(f"https://127.0.0.1:{kcm_port}/healthz", None), 120)
        return self

    def stop(self) -> None:
        self._client = None
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        if self._etcd_dir is not None:
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
            self._etcd_dir = None

    def _etcd_data_dir(self) -> Path:
        """etcd's data in memory (/dev/shm) where there is such a folder, else in the
        work folder. On disk, every write waited for an fsync, and etcd and the API
        server spent about a quarter more CPU on a run of writes (the fsync's kernel
        work, and the waiting writes held in flight). The folder is named after this
        process, so that one left by a process that was killed is found and removed."""
        if not (SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK)):
            return self.workdir / "etcd"
        for stale in SHARED_MEMORY.glob(f"{ETCD_DIR_PREFIX}*"):
            owner = stale.name.removeprefix(ETCD_DIR_PREFIX).split("-")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                shutil.rmtree(stale, ignore_errors=True)
        self._etcd_dir = Path(
            tempfile.mkdtemp(prefix=f"{ETCD_DIR_PREFIX}{os.getpid()}-", dir=SHARED_MEMORY)
        )
        return self._etcd_dir

    # --- clients and identities ------------------------------------------------------

    def client(self) -> Client:
        """An admin client (system:masters), shared across calls."""
        if self._client is None:
            self._client = Client(
                config=KubeConfig.from_file(str(self.kubeconfig)), field_manager="e2e"
            )
        return self._client

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig that authenticates as ``user`` (one of EXTRA_USERS) by token."""
        path = self.workdir / f"{user.replace(':', '-')}.kubeconfig"
        if not path.exists():
            _write_kubeconfig(path, self.api_url, self.ca_file, self.tokens[user], user)
        return path

    # --- kube-scheduler and the extender ---------------------------------------------

    @contextlib.contextmanager
    def scheduler(
        self, config: Mapping[str, Any], name: str = "kube-scheduler"
    ) -> Iterator[Scheduler]:
        """Run kube-scheduler with ``config`` (a KubeSchedulerConfiguration as a dict).

        clientConnection.kubeconfig (user system:kube-scheduler) is filled in when the
        config names none, and leader election is turned off. Waits for /readyz.
        """
        effective = dict(config)
        connection = dict(effective.get("clientConnection") or {})
        connection.setdefault("kubeconfig", str(self.kubeconfig_for("system:kube-scheduler")))
        effective["clientConnection"] = connection
        effective["leaderElection"] = {"leaderElect": False}
        path = self.workdir / f"{name}-{secrets.token_hex(3)}.yaml"
        path.write_text(yaml.safe_dump(effective, sort_keys=False))
        port = free_port()
        process = _start(
            f"{name}-{path.stem.rsplit('-', 1)[-1]}",
            [self.assets / "kube-scheduler", f"--config={path}", "--leader-elect=false",
             "--bind-address=127.0.0.1", f"--secure-port={port}", "--v=2"],
            self.workdir / "logs",
        )  # fmt: skip
        try:
            _wait_healthy(process, lambda: _https_ok(f"https://127.0.0.1:{port}/readyz", None), 120)
            yield Scheduler(process, path)
        finally:
            process.stop()

    @contextlib.contextmanager
    def extender(
        self, *args: str, kubeconfig: Path | None = None, port: int | None = None
    ) -> Iterator[Extender]:
        """Run ``loadaware extender`` on a free loopback port with the given extra flags;
        waits for /readyz on its plain health port (so its caches have listed) and
        yields its base URL (https when ``--tls-cert`` is among the flags)."""
        port = port or free_port()
        scheme = "https" if "--tls-cert" in args else "http"
        listen = ("--host", "127.0.0.1", "--port", str(port))
        with self.loadaware("extender", *listen, *args, kubeconfig=kubeconfig) as process:
            yield Extender(process, f"{scheme}://127.0.0.1:{port}")

    @contextlib.contextmanager
    def loadaware(
        self, command: str, *args: str, kubeconfig: Path | None = None, ready: bool = True
    ) -> Iterator[Process]:
        """Run ``loadaware COMMAND`` (this checkout) against this control plane, with its
        health port on a free loopback port; waits for /readyz unless ``ready`` is False."""
        health_port = free_port()
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO)
        process = _start(
            f"{command}-{health_port}",
            [sys.executable, "-m", "app.cli", command,
             "--kubeconfig", kubeconfig or self.kubeconfig,
             "--health-port", str(health_port), "--health-host", "127.0.0.1", *args],
            self.workdir / "logs",
            env=env,
        )  # fmt: skip
        try:
            if ready:
                url = f"http://127.0.0.1:{health_port}/readyz"
                _wait_healthy(process, lambda: _http_ok(url), 120)
            yield process
        finally:
            process.stop()

    def grant(self, rbac_file: Path, user: str) -> None:
        """Create the roles of a shipped RBAC file and bind them, as its bindings do, to
        ``user`` (a static-token identity) instead of the ServiceAccount."""
        api = self.client()
        for document in yaml.safe_load_all(rbac_file.read_text()):
            if not document or document["kind"] == "ServiceAccount":
                continue
            if document["kind"] in ("ClusterRoleBinding", "RoleBinding"):
                document = dict(document)
                document["metadata"] = dict(document["metadata"])
                document["metadata"]["name"] += "-" + user.replace(":", "-")
                document["subjects"] = [
                    {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
                ]
            document["metadata"] = dict(document["metadata"])
            document["metadata"]["labels"] = {
                **document["metadata"].get("labels", {}),
                TEST_LABEL: "true",  # wipe() removes it
            }
            namespace = document["metadata"].get("namespace")
            if namespace is not None:
                with contextlib.suppress(ApiError):  # it exists already
                    api.create(Namespace(metadata=ObjectMeta(name=namespace)))
            resource = codecs.from_dict(document)
            try:
                api.create(resource)
            except ApiError as error:
                if error.status.code != 409:
                    raise
                api.replace(resource)

    # --- objects -----------------------------------------------------------------------

    def namespace(self, name: str) -> str:
        """Create a namespace for one test (labelled, so wipe() empties and retires it)."""
        self.client().create(Namespace(metadata=ObjectMeta(name=name, labels={TEST_LABEL: "true"})))
        return name

    def make_node(
        self,
        name: str,
        cpu: str = "8",
        memory: str = "32Gi",
        *,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        pods: str = "110",
        internal_ip: str | None = None,
    ) -> Node:
        """Create a Ready Node (status set at create, as a kubelet registers)."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, TEST_LABEL: "true", **(labels or {})},
                "annotations": dict(annotations or {}),
            },
            "spec": {"taints": [dict(t) for t in taints]} if taints else {},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "lastHeartbeatTime": now, "lastTransitionTime": now},
                ],
                "addresses": [
                    {"type": "InternalIP", "address": internal_ip or "127.0.0.1"},
                    {"type": "Hostname", "address": name},
                ],
            },
        }  # fmt: skip
        node = cast(Node, Node.from_dict(body))
        return self.client().create(node)

    # --- the kubelet's part ------------------------------------------------------------

    def kubelet_mark_ready(self, namespace: str) -> int:
        """Mark bound, non-terminating pods Running and Ready; returns how many changed."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        changed = 0
        for pod in self.client().list(Pod, namespace=namespace):
            if pod.spec is None or not pod.spec.nodeName or pod.metadata is None:
                continue
            if pod.metadata.deletionTimestamp is not None:
                continue
            if pod.status is not None and pod.status.phase == "Running":
                continue
            status = {
                "phase": "Running",
                "startTime": now,
                "hostIP": "127.0.0.1",
                "podIP": "127.0.0.1",
                "conditions": [
                    {"type": kind, "status": "True", "lastTransitionTime": now}
                    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
                "containerStatuses": [
                    {"name": c.name, "image": c.image or "", "imageID": "", "ready": True,
                     "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
                    for c in pod.spec.containers
                ],
            }  # fmt: skip
            with contextlib.suppress(ApiError):  # gone meanwhile
                self.client().patch(
                    Pod.Status, pod.metadata.name or "", {"status": status}, namespace=namespace
                )
                changed += 1
        return changed

    def kubelet_reap(self, namespace: str) -> int:
        """Finish Terminating pods (there is no kubelet to confirm); returns how many."""
        reaped = 0
        for pod in self.client().list(Pod, namespace=namespace):
            if pod.metadata is None or pod.metadata.deletionTimestamp is None:
                continue
            with contextlib.suppress(ApiError):
                self.client().delete(
                    Pod, pod.metadata.name or "", namespace=namespace, grace_period=0
                )
                reaped += 1
        return reaped

    # --- between tests -----------------------------------------------------------------

    def _drain_pods(
        self, client: Client, namespaces: Sequence[str], timeout_s: float = 30.0
    ) -> None:
        """Force-delete the pods left in ``namespaces`` until none is left: a controller
        that saw its owner deleted only now can still create a pod, and with no kubelet
        a pod deleted with a grace period stays Terminating on its node, where the next
        test's node of the same name would count it."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = [
                (pod.metadata.name, pod.metadata.namespace)
                for namespace in namespaces
                for pod in client.list(Pod, namespace=namespace)
                if pod.metadata is not None and pod.metadata.name
            ]
            if not left or time.monotonic() > deadline:
                return
            for name, namespace in left:
                with contextlib.suppress(ApiError):
                    client.delete(Pod, name, namespace=namespace, grace_period=0)
            time.sleep(0.2)

    @staticmethod
    def _close_to_pods(client: Client, namespace: str) -> None:
        """A ResourceQuota of zero pods, its status written as the quota controller
        (not running) would: the API server's quota admission then refuses every new
        pod in ``namespace``. A deleted namespace refused them by being Terminating; a
        retired one must too, or a workload controller that has not yet seen its owner
        deleted could make a pod after the wipe, for the next test's scheduler to bind."""
        zero = {"pods": "0"}
        with contextlib.suppress(ApiError):  # closed already
            client.create(
                ResourceQuota(
                    metadata=ObjectMeta(name=CLOSED_QUOTA, namespace=namespace),
                    spec=ResourceQuotaSpec(hard=zero),
                )
            )
        client.patch(
            ResourceQuota.Status, CLOSED_QUOTA, {"status": {"hard": zero, "used": zero}},
            namespace=namespace,
        )  # fmt: skip

    def wipe(self) -> None:
        """Remove what tests made: the workloads, pods and budgets in their namespaces,
        Nodes, and RBAC (namespaced and cluster-scoped) labelled as theirs.

        A test's namespace is closed to new pods (_close_to_pods), emptied of
        everything that makes, holds or protects a pod (WORKLOAD_KINDS, pods,
        PodDisruptionBudgets), then retired (its label set to RETIRED), not deleted:
        deleting it made the namespace controller discover every resource type and list
        and delete each one in it: about 0.2 CPU-s of API server, etcd and controller
        manager per test (a namespace, three Nodes and a Deployment's three pods, made
        and wiped alone, 0.48 CPU-s then, 0.27 now). What a retired namespace keeps
        (Events, ConfigMaps, Leases) names nothing outside it, and every test has a
        namespace of its own (the namespace fixture's random suffix); the control plane
        is thrown away at the end."""
        client = self.client()
        names = [
            namespace.metadata.name
            for namespace in client.list(Namespace, labels={TEST_LABEL: "true"})
            if namespace.metadata is not None and namespace.metadata.name
        ]
        for name in names:
            self._close_to_pods(client, name)
            for kind in (*WORKLOAD_KINDS, PodDisruptionBudget):
                with contextlib.suppress(ApiError):
                    client.deletecollection(kind, namespace=name)
            with contextlib.suppress(ApiError):
                client.deletecollection(Pod, namespace=name, grace_period=0)
        self._drain_pods(client, names)
        for name in names:
            with contextlib.suppress(ApiError):
                client.patch(Namespace, name, {"metadata": {"labels": {TEST_LABEL: RETIRED}}})
        # grant() writes namespaced Roles into namespaces a test did not make (the
        # shipped "loadaware"); left behind, they would collide with the next test
        # that creates the same objects (test_deploy_strict's dry-run creates).
        for binding_ in client.list(RoleBinding, namespace=ALL_NS, labels={TEST_LABEL: "true"}):
            meta = binding_.metadata
            if meta is not None and meta.name and meta.namespace:
                with contextlib.suppress(ApiError):
                    client.delete(RoleBinding, meta.name, namespace=meta.namespace)
        for role_ in client.list(Role, namespace=ALL_NS, labels={TEST_LABEL: "true"}):
            meta = role_.metadata
            if meta is not None and meta.name and meta.namespace:
                with contextlib.suppress(ApiError):
                    client.delete(Role, meta.name, namespace=meta.namespace)
        for binding in client.list(ClusterRoleBinding, labels={TEST_LABEL: "true"}):
            if binding.metadata is not None and binding.metadata.name:
                with contextlib.suppress(ApiError):
                    client.delete(ClusterRoleBinding, binding.metadata.name)
        for role in client.list(ClusterRole, labels={TEST_LABEL: "true"}):
            if role.metadata is not None and role.metadata.name:
                with contextlib.suppress(ApiError):
                    client.delete(ClusterRole, role.metadata.name)
        for node in client.list(Node, labels={TEST_LABEL: "true"}):
            if node.metadata is None or not node.metadata.name:
                continue
            with contextlib.suppress(ApiError):
                client.delete(Node, node.metadata.name)
        wait_until(
            lambda: not list(client.list(Node, labels={TEST_LABEL: "true"})),
            60,
            "test nodes to be deleted",
        )


def start_control_plane(assets: Path, workdir: Path) -> ControlPlane:
    """Start a control plane in ``workdir``; on failure, stop what was started."""
    plane = ControlPlane(assets=assets, workdir=workdir)
    try:
        return plane.start()
    except BaseException:
        plane.stop()
        raise


def scheduler_config(
    extenders: Sequence[Mapping[str, Any]] = (),
    profiles: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A KubeSchedulerConfiguration v1 with the given extenders (clientConnection is
    filled in by ControlPlane.scheduler)."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
    }
    if extenders:
        config["extenders"] = [dict(e) for e in extenders]
    if profiles is not None:
        config["profiles"] = [dict(p) for p in profiles]
    return config


def cleanup_workdir(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)


def pod_object(body: Mapping[str, Any]) -> Pod:
    """A typed lightkube Pod from a manifest dictionary."""
    return cast(Pod, Pod.from_dict(dict(body)))


def node_of(client: Client, name: str, namespace: str) -> str | None:
    """The node a pod is bound to, or None while it is Pending."""
    pod = client.get(Pod, name, namespace=namespace)
    return pod.spec.nodeName if pod.spec is not None else None
