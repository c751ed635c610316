"""What one evaluation of each day-long rule costs Prometheus, the percentiles against
the maximum: an instant query of the rule's expression (which is what an evaluation
is) over N nodes' day of ``cpu_usage_avg_5m`` at 30 s, on Debian's Prometheus.

The values are drawn at random (a sort of equal values would flatter the percentile).
The import is one set of blocks that do not overlap, so the server does no compaction
while the queries are timed; each expression is queried ``--repeat`` times and the
median is reported.

    python bench/percentile_rules.py                 # 1,000 nodes, ~30 s
    python bench/percentile_rules.py --nodes 5000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # `python bench/percentile_rules.py`: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import http_client
from tests.support.promserver import import_openmetrics, temporary_prometheus

STEP_S = 30
# The day's rules as deploy/prometheus/loadaware-rules.yaml has them, and the
# percentile over every sample that the shipped [1d:5m] replaces.
EXPRESSIONS = (
    "max_over_time(cpu_usage_avg_5m[1h])",
    "quantile_over_time(0.95, cpu_usage_avg_5m[1h])",
    "max_over_time(cpu_usage_avg_5m[1d])",
    "quantile_over_time(0.95, cpu_usage_avg_5m[1d:5m])",
    "quantile_over_time(0.95, cpu_usage_avg_5m[1d])",
)


def write_day(path: Path, nodes: int, start_s: int, end_s: int) -> int:
    draw = random.Random(45)
    samples = 0
    with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
        out.write("# TYPE cpu_usage_avg_5m gauge\n")
        for node in range(nodes):
            head = f'cpu_usage_avg_5m{{instance="10.{node // 250}.{node % 250}.1:9100"}} '
            times = range(start_s, end_s, STEP_S)
            out.write("".join(f"{head}{draw.random() * 100:.3f} {t}\n" for t in times))
            samples += len(times)
        out.write("# EOF\n")
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    now_s = int(time.time()) // 60 * 60
    with temporary_prometheus() as server:
        started = time.monotonic()
        samples = write_day(server.workdir / "day.om", args.nodes, now_s - 90000, now_s + 600)
        import_openmetrics(server.workdir / "day.om", server.tsdb_dir)
        server.start()
        print(f"{args.nodes:,} nodes, {samples:,} samples, ready in "
              f"{time.monotonic() - started:.1f} s")  # fmt: skip
        for expression in EXPRESSIONS:
            seconds = []
            for _ in range(args.repeat):
                began = time.monotonic()
                answer = http_client.get(
                    f"{server.url}/api/v1/query",
                    params={"query": expression, "time": now_s},
                    timeout=300,
                )
                seconds.append(time.monotonic() - began)
                series = len(answer.json()["data"]["result"])
                if series != args.nodes:
                    print(f"{expression}: {series} series, expected {args.nodes}")
                    return 1
            print(f"{expression:52s} median {statistics.median(seconds) * 1000:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
