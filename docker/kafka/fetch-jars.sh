#!/usr/bin/env bash
# Resolves the jars of Apache Kafka $1 (KRaft broker + controller) from Maven Central with Maven
# and caches them in .cache/kafka/<version>/libs. Idempotent: a complete cache is reused.
set -euo pipefail

version="${1:?usage: fetch-jars.sh KAFKA_VERSION}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/kafka/$version/libs"

if [ -f "$dest/.complete" ]; then
  echo "[kafka-jars] $version cached in $dest"
  exit 0
fi
echo "[kafka-jars] resolving Apache Kafka $version from Maven Central into $dest"
rm -rf "$dest"
mkdir -p "$dest"
# Debian's Maven prints ANSI colour resets even in batch mode: keep them off the console.
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
  -Dkafka.version="$version" -DincludeScope=runtime -DoutputDirectory="$dest" 2>&1 \
  | sed -u 's/\x1b\[[0-9;]*m//g'
ls "$dest"/kafka_2.13-"$version".jar >/dev/null
touch "$dest/.complete"
echo "[kafka-jars] $(ls "$dest" | grep -c '\.jar$') jars for Kafka $version"
