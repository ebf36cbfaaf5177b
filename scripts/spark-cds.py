"""Dump the class-data-sharing archive that the tests' Spark JVMs start from.

A Spark driver loads and verifies about 15,000 classes from the jars at every start; a test
suite that starts a driver per crash pays that each time. Java 17 can dump the classes a run
loaded into an archive (``-XX:ArchiveClassesAtExit``) and map it at the next start
(``-XX:SharedArchiveFile``): the same classes, from the same jars, without parsing them again.
The JVM checks that the class path and the jars' sizes and times match the dump's, and
otherwise starts without it; the Makefile silences that warning (``-Xlog:cds=off``).

This run loads what a test's driver loads: a session, a batch job, a Python data source's
planning and a streaming query of micro-batches. Usage: ``JDK_JAVA_OPTIONS=
-XX:ArchiveClassesAtExit=<archive> python scripts/spark-cds.py`` with the tests' SPARK_HOME;
the archive is written when the driver's JVM exits, which this run waits for.
"""

from __future__ import annotations

from integration_tests.numbers_source import NumbersSource
from kafka_eos.spark_session import new_spark_session


def main() -> None:
    spark = new_spark_session("local[2]", "kafka-eos-cds")
    spark.dataSource.register(NumbersSource)
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    numbers = (
        spark.readStream.format(NumbersSource.name())
        .option("count", "300")
        .option("perBatch", "100")
        .option("partitions", "2")
        .load()
    )
    query = (
        numbers.selectExpr("CAST(n AS STRING) AS key", "CAST(n AS STRING) AS value")
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    # The driver dumps the archive as it exits, which it does when its stdin closes: wait for
    # it, or the caller would find the archive half written.
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    main()
