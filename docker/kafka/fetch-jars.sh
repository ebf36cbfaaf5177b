#!/usr/bin/env bash
# Resolves the jars of Apache Kafka $1 (KRaft broker + controller) from Maven Central with Maven
# and caches them in .cache/kafka/<version>/libs. Idempotent: a complete cache is reused.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/maven-cache.sh"

version="${1:?usage: fetch-jars.sh KAFKA_VERSION}"
fetch_dependencies kafka-jars "Apache Kafka $version" "$root/.cache/kafka/$version/libs" \
  "kafka_2.13-$version.jar" -Dkafka.version="$version"
