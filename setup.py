"""The one build step pyproject.toml cannot declare stably: the extender's C helpers.

Both are optional: without a C compiler the package still installs, and the extender
uses their pure-Python twins (the verdict index in app/extender/index.py, logging so;
the pod demand reader in app/extender/estimates.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "app.extender._verdict_index",
            sources=["app/extender/_verdict_index.c"],
            optional=True,
        ),
        Extension(
            "app.extender._pod_demand",
            sources=["app/extender/_pod_demand.c"],
            optional=True,
        ),
    ]
)
