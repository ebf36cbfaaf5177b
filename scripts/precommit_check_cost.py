"""What the writer's joined-range check adds to a task, on a real cluster: the partitions'
end offsets at the take (ListOffsets) and its producer's open ranges at the pre-commit
(DescribeProducers; ``ExactlyOnceWriter._refuse_a_joined_range``).

One id taken again and again, as a task's slot is from batch to batch: each round writes
``--records`` records of 200 B over every partition, pre-commits and commits. Rounds alternate
between the writer as shipped (the end offsets at the take, the check at the pre-commit) and
the same writer told the id is new (neither), and the medians of the whole
``write_and_pre_commit`` are compared. docs/benchmarks.md quotes a run::

    python scripts/precommit_check_cost.py --version 4.3.1 --nodes 3 --partitions 12
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic

from connectors.kafka.sink.committer import KafkaCommitter
from connectors.kafka.sink.exactly_once_writer import ExactlyOnceWriter
from connectors.kafka.sink.naming import TransactionalIdNaming
from connectors.kafka.transactions import TransactionAdmin
from connectors.kafka.txn_state import TxnState
from kafka_eos.cluster import ProcessCluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--records", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=42)
    args = parser.parse_args()
    with ProcessCluster(args.version, nodes=args.nodes) as cluster:
        config = {"bootstrap.servers": cluster.bootstrap_servers}
        topic = f"cost-{uuid.uuid4().hex[:8]}"
        replicas = min(3, args.nodes)
        admin = AdminClient(config)  # kept: a dropped client fails its futures
        for future in admin.create_topics([NewTopic(topic, args.partitions, replicas)]).values():
            future.result(30)
        naming = TransactionalIdNaming(f"cost-{uuid.uuid4().hex[:8]}", "0123abcd")
        tid = naming.transactional_id(0, 0)
        rows = pa.RecordBatch.from_pydict(
            {
                "value": [f"r-{n}-".ljust(200, "x") for n in range(args.records)],
                "partition": pa.array(
                    [n % args.partitions for n in range(args.records)], pa.int32()
                ),
            }
        )
        took: dict[bool, list[float]] = {True: [], False: []}
        committer = KafkaCommitter(config, naming, 60.0)
        txn_admin = TransactionAdmin(config)
        try:
            for n in range(args.rounds):
                checked = n % 2 == 0  # interleaved
                writer = ExactlyOnceWriter(config, topic, [tid], timeout_s=30)
                if not checked:  # as if the id were new: no end offsets, no check
                    take = writer._producer_on_a_free_id

                    def unchecked(topic: str, _take=take, _writer=writer) -> object:
                        taken = _take(topic)
                        _writer._taken_from = None
                        return taken

                    writer._producer_on_a_free_id = unchecked  # type: ignore[method-assign]
                began = time.perf_counter()
                committable = writer.write_and_pre_commit(n, [rows])
                if n >= 2:  # past the first takes' warm-up
                    took[checked].append(time.perf_counter() - began)
                assert committer.commit_all([committable]) == []
                while txn_admin.describe([tid])[tid].state is not TxnState.COMPLETE_COMMIT:
                    time.sleep(0.01)  # its markers, as the next batch finds them
        finally:
            committer.close()
            txn_admin.close()
    with_check, without = (statistics.median(took[k]) * 1000 for k in (True, False))
    print(
        f"Kafka {args.version}, {args.nodes} nodes, {args.partitions} partitions, "
        f"{args.records} records of 200 B, {len(took[True])} + {len(took[False])} takes "
        f"(interleaved): write_and_pre_commit median {with_check:.1f} ms with the check, "
        f"{without:.1f} ms without: {with_check / without:.2f}x, {with_check - without:+.1f} ms"
    )


if __name__ == "__main__":
    main()
