"""The one empty, read-only map the frozen views share as a default."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

EMPTY_MAP: Mapping[str, str] = MappingProxyType({})
