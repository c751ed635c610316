import math
from datetime import UTC, datetime

import pytest

from app.load import samples
from app.load.samples import (
    format_hot_value,
    format_usage,
    parse_hot_value,
    parse_timestamp_s,
    parse_usage,
)

T0 = datetime(2023, 10, 17, 15, 4, 32, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0.63012,2023-10-17T15:04:32Z", (0.63012, T0)),  # crane's layout
        ("0.5,2023-10-17T15:04:32.250Z", (0.5, T0 + 0.25)),  # RFC 3339 with fraction
        ("0.5,2023-10-17T17:04:32+02:00", (0.5, T0)),  # explicit offset
        (" 0.5 , 2023-10-17T15:04:32Z ", (0.5, T0)),  # stray whitespace
        ("0,2023-10-17T15:04:32Z", (0.0, T0)),
        ("1,2023-10-17T15:04:32Z", (1.0, T0)),
    ],
)
def test_usage_annotation_parses(raw: str, expected: tuple[float, float]) -> None:
    sample = parse_usage(raw)
    assert sample is not None
    assert (sample.value, sample.timestamp_s) == pytest.approx(expected)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "0.5",
        "0.5,",
        ",2023-10-17T15:04:32Z",
        "abc,2023-10-17T15:04:32Z",
        "nan,2023-10-17T15:04:32Z",
        "inf,2023-10-17T15:04:32Z",
        "-0.1,2023-10-17T15:04:32Z",
        "63.5,2023-10-17T15:04:32Z",  # a percentage written by a foreign tool
        "0.5,yesterday",
        "0.5,2023-10-17T15:04:32",  # no zone: the instant is unknown
        "0.5,2023-13-45T99:04:32Z",
    ],
)
def test_garbage_usage_annotation_is_unreadable(raw: str) -> None:
    assert parse_usage(raw) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("3,2023-10-17T15:04:32Z", 3.0), ("0,2023-10-17T15:04:32Z", 0.0)],
)
def test_hot_value_parses(raw: str, expected: float) -> None:
    sample = parse_hot_value(raw)
    assert sample is not None
    assert sample.value == expected


@pytest.mark.parametrize(
    "raw", ["-1,2023-10-17T15:04:32Z", "1.5,2023-10-17T15:04:32Z", "x,2023-10-17T15:04:32Z", "2"]
)
def test_garbage_hot_value_is_unreadable(raw: str) -> None:
    assert parse_hot_value(raw) is None


def test_usage_is_written_in_crane_layout_in_utc() -> None:
    assert format_usage(0.630123, T0) == "0.63012,2023-10-17T15:04:32Z"
    assert format_hot_value(2, T0) == "2,2023-10-17T15:04:32Z"


def test_written_values_read_back() -> None:
    sample = parse_usage(format_usage(0.25, T0))
    assert sample is not None
    assert sample.value == 0.25
    assert sample.timestamp_s == T0


def test_a_timestamp_is_read_alike_however_often_and_only_short_texts_are_kept() -> None:
    """Timestamps are parsed once per text (every node of a sync shares one), in a
    cache that keeps only what a timestamp can be: a padded one still parses, as it
    did, but is never kept, so annotations cannot fill memory through it."""
    samples._timestamp_s_cached.cache_clear()
    synced = [parse_usage(f"0.{i},2023-10-17T15:04:32Z") for i in range(1, 4)]
    assert [(s.value, s.timestamp_s) for s in synced if s] == [(0.1, T0), (0.2, T0), (0.3, T0)]
    padded = " " * 5000 + "2023-10-17T15:04:32Z"
    sample = parse_usage(f"0.5,{padded}")
    assert sample is not None
    assert sample.timestamp_s == T0
    info = samples._timestamp_s_cached.cache_info()
    assert (info.hits, info.misses, info.currsize) == (2, 1, 1)


def test_timestamp_parser_rejects_non_timestamps() -> None:
    assert parse_timestamp_s("") is None
    assert parse_timestamp_s("12345") is None
    assert math.isclose(parse_timestamp_s("2023-10-17T15:04:32Z") or 0, T0)
