#!/usr/bin/env bash
# Resolves hadoop-aws and the AWS SDK v2 modules it loads from Maven Central into
# .cache/s3a/<hadoop version>, without the jars Spark already ships (netty, Apache HttpClient,
# commons-codec, commons-logging, slf4j). Idempotent: a complete cache is reused. Tests put the
# jars on the driver's and executors' class path (kafka_eos/spark_session.py).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/maven-cache.sh"

version="${1:-3.5.0}"
fetch_dependencies s3a-jars "hadoop-aws $version and the AWS SDK modules S3A loads" \
  "$root/.cache/s3a/$version" "hadoop-aws-$version.jar" -Dhadoop.version="$version" \
  -DexcludeGroupIds=io.netty,org.apache.httpcomponents,commons-codec,commons-logging,org.slf4j
