#!/usr/bin/env bash
# Resolves the jars of Apache Kafka $1 (KRaft broker + controller) from Maven Central with Maven
# and caches them in .cache/kafka/<version>/libs. Idempotent: a complete cache is reused.
set -euo pipefail

version="${1:?usage: fetch-jars.sh KAFKA_VERSION}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/kafka/$version/libs"

source "$root/scripts/lib/maven-cache.sh"

cache_open kafka-jars "Apache Kafka $version" "$dest"
maven -f "$here/pom.xml" dependency:copy-dependencies \
  -Dkafka.version="$version" -DincludeScope=runtime -DoutputDirectory="$dest"
ls "$dest"/kafka_2.13-"$version".jar >/dev/null
cache_close kafka-jars "$dest" "$(ls "$dest" | grep -c '\.jar$') jars for Kafka $version"
