#!/usr/bin/env bash
# Sets up the PyFlink contender of `kafka-eos bench --suite contenders` in .cache/peers/flink:
# its own virtualenv with apache-flink (which pins apache-beam, pyarrow and more, apart from the
# project's venv) and Flink's Kafka SQL connector jar from Maven Central (shaded: kafka-clients
# is inside it). Idempotent: a complete cache is reused. kafka_eos/peers/flink.py runs the job.
set -euo pipefail

flink_version="${1:-2.3.0}"
connector_version="${2:-5.0.0-2.2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/peers/flink"
stamp="apache-flink==$flink_version flink-sql-connector-kafka:$connector_version"

if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; then
  echo "[flink] $stamp cached in $dest"
  exit 0
fi
echo "[flink] setting up $stamp in $dest"
rm -rf "$dest"
mkdir -p "$dest/jars"
# The jar first: it is what may not resolve. Debian's Maven prints ANSI colour resets even in
# batch mode: keep them off the console.
mvn -q -B -f "$here/flink-pom.xml" dependency:copy-dependencies \
  -Dconnector.version="$connector_version" -DincludeScope=runtime \
  -DoutputDirectory="$dest/jars" -DincludeArtifactIds=flink-sql-connector-kafka \
  2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'
ls "$dest"/jars/flink-sql-connector-kafka-"$connector_version".jar >/dev/null
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python=python3.11
"$python" -m venv "$dest/venv"
"$dest/venv/bin/pip" install -q --upgrade pip
"$dest/venv/bin/pip" install -q "apache-flink==$flink_version"
echo "$stamp" >"$dest/.complete"
echo "[flink] $stamp set up"
