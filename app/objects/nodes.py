"""A node as loadaware reads it: the pure view the caches in ``app/kube`` produce."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.objects.maps import EMPTY_MAP
from app.objects.resources import Resources

__all__ = [
    "NodeInfo",
    "Taint",
]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str | None
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    annotations: Mapping[str, str]
    internal_ip: str | None
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=Resources)
    unschedulable: bool = False
    ready: bool = True
