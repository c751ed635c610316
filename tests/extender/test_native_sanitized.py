"""The native index's tests again, with the C code built under ASan and UBSan.

Out-of-bounds reads in the word-at-a-time name handling, or undefined behaviour in
the table, would pass the ordinary tests by luck; under the sanitizers they abort.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "app" / "extender" / "_verdict_index.c"
TESTS = Path(__file__).resolve().parent / "test_index.py"

# Loads the sanitized build in place of the installed one, then runs the index tests.
RUNNER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("app.extender._verdict_index", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules[spec.name] = module
import app.extender.index
assert app.extender.index.NativeVerdictIndex is module.VerdictIndex, "not the sanitized build"
import pytest
sys.exit(pytest.main(["-q", "-s", "-p", "no:cacheprovider", sys.argv[2]]))
"""


def _runtime(compiler: str, name: str) -> str | None:
    found = subprocess.run(
        [compiler, f"-print-file-name={name}"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


def test_index_tests_pass_under_address_and_undefined_behaviour_sanitizers(
    tmp_path: Path,
) -> None:
    compiler = shutil.which("gcc")
    if compiler is None:
        pytest.skip("gcc is not installed")
    runtimes = [_runtime(compiler, "libasan.so"), _runtime(compiler, "libubsan.so")]
    if None in runtimes:
        pytest.skip("gcc's sanitizer runtimes are not installed")
    library = tmp_path / "_verdict_index.so"
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
            str(SOURCE),
            "-o",
            str(library),
        ],
        check=True,
    )
    env = {
        **os.environ,
        "LD_PRELOAD": " ".join(r for r in runtimes if r),
        "ASAN_OPTIONS": "detect_leaks=0",  # CPython itself keeps memory until exit
        "PYTHONMALLOC": "malloc",  # so ASan sees every object allocation
    }
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, str(library), str(TESTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout
