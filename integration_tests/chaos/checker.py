"""The chaos run's verdict: the output as two independent read_committed readers see it.

One reader is the project's (librdkafka through :func:`kafka_eos.operations.drain.drain`), the
other Kafka's own Java consumer (``kafka-console-consumer`` from Apache Kafka's jars). Both must
show every input record's result exactly once, every closed window's per-key aggregate exactly
once and equal to the total of its input, and the two must agree record for record.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from integration_tests.chaos.job import WINDOW_MS
from kafka_eos.cluster.base import PROJECT_ROOT
from kafka_eos.operations.drain import drain

JAVA_TOOLS_VERSION = "4.3.1"
JAVA_TOOLS = PROJECT_ROOT / ".cache" / "kafka-tools" / JAVA_TOOLS_VERSION
# (partition, key, value) in the partition's order: what both readers must agree on.
Record = tuple[int, str, str]


@dataclass
class Verdict:
    records: int = 0  # input records
    results: int = 0  # r: records the project's reader saw
    aggregates: int = 0  # a: records the project's reader saw
    duplicates: int = 0  # results and (key, window) aggregates seen more than once
    losses: int = 0  # results, and aggregates of closed windows, never seen
    wrong: list[str] = field(default_factory=list)
    java_disagrees: str | None = None
    aborted_records: int = 0  # in the log but not committed (read_uncommitted - read_committed)
    open_transactions: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # where the first lost results came from

    @property
    def failures(self) -> list[str]:
        found = []
        if self.duplicates or self.losses:
            found.append(f"{self.duplicates} duplicated and {self.losses} lost")
        if self.wrong:
            found.append(f"wrong records: {self.wrong[:5]}")
        if self.java_disagrees:
            found.append(f"Kafka's Java consumer disagrees: {self.java_disagrees}")
        if self.open_transactions:
            found.append(f"left open: {self.open_transactions[:5]}")
        if not self.aborted_records:
            found.append("no aborted record in the log: no fault landed inside a transaction")
        return found


def java_records(bootstrap: str, topic: str, at_most: int) -> list[Record]:
    """The topic read with read_committed by Kafka's Java console consumer, until it saw
    nothing new for 8 s (the query has stopped: nothing more comes), or ``at_most`` records
    (the log's count, aborted ones included)."""
    command = [
        "java", "-Xmx512m", "-cp", f"{JAVA_TOOLS}/*",
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
        "--isolation-level", "read_committed", "--max-messages", str(at_most),
        "--timeout-ms", "8000",
        "--formatter-property", "print.partition=true",
        "--formatter-property", "print.key=true",
    ]  # fmt: skip
    if not JAVA_TOOLS.exists():
        subprocess.run([str(PROJECT_ROOT / "scripts/kafka-tools/fetch.sh")], check=True)
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"kafka-console-consumer exited {run.returncode}: {run.stderr}"
    records = []
    for line in run.stdout.splitlines():
        partition, key, value = line.split("\t")
        records.append((int(partition.removeprefix("Partition:")), key, value))
    return records


def project_records(bootstrap: str, topic: str, isolation: str) -> list[Record]:
    return [
        (r.partition, (r.key or b"").decode(), (r.value or b"").decode())
        for r in drain(bootstrap, topic, isolation, timeout_s=300)
    ]


def by_partition(records: list[Record]) -> dict[int, list[Record]]:
    grouped: dict[int, list[Record]] = {}
    for record in records:
        grouped.setdefault(record[0], []).append(record)
    return grouped


def judge(
    inputs: dict[int, str],
    t0_ms: int,
    committed: list[Record],
    java: list[Record],
    uncommitted: int,
    open_transactions: list[str],
) -> Verdict:
    """``inputs``: sequence number -> key, as the input topic holds it; record n's event time
    is ``t0_ms + n``."""
    verdict = Verdict(records=len(inputs), open_transactions=open_transactions)
    results: Counter[int] = Counter()
    aggregates: Counter[tuple[str, int]] = Counter()
    expected: dict[tuple[str, int], tuple[int, int]] = {}
    for n, key in inputs.items():
        window = (key, (t0_ms + n) // WINDOW_MS * WINDOW_MS)
        count, total = expected.get(window, (0, 0))
        expected[window] = (count + 1, total + n)
    for _, key, value in committed:
        kind, *fields = value.split(":")
        if kind == "r":
            n = int(fields[0])
            results[n] += 1
            if inputs.get(n) != key:
                verdict.wrong.append(f"{value} under key {key}")
            continue
        start, count, total = (int(x) for x in fields)
        aggregates[key, start] += 1
        if expected.get((key, start)) != (count, total):
            verdict.wrong.append(f"{key} {value}: input {expected.get((key, start))}")
    verdict.results, verdict.aggregates = results.total(), aggregates.total()
    verdict.duplicates = sum(c - 1 for c in [*results.values(), *aggregates.values()] if c > 1)
    verdict.duplicates += sum(c for n, c in results.items() if n not in inputs)
    # Closed: the watermark (the newest event time) is past the window's end.
    newest = t0_ms + max(inputs, default=0)
    closed = [w for w in expected if w[1] + WINDOW_MS < newest]
    verdict.losses = sum(1 for n in inputs if n not in results)
    verdict.losses += sum(1 for w in closed if w not in aggregates)
    if by_partition(java) != by_partition(committed):
        verdict.java_disagrees = f"{len(java)} records, the project's reader {len(committed)}"
    verdict.aborted_records = uncommitted - len(committed)
    return verdict


def check(
    source_bootstrap: str,
    input_topic: str,
    sink_bootstrap: str,
    output: str,
    open_transactions: list[str],
    t0_ms: int,
    batch_of: Callable[[int, int], int | None],
) -> Verdict:
    """The verdict; for lost results, where each came from: its input partition and offset,
    the batch that read it (``batch_of``), and whether its record is in the log at all."""
    drained = {int(r.value or b"-1"): r for r in drain(source_bootstrap, input_topic)}
    inputs = {n: (r.key or b"").decode() for n, r in drained.items()}
    committed = project_records(sink_bootstrap, output, "read_committed")
    uncommitted = project_records(sink_bootstrap, output, "read_uncommitted")
    java = java_records(sink_bootstrap, output, len(uncommitted))
    verdict = judge(inputs, t0_ms, committed, java, len(uncommitted), open_transactions)
    if verdict.losses:
        seen = {value for _, _, value in committed}
        in_log = {value for _, _, value in uncommitted}
        for n in sorted(n for n in inputs if f"r:{n}" not in seen)[:20]:
            record = drained[n]
            verdict.lost.append(
                f"r:{n} from {record.partition}@{record.offset} (batch "
                f"{batch_of(record.partition, record.offset)}): "
                + ("in the log, not committed" if f"r:{n}" in in_log else "not in the log")
            )
    return verdict
