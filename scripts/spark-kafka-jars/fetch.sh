#!/usr/bin/env bash
# Resolves Spark's Kafka connector (spark-sql-kafka-0-10 and the jars it adds to Spark's
# runtime) from Maven Central into .cache/spark-kafka/<version>. Idempotent: a complete cache
# is reused. Tests pass the jars with spark.jars (kafka_eos/spark_session.py).
set -euo pipefail

version="${1:-4.2.0}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/spark-kafka/$version"

if [ -f "$dest/.complete" ]; then
  echo "[spark-kafka-jars] $version cached in $dest"
  exit 0
fi
echo "[spark-kafka-jars] resolving Spark's Kafka connector $version from Maven Central into $dest"
rm -rf "$dest"
mkdir -p "$dest"
# Debian's Maven prints ANSI colour resets even in batch mode: keep them off the console.
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
  -Dspark.version="$version" -DincludeScope=runtime -DoutputDirectory="$dest" \
  -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
  2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'
ls "$dest"/spark-sql-kafka-0-10_2.13-"$version".jar >/dev/null
touch "$dest/.complete"
echo "[spark-kafka-jars] $(ls "$dest" | grep -c '\.jar$') jars for Spark's Kafka connector $version"
