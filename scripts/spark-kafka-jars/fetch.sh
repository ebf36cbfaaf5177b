#!/usr/bin/env bash
# Resolves Spark's Kafka connector (spark-sql-kafka-0-10 and the jars it adds to Spark's
# runtime) from Maven Central into .cache/spark-kafka/<version>. Idempotent: a complete cache
# is reused. Tests pass the jars with spark.jars (kafka_eos/spark_session.py).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/maven-cache.sh"

version="${1:-4.2.0}"
fetch_dependencies spark-kafka-jars "Spark's Kafka connector $version" \
  "$root/.cache/spark-kafka/$version" "spark-sql-kafka-0-10_2.13-$version.jar" \
  -Dspark.version="$version" \
  -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
