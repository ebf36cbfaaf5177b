#!/usr/bin/env bash
# Resolves hadoop-aws and the AWS SDK v2 modules it loads from Maven Central into
# .cache/s3a/<hadoop version>, without the jars Spark already ships (netty, Apache HttpClient,
# commons-codec, commons-logging, slf4j). Idempotent: a complete cache is reused. Tests put the
# jars on the driver's and executors' class path (kafka_eos/spark_session.py).
set -euo pipefail

version="${1:-3.5.0}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/s3a/$version"

source "$root/scripts/lib/maven-cache.sh"

cache_open s3a-jars "hadoop-aws $version and the AWS SDK modules S3A loads" "$dest"
maven -f "$here/pom.xml" dependency:copy-dependencies \
  -Dhadoop.version="$version" -DincludeScope=runtime -DoutputDirectory="$dest" \
  -DexcludeGroupIds=io.netty,org.apache.httpcomponents,commons-codec,commons-logging,org.slf4j
ls "$dest"/hadoop-aws-"$version".jar >/dev/null
cache_close s3a-jars "$dest" "$(ls "$dest" | grep -c '\.jar$') jars for s3a:// ($(du -sh "$dest" | cut -f1))"
