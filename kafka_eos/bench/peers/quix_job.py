"""Quix Streams as a contender of ``kafka-eos bench --suite contenders``: the same identity copy
of key and value, with ``processing_guarantee="exactly-once"``, in one Python process.

It runs under its own virtualenv (``scripts/peers/setup.sh quix``): Quix Streams 3.28 pins
confluent-kafka below 2.13, and ours is newer. So it imports nothing from kafka-eos. It prints
one JSON line: the rows copied and the seconds from the first record consumed to the end of the
run (group join and start-up excluded, as the Spark contenders exclude the JVM's start).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from quixstreams import Application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--records", type=int, required=True, help="stop after this many")
    parser.add_argument("--guarantee", default="exactly-once")
    args = parser.parse_args()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        auto_create_topics=False,
        use_changelog_topics=False,
    )
    source = app.topic(args.input_topic, key_deserializer="bytes", value_deserializer="bytes")
    output = app.topic(args.output_topic, key_serializer="bytes", value_serializer="bytes")
    first: list[float] = []

    def started(value: bytes) -> None:
        if not first:
            first.append(time.perf_counter())

    app.dataframe(source).update(started).to_topic(output)
    app.run(count=args.records, timeout=60, collect=False)
    seconds = time.perf_counter() - first[0] if first else 0.0
    print(json.dumps({"rows": args.records if first else 0, "seconds": seconds}))


if __name__ == "__main__":
    main()
