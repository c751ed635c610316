"""The one build step pyproject.toml cannot declare stably: the extender's C index.

It is optional: without a C compiler the package still installs, and the extender
answers with the index's pure-Python twin (app/extender/index.py), logging so.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "app.extender._verdict_index",
            sources=["app/extender/_verdict_index.c"],
            optional=True,
        )
    ]
)
