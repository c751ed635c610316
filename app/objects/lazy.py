"""A package front that loads some of its names on first use (PEP 562).

A command that stops at a bad flag, or prints its help, should not pay for the web
server, the Kubernetes client or the Prometheus client. So the fronts of the packages
that hold them name those names (for type checkers, under ``TYPE_CHECKING``) and load
each one's module only when the name is first looked up; the value is then kept in
the front, so later lookups cost nothing.

``load_modules_on_use`` does it with each name listed once, in its own module's
``__all__``: the front star-imports the module for type checkers and names the module
alone; the names are read from the modules' source, without running them, on the
first lookup the front cannot answer.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Callable, Iterable, MutableMapping
from pathlib import Path

__all__ = [
    "load_modules_on_use",
]


def load_modules_on_use(
    package: str, modules: Iterable[str], front: MutableMapping[str, object]
) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``'s front (``front``: its ``globals()``): each
    name in the ``__all__`` of one of ``modules`` imported from it when first looked up,
    then kept in the front."""
    lazy = tuple(modules)
    module_of: dict[str, str] = {}

    def load(name: str) -> object:
        if not module_of:
            module_of.update(
                (each, module) for module in lazy for each in declared_exports(package, module)
            )
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(f"{package}.{module}")
        # Every name of the module, once: the next lookups find them in the front. All of
        # them, since importing ``package.plan`` sets the front's ``plan`` to the module
        # itself, which would hide a name ``plan`` that module holds from then on.
        for each in loaded.__all__:
            front[each] = getattr(loaded, each)
        return front[name]

    return load


def declared_exports(package: str, module: str) -> list[str]:
    """The ``__all__`` of ``package.module``, read from its source without running it
    (a literal list of names, as every module of the project writes it)."""
    folder = Path(sys.modules[package].__file__ or "").parent
    try:
        source = (folder / f"{module}.py").read_text(encoding="utf-8")
    except OSError:  # no source beside the package (a zip, bytecode only): ask the module
        names: list[str] = importlib.import_module(f"{package}.{module}").__all__
        return names
    # Only the statement itself is parsed: parsing whole modules cost as much as the
    # laziness saved.
    found = _ALL.search(source)
    if found is None:
        raise ImportError(f"{package}.{module} lists no __all__ for its package's front")
    listed: list[str] = ast.literal_eval(found.group(1))
    return listed


# ``__all__ = [...]`` at the start of a line: a literal list of string literals.
_ALL = re.compile(r"^__all__ = (\[[^\]]*\])", re.MULTILINE)
