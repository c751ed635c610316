"""A package front that loads some of its names on first use (PEP 562).

A command that stops at a bad flag, or prints its help, should not pay for the web
server, the Kubernetes client or the Prometheus client. So the fronts of the packages
that hold them name those names (for type checkers, under ``TYPE_CHECKING``) and load
each one's module only when the name is first looked up; the value is then kept in
the front, so later lookups cost nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, MutableMapping


def load_on_use(
    package: str,
    names_by_module: Mapping[str, Iterable[str]],
    front: MutableMapping[str, object],
) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``'s front (``front``: its ``globals()``):
    each name of ``names_by_module`` imported from ``package.<module>`` when first
    looked up, then kept in the front."""
    module_of = {name: module for module, names in names_by_module.items() for name in names}

    def load(name: str) -> object:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(f"{package}.{module}")
        # Every name of the module, once: the next lookups find them in the front. All of
        # them, since importing ``package.plan`` sets the front's ``plan`` to the module
        # itself, which would hide a name ``plan`` that module holds from then on.
        for each in names_by_module[module]:
            front[each] = getattr(loaded, each)
        return front[name]

    return load
