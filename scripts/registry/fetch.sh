#!/usr/bin/env bash
# Unpacks Apicurio Registry $1 (a real schema registry with a Confluent-compatible API at
# /apis/ccompat/v7) from Maven Central into .cache/registry/<version>: the Quarkus runner jar
# and its lib/. Idempotent: a complete cache is reused. kafka_eos/cluster/registry.py runs it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/maven-cache.sh"

version="${1:-3.0.9}"
dest="$root/.cache/registry/$version"
cache_open registry-jars "Apicurio Registry $version" "$dest"
maven -f "$here/pom.xml" dependency:copy -Dregistry.version="$version" -Dregistry.dest="$dest"
archive="$dest/apicurio-registry-app-$version-all.tar.gz"
tar -xzf "$archive" -C "$dest"
rm -f "$archive"
ls "$dest/apicurio-registry-app-$version-runner.jar" >/dev/null
cache_close registry-jars "$dest" \
  "Apicurio Registry $version: runner jar and $(jar_count "$dest/lib") jars"
