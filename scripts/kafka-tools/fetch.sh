#!/usr/bin/env bash
# Resolves Apache Kafka $1's command-line tools (kafka-tools and its dependencies) from Maven
# Central into .cache/kafka-tools/<version>: the chaos checker reads the output with Kafka's own
# Java consumer (kafka-console-consumer). Idempotent: a complete cache is reused.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/maven-cache.sh"

version="${1:-4.3.1}"
fetch_dependencies kafka-tools "Apache Kafka $version's tools" "$root/.cache/kafka-tools/$version" \
  "kafka-tools-$version.jar" -Dkafka.version="$version"
