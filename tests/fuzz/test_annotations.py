"""The annotation parser under fuzz: any string is a valid sample or "no data", never an error.

Annotations are written by whoever can patch a Node, so the parser is the first thing a
foreign or broken writer reaches. Its documented fallback is None (the filter fails open).
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from app.load.samples import format_hot_value, format_usage, parse_hot_value, parse_usage
from tests.fuzz.budget import examples

timestamps = st.one_of(
    st.datetimes(timezones=st.timezones()).map(lambda moment: moment.isoformat()),
    st.datetimes().map(lambda moment: moment.isoformat()),  # no zone: unknowable
    st.text(max_size=30),
)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(max_size=12),
    st.sampled_from(["1_0", "0x1", "1e-999", " 0.5 ", "٣", "inf", "-0", "9" * 5000]),
)
annotation_values = st.one_of(
    st.text(max_size=60),
    st.tuples(numbers, timestamps).map(lambda pair: f"{pair[0]},{pair[1]}"),
    st.tuples(numbers, timestamps, st.text(max_size=5)).map(",".join),
)


@examples(400)
@given(raw=annotation_values)
def test_any_usage_annotation_is_a_fraction_or_no_data(raw: str) -> None:
    sample = parse_usage(raw)
    if sample is not None:
        assert 0.0 <= sample.value <= 1.0
        assert math.isfinite(sample.timestamp_s)


@examples(400)
@given(raw=annotation_values)
def test_any_hot_value_annotation_is_a_whole_number_or_no_data(raw: str) -> None:
    sample = parse_hot_value(raw)
    if sample is not None:
        assert sample.value >= 0
        assert sample.value == int(sample.value)
        assert math.isfinite(sample.timestamp_s)


@examples(200)
@given(
    usage=st.floats(min_value=0, max_value=1),
    hot=st.integers(min_value=0, max_value=10**6),
    at_s=st.integers(min_value=0, max_value=4_000_000_000),
)
def test_what_the_annotator_writes_reads_back(usage: float, hot: int, at_s: int) -> None:
    read = parse_usage(format_usage(usage, at_s))
    assert read is not None
    assert abs(read.value - usage) <= 5e-6
    assert read.timestamp_s == at_s
    hot_read = parse_hot_value(format_hot_value(hot, at_s))
    assert hot_read is not None
    assert (hot_read.value, hot_read.timestamp_s) == (hot, at_s)
