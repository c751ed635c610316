"""The native helpers' tests again, with the C code built under ASan and UBSan.

Out-of-bounds reads in the index's word-at-a-time name handling, undefined behaviour
in its table, or a reference miscounted in the pod demand reader would pass the
ordinary tests by luck; under the sanitizers they abort.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SOURCES = HERE.parents[1] / "app" / "extender"

# Loads each sanitized build in place of the installed one, checks that the Python side
# took it, then runs the helpers' tests, all in one process: an interpreter under the
# sanitizers starts and collects slowly (~2 CPU-s), and one serves both helpers. It loads
# neither the suite's conftest.py (its fixture plugins: Prometheus, the fake API server,
# the zygote) nor the installed pytest plugins (xdist, anyio, hypothesis' reporting)
# but pytest-timeout, which pyproject's options name: the helpers' tests use none of
# them, and their imports, every allocation through ASan's malloc, took a third of the
# run (14-17 -> 9-10 CPU-s). Hypothesis' @given runs its examples without its plugin.
# argv: (name, library, test files (comma-separated), where the Python side keeps it, its
# name in the module)...
RUNNER = """
import importlib, importlib.util, sys
given = sys.argv[1:]
tests = []
for at in range(0, len(given), 5):
    name, library, test_file, used, attribute = given[at:at + 5]
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[spec.name] = module
    user, _, variable = used.rpartition(".")
    taken = getattr(importlib.import_module(user), variable)
    assert taken is getattr(module, attribute), f"not the sanitized build of {name}"
    tests.extend(test_file.split(","))
import pytest
sys.exit(pytest.main(["-v", "-s", "-p", "no:cacheprovider", "-p", "pytest_timeout", "--noconftest",
                          *tests]))
"""

HELPERS = {
    # C source: (tests, where the Python side keeps it, its name in the module)
    "_verdict_index": (
        "test_index.py,test_pod_fields.py",
        "app.extender.index.NativeVerdictIndex",
        "VerdictIndex",
    ),
    "_pod_demand": (
        "test_pod_demand.py",
        "app.extender.request_pod.native_pod_demand",
        "pod_demand",
    ),
}


def _runtime(compiler: str, name: str) -> str | None:
    found = subprocess.run(
        [compiler, f"-print-file-name={name}"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


def test_helper_tests_pass_under_address_and_undefined_behaviour_sanitizers(
    tmp_path: Path,
) -> None:
    compiler = shutil.which("gcc")
    if compiler is None:
        pytest.skip("gcc is not installed")
    runtimes = [_runtime(compiler, "libasan.so"), _runtime(compiler, "libubsan.so")]
    if None in runtimes:
        pytest.skip("gcc's sanitizer runtimes are not installed")
    arguments: list[str] = []
    for helper, (tests, used, attribute) in HELPERS.items():
        library = tmp_path / f"{helper}.so"
        subprocess.run(
            [
                compiler,
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=all",
                "-fno-omit-frame-pointer",
                "-g",
                "-O1",
                "-fPIC",
                "-shared",
                f"-I{sysconfig.get_paths()['include']}",
                str(SOURCES / f"{helper}.c"),
                "-o",
                str(library),
            ],
            check=True,
        )
        files = ",".join(str(HERE / name) for name in tests.split(","))
        arguments += [f"app.extender.{helper}", str(library), files, used, attribute]
    env = {
        **os.environ,
        "LD_PRELOAD": " ".join(r for r in runtimes if r),
        "ASAN_OPTIONS": "detect_leaks=0",  # CPython itself keeps memory until exit
        "PYTHONMALLOC": "malloc",  # so ASan sees every object allocation
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # see RUNNER
    }
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout
    for tests, _used, _attribute in HELPERS.values():  # every file ran (-v names each test)
        for name in tests.split(","):
            assert f"{name}::" in result.stdout, name
