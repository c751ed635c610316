"""Resource amounts: Kubernetes quantities (``500m``, ``8``, ``32Gi``) as numbers.

CPU is counted in cores and memory in bytes, both as floats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CPU",
    "MEMORY",
    "RESOURCES",
    "ZERO",
    "Resources",
    "parse_quantity",
]

CPU = "cpu"
MEMORY = "memory"
RESOURCES = (CPU, MEMORY)

_SUFFIX_FACTORS = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$"
)


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity in base units (cores, bytes); ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if match is None:
            raise ValueError(f"not a quantity: {value!r} (write e.g. '500m', '2', '512Mi')")
        number = float(match.group(1)) * _SUFFIX_FACTORS[match.group(2)]
    else:
        raise ValueError(f"not a quantity: {value!r}")
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"not a usable quantity: {value!r} (must be finite and not negative)")
    return number


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of CPU (cores) and memory (bytes)."""

    cpu_cores: float = 0.0
    memory_bytes: float = 0.0

    def get(self, resource: str) -> float:
        return self.cpu_cores if resource == CPU else self.memory_bytes

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu_cores + other.cpu_cores, self.memory_bytes + other.memory_bytes)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu_cores - other.cpu_cores, self.memory_bytes - other.memory_bytes)

    def scaled(self, cpu_factor: float, memory_factor: float) -> Resources:
        return Resources(self.cpu_cores * cpu_factor, self.memory_bytes * memory_factor)

    @classmethod
    def of(cls, amounts: Mapping[str, Any] | None) -> Resources:
        """CPU and memory from a ``{"cpu": "500m", "memory": "1Gi"}`` map; others ignored."""
        if not amounts:
            return cls()
        cpu = amounts.get(CPU)
        memory = amounts.get(MEMORY)
        return cls(
            parse_quantity(cpu) if cpu is not None else 0.0,
            parse_quantity(memory) if memory is not None else 0.0,
        )


ZERO = Resources()
