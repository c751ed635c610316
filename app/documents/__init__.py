"""YAML documents (the policy, the descheduler's configuration, scenarios) read and
checked by pydantic models, with errors an operator can act on (``reading``, which lists
its names once, in its ``__all__``)."""

from app.documents.reading import *  # noqa: F403
