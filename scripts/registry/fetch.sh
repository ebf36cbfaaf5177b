#!/usr/bin/env bash
# Unpacks Apicurio Registry $1 (a real schema registry with a Confluent-compatible API at
# /apis/ccompat/v7) from Maven Central into .cache/registry/<version>: the Quarkus runner jar
# and its lib/. Idempotent: a complete cache is reused. kafka_eos/cluster/registry.py runs it.
set -euo pipefail

version="${1:-3.0.9}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/registry/$version"

if [ -f "$dest/.complete" ]; then
  echo "[registry-jars] Apicurio Registry $version cached in $dest"
  exit 0
fi
echo "[registry-jars] unpacking Apicurio Registry $version from Maven Central into $dest"
rm -rf "$dest"
mkdir -p "$dest"
# Debian's Maven prints ANSI colour resets even in batch mode: keep them off the console.
mvn -q -B -f "$here/pom.xml" dependency:copy \
  -Dregistry.version="$version" -Dregistry.dest="$dest" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'
archive="$dest/apicurio-registry-app-$version-all.tar.gz"
tar -xzf "$archive" -C "$dest"
rm -f "$archive"
ls "$dest/apicurio-registry-app-$version-runner.jar" >/dev/null
touch "$dest/.complete"
echo "[registry-jars] Apicurio Registry $version: runner jar and $(ls "$dest/lib" | grep -c '\.jar$') jars"
