"""YAML documents (the policy, the descheduler's configuration, scenarios) read and
checked by pydantic models, with errors an operator can act on (``reading``)."""

from app.documents.reading import (
    MAX_CONFIG_BYTES,
    MAX_SCENARIO_BYTES,
    parse_yaml,
    read_bytes,
    read_file,
    size_text,
    validate,
)

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_SCENARIO_BYTES",
    "parse_yaml",
    "read_bytes",
    "read_file",
    "size_text",
    "validate",
]
