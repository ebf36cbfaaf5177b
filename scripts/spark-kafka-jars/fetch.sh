#!/usr/bin/env bash
# Resolves Spark's Kafka connector (spark-sql-kafka-0-10 and the jars it adds to Spark's
# runtime) from Maven Central into .cache/spark-kafka/<version>. Idempotent: a complete cache
# is reused. Tests pass the jars with spark.jars (kafka_eos/spark_session.py).
set -euo pipefail

version="${1:-4.2.0}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/spark-kafka/$version"

source "$root/scripts/lib/maven-cache.sh"

cache_open spark-kafka-jars "Spark's Kafka connector $version" "$dest"
maven -f "$here/pom.xml" dependency:copy-dependencies \
  -Dspark.version="$version" -DincludeScope=runtime -DoutputDirectory="$dest" \
  -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
ls "$dest"/spark-sql-kafka-0-10_2.13-"$version".jar >/dev/null
cache_close spark-kafka-jars "$dest" \
  "$(ls "$dest" | grep -c '\.jar$') jars for Spark's Kafka connector $version"
