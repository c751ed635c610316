"""YAML documents (the policy, the descheduler's configuration, scenarios) read and
checked by pydantic models, with errors an operator can act on (``reading``)."""

from app.documents.reading import parse_yaml, read_file, validate

__all__ = [
    "parse_yaml",
    "read_file",
    "validate",
]
