"""Shared pytest configuration; fixtures live in tests/support and are registered here."""

pytest_plugins: list[str] = [
    "tests.support.prom_fixtures",
    "tests.support.fakekube_fixtures",
]
