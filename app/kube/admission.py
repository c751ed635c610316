"""Whether the admission policies that keep loadaware's objects to loadaware are in force.

RBAC cannot keep a kubelet off its own Node's annotations (NodeRestriction lets it patch
them) nor limit a ConfigMap create by name, so two ValidatingAdmissionPolicies in
``deploy/components/annotator-admission-policy`` (in the base, Kubernetes >= 1.30) deny
loadaware's Node annotations and soft taint to every writer but the annotator, and its
two documents to every writer but their owner. Nothing in the annotator can try a
foreign write (it has only its own identity), so at start it reads each policy and its
binding and checks what would make them not deny (issue 42, point 6):

- the policy or its binding is missing (not installed, or deleted to fix a value by hand
  and not applied again);
- the binding names another policy, does not ``Deny`` (``Warn`` or ``Audit`` only), or is
  narrowed by ``matchResources`` (a selector or an exclusion);
- the policy's ``failurePolicy`` is ``Ignore`` (a CEL error would let a write through),
  or the API server reported type-checking warnings for its expressions;
- the policy's expressions do not name this process's own user (read from its
  service-account token): in a renamed install the policy guards an identity nobody
  runs as, and denies the annotator itself.

What it cannot see: whether the API server runs the ValidatingAdmissionPolicy plugin at
all (on by default since 1.30), and what a real kubelet's write meets. Each finding is
one warning line; docs/security.md says what to do.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
)

__all__ = [
    "AdmissionCheck",
    "admission_problems",
    "log_admission_problems",
    "own_username",
]

log = logging.getLogger(__name__)

# The policies that deny loadaware's objects to other writers, and what is open without.
WRITER_POLICIES: Mapping[str, str] = {
    "loadaware-node-annotation-writers": "any kubelet may write its own Node's load "
    "annotations and soft taint, and so draw or shed pods",
    "loadaware-document-writers": "any writer of ConfigMaps in loadaware's namespace may "
    "write loadaware-workload-usage or loadaware-descheduler-state",
}
TOKEN_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def own_username(token_file: Path = TOKEN_FILE) -> str | None:
    """``system:serviceaccount:<namespace>:<name>`` from the pod's service-account token
    (its ``sub`` claim; the token is this process's own, read, not verified); None out
    of a pod or for a token that is no JWT."""
    try:
        token = token_file.read_text(encoding="ascii").strip()
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError, UnicodeDecodeError):
        return None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) and subject else None


def policy_problems(
    name: str,
    policy: Mapping[str, Any] | None,
    binding: Mapping[str, Any] | None,
    username: str | None,
) -> list[str]:
    """What keeps policy ``name`` (and its binding of the same name, as deploy/ ships
    them) from denying other writers (module doc); empty: in force as far as can be
    seen. ``policy`` and ``binding`` are the objects as dicts, None when missing."""
    if policy is None:
        return [f"ValidatingAdmissionPolicy {name} is not installed"]
    if binding is None:
        return [f"ValidatingAdmissionPolicyBinding {name} is missing: the policy is not applied"]
    problems = []
    spec = binding.get("spec") or {}
    if spec.get("policyName") != name:
        problems.append(f"binding {name} binds {spec.get('policyName')!r}, not {name}")
    if "Deny" not in (spec.get("validationActions") or []):
        problems.append(f"binding {name} does not Deny (validationActions "
                        f"{spec.get('validationActions')})")  # fmt: skip
    narrowed = {
        k: v
        for k, v in (spec.get("matchResources") or {}).items()
        if v and k not in ("matchPolicy",)
    }
    if narrowed:
        problems.append(f"binding {name} is narrowed by matchResources {sorted(narrowed)}")
    policy_spec = policy.get("spec") or {}
    if policy_spec.get("failurePolicy", "Fail") != "Fail":
        problems.append(
            f"policy {name} has failurePolicy {policy_spec.get('failurePolicy')}: an "
            "expression that fails to evaluate lets the write through"
        )
    warnings = ((policy.get("status") or {}).get("typeChecking") or {}).get(
        "expressionWarnings"
    ) or []
    if warnings:
        problems.append(f"policy {name} has {len(warnings)} type-checking warnings")
    if username is not None:
        expressions = " ".join(
            str(item.get("expression", ""))
            for field in ("matchConditions", "variables", "validations")
            for item in policy_spec.get(field) or []
        )
        if f"'{username}'" not in expressions:
            problems.append(
                f"policy {name} does not name this process's user {username} "
                "(renamed namespace or ServiceAccount?)"
            )
    return problems


async def _get(client: AsyncClient, kind: Any, name: str) -> Mapping[str, Any] | None:
    try:
        found = await client.get(kind, name)
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise
    as_dict: Mapping[str, Any] = found.to_dict()
    return as_dict


async def admission_problems(client: AsyncClient, username: str | None) -> list[str]:
    """One line per problem with each of ``WRITER_POLICIES`` (module doc), saying what
    is open; a policy that cannot be read is one such line too."""
    lines = []
    for name, open_without in WRITER_POLICIES.items():
        try:
            policy = await _get(client, ValidatingAdmissionPolicy, name)
            binding = await _get(client, ValidatingAdmissionPolicyBinding, name)
        except ApiError as error:
            status = f"{error.status.code} {error.status.message}"
            lines.append(
                f"cannot read admission policy {name} ({status}): not checked whether "
                f"{open_without}"
            )
            continue
        except Exception as error:  # the connection; a check must never stop the start
            lines.append(f"cannot read admission policy {name} ({error}): not checked")
            continue
        for problem in policy_problems(name, policy, binding, username):
            lines.append(f"{problem}; so {open_without} (docs/security.md)")
    return lines


async def log_admission_problems(client: AsyncClient, username: str | None) -> list[str]:
    """``admission_problems``, each logged as a warning (or one line that all is in
    force); returned for tests."""
    problems = await admission_problems(client, username)
    for problem in problems:
        log.warning("admission: %s", problem)
    if not problems:
        log.info("admission: loadaware's writer policies are installed, bound and Deny")
    return problems


class AdmissionCheck:
    """``log_admission_problems`` once a process: at a component's first leading, so
    that a follower does not read the policies and a re-election does not log again."""

    def __init__(self, client: AsyncClient, username: str | None) -> None:
        self._client = client
        self._username = username
        self.done = False

    async def once(self) -> None:
        if not self.done:
            self.done = True
            await log_admission_problems(self._client, self._username)
