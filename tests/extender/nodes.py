"""Node annotations and request bodies shared by the extender tests."""

from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path
from typing import Any

from app.load.samples import format_usage
from app.policy import default_policy

# Bodies a real kube-scheduler sent; see the README beside them. Byte-identical to the capture.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-scheduler"
METRICS = default_policy().metrics


def usage_annotations(cpu: float, mem: float, age_s: float = 30.0) -> dict[str, str]:
    at_s = time.time() - age_s
    return {m: format_usage(cpu if m.startswith("cpu") else mem, at_s) for m in METRICS}


def cool() -> dict[str, str]:
    """Fresh annotations of a node well under every limit, stamped now.

    Made when called, not at import: a value stamped at import ages with the whole
    suite's run time, and on a slow machine goes stale before the test that uses it.
    """
    return usage_annotations(0.2, 0.3)


def hot_cpu() -> dict[str, str]:
    """Fresh annotations of a node over the CPU limit, stamped now."""
    return usage_annotations(0.9, 0.3)


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def fixture_names() -> list[str]:
    """Every captured body's file name; an empty capture folder is an error, not a skip."""
    names = sorted(p.name for p in FIXTURES.glob("*.json"))
    if not names:
        raise FileNotFoundError(f"no captured kube-scheduler bodies (*.json) in {FIXTURES}")
    return names


def with_annotations(
    body: dict[str, Any], annotations: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """A full-nodes body whose nodes carry extra annotations, by node name."""
    changed = copy.deepcopy(body)
    for node in changed["Nodes"]["items"]:
        extra = annotations.get(node["metadata"]["name"], {})
        node["metadata"].setdefault("annotations", {}).update(extra)
    return changed


def as_daemonset_pod(body: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    changed["Pod"]["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": "u",
            "controller": True,
        }
    ]
    return changed


def damaged(text: bytes, rng: random.Random, edits: int, replacements: bytes) -> bytes:
    """``text`` with ``edits`` bytes flipped (to one of ``replacements``), dropped or
    doubled at random places."""
    body = bytearray(text)
    for _ in range(edits):
        if not body:
            break
        at = rng.randrange(len(body))
        kind = rng.randrange(3)
        if kind == 0:
            body[at] = rng.choice(replacements)
        elif kind == 1:
            del body[at]
        else:
            body.insert(at, body[at])
    return bytes(body)
