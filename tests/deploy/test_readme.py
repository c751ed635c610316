"""The README is a user's page (issue 46): what loadaware is, the two commands for a
fresh machine, choosing a mode, compatibility, install, operate; how each part works
after that, and the internals (layout, test suite, speed) in docs/developer.md. The
pages an operator adopting it looks for exist and are linked: CHANGELOG.md with upgrade
notes, the upgrade and uninstall steps, a LICENSE that is the license the package
declares."""

from __future__ import annotations

import re
import tomllib

from tests.deploy.manifests import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
DEVELOPER = (ROOT / "docs" / "developer.md").read_text(encoding="utf-8")

# What a user reads first, in this order, before any section on how a part works.
USER_SECTIONS = ["## How it fits together", "## Choosing a mode", "## Compatibility",
                 "## Install", "## Operate"]  # fmt: skip
# What only those who change loadaware need: in docs/developer.md, not the README.
DEVELOPER_SECTIONS = ["## Layout", "## The test suite", "## Speed"]


def headings(text: str) -> list[str]:
    """Level-2 headings, outside fenced code blocks (a shell comment is no heading)."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            found.append(line.strip())
    return found


def test_the_readme_starts_with_the_two_commands_for_a_fresh_machine() -> None:
    """Before any section: one command runs the demo, one passes the whole test suite."""
    before_sections = README.split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", before_sections, flags=re.DOTALL)
    assert blocks, "README.md: no shell block before its first section"
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].splitlines()]
    assert [c for c in commands if c] == ["bash scripts/demo", "bash scripts/test"], blocks[0]
    for script in ("demo", "test"):
        assert (ROOT / "scripts" / script).is_file()
    # What it is comes first: a sentence before the commands.
    assert before_sections.index("Kubernetes") < before_sections.index("```sh")


def test_the_user_s_sections_come_first_in_order() -> None:
    found = headings(README)
    missing = [s for s in USER_SECTIONS if s not in found]
    assert missing == [], f"README.md lacks {missing}"
    assert found[: len(USER_SECTIONS)] == USER_SECTIONS, (
        f"README.md: a user reads {USER_SECTIONS} first, in that order; it has {found}"
    )


def test_the_internals_are_in_the_developer_page_not_the_readme() -> None:
    found = headings(README)
    assert [s for s in DEVELOPER_SECTIONS if s in found] == []
    assert [s for s in DEVELOPER_SECTIONS if s not in headings(DEVELOPER)] == []
    assert "(docs/developer.md)" in README.split("\n## ", 1)[0]  # linked from the top


def test_the_readme_says_where_the_image_comes_from_and_links_the_adoption_pages() -> None:
    install = README.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    assert "Dockerfile" in install
    assert "no published image" in install
    top = README.split("\n## ", 1)[0]
    for link in ("(CHANGELOG.md)", "(LICENSE)"):
        assert link in top, f"README.md: the top does not link {link}"
    for step in ('"Upgrade"', '"Uninstall"'):
        assert step in install, f"README.md, Install: no pointer to docs/install.md, {step}"
    steps = headings((ROOT / "docs" / "install.md").read_text(encoding="utf-8"))
    assert {"## Upgrade", "## Uninstall"} <= set(steps)


def test_the_changelog_has_upgrade_notes_for_what_is_unreleased() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    unreleased = changelog.split("\n## Unreleased\n", 1)[1].split("\n## ", 1)[0]
    assert "### Upgrade notes" in unreleased


def test_the_license_file_is_the_license_the_package_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert f"License: {declared}" in README


NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                "nine", "ten", "eleven", "twelve"]  # fmt: skip


def test_the_readme_counts_the_simulator_s_policies_as_it_runs_them() -> None:
    """It said "six policies" where simulate ran eight."""
    from app.simulate.policies import DEFAULT_POLICIES

    row = next(line for line in README.splitlines() if line.startswith("| simulator |"))
    counted = re.findall(r"\((\w+) policies\)", row)
    assert counted == [NUMBER_WORDS[len(DEFAULT_POLICIES)]], (row, DEFAULT_POLICIES)
    for name in DEFAULT_POLICIES:
        base = name.split("+desched")[0]
        assert f"`{base}`" in row, f"README.md's simulator row does not name {base}"


def test_every_page_puts_the_debounce_count_in_the_descheduler_s_memory() -> None:
    """install.md and the README disagreed on where the hot-round count lives: in the
    memory ConfigMap; a page naming the Node annotation says it is of earlier versions."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in pages:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for sentence in re.split(r"(?<=[.;])\s", text):
            if "descheduler.loadaware.io/hot-rounds`" not in sentence:
                continue
            assert re.search(r"[Ee]arlier versions|versions before|no longer|older", sentence), (
                f"{path.name}: {sentence}"
            )
