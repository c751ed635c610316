"""scripts/rename_vocabulary.py renames names and leaves every contract a user reads.

The old names below are data for the script (which skips this file)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rename_vocabulary", ROOT / "scripts" / "rename_vocabulary.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("rename_vocabulary", module)
    spec.loader.exec_module(module)
    return module


RENAME = script()

EXTENDER_SOURCE = '''"""The ``Ledger`` and its ledger."""
from app.extender.reserve import NO_ADDITION, Addition, Ledger

METRIC = "loadaware_extender_estimated_addition_max_fraction"
__all__ = ["Ledger", "Addition"]


class Table:
    def __init__(self, ledger: Ledger | None) -> None:
        self._ledger = ledger  # the ledger, if any
        self.task.cancel()

    def view(self) -> dict[str, object]:
        addition = NO_ADDITION if self._ledger is None else self._ledger.addition("n", 0.0, 0.0)
        log.info("ledger: %s", addition)
        for node in self._ledger.cancel("uid"):
            pass
        return {"estimated_addition": addition.fractions, "text": f"ledger {self._ledger.ttl_s}"}
'''


def test_names_are_renamed_and_literals_a_user_reads_are_not() -> None:
    new = RENAME.python(EXTENDER_SOURCE, "app/extender/table.py")
    assert "from app.extender.reserve import NOTHING_UNSAMPLED, Unsampled, Reserve" in new
    assert "def __init__(self, reserve: Reserve | None)" in new
    assert "self._reserve = reserve  # the reserve, if any" in new
    assert '"""The ``Reserve`` and its reserve."""' in new  # docstring
    assert '__all__ = ["Reserve", "Unsampled"]' in new
    assert "unsampled = NOTHING_UNSAMPLED if self._reserve is None" in new
    assert "self._reserve.unsampled(" in new
    # Unreserve only on the Reserve: another object's cancel() stays.
    assert "self.task.cancel()" in new
    assert "self._reserve.unreserve(" in new
    # A metric, a JSON key, a log message and an f-string's text are what users read.
    assert '"loadaware_extender_estimated_addition_max_fraction"' in new
    assert '"estimated_addition": unsampled.fractions' in new
    assert 'log.info("ledger: %s", unsampled)' in new
    assert 'f"ledger {self._reserve.ttl_s}"' in new


STATE_SOURCE = '''from app.kube import state


def encode(memory: Memory) -> str:
    return str(len(memory.evictions))


def parse(values: list[float]) -> Resources:
    cpu, memory = values
    return Resources(cpu, memory)


def test_round_trip() -> None:
    memory = state.Memory()
    print(f"{len(memory.hot_rounds)} nodes, memory {config.queries.memory}")
'''


def test_the_state_is_renamed_where_it_is_the_state_and_the_resource_is_left() -> None:
    new = RENAME.python(STATE_SOURCE, "tests/descheduler/test_x.py")
    # This file imports the module ``state``, so the variable may not shadow it.
    assert "def encode(saved_state: DeschedulerState) -> str:" in new
    assert "return str(len(saved_state.evictions))" in new
    assert "saved_state = state.DeschedulerState()" in new
    assert 'f"{len(saved_state.hot_rounds)} nodes, memory {config.queries.memory}"' in new
    # memory, the resource:
    assert "cpu, memory = values\n    return Resources(cpu, memory)" in new


def test_prose_renames_words_not_parts_of_other_words_or_kept_tables() -> None:
    text = (
        "The ledger's `Ledger.reprice`, and the batch-beside-services fixture.\n"
        "<!-- rename_vocabulary: keep -->\n| `Ledger` | `Reserve` |\n"
        "<!-- rename_vocabulary: end -->\n"
    )
    new = RENAME.prose(text, "docs/developer.md")
    assert new.startswith("The reserve's `Reserve.reestimate`, and the batch-beside-services")
    assert "| `Ledger` | `Reserve` |" in new


def test_a_second_run_changes_nothing() -> None:
    for source, rel in ((EXTENDER_SOURCE, "app/extender/t.py"), (STATE_SOURCE, "tests/t.py")):
        once = RENAME.python(source, rel)
        assert RENAME.python(once, rel) == once


def test_the_vocabulary_in_the_developer_guide_is_the_script_s() -> None:
    guide = (ROOT / "docs" / "developer.md").read_text()
    assert RENAME.table() in guide


def test_no_new_name_is_an_old_one_so_a_second_run_has_nothing_to_do() -> None:
    old = {rule.old for rule in RENAME.RENAMES} | {old for old, _, _ in RENAME.PROSE}
    new = {rule.new for rule in RENAME.RENAMES} | {new for _, new, _ in RENAME.PROSE}
    assert not old & new
    assert not {n for n in new if any(o in n.split() for o in old)}
