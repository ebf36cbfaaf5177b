#!/usr/bin/env bash
# Sets up a contender of `kafka-eos bench --suite contenders` that is not ours, in
# .cache/peers/<name>: its own virtualenv, because each pins packages that fight the project's
# (Quix Streams 3.28 wants confluent-kafka below 2.13; apache-flink pins apache-beam, pyarrow
# and numpy), and for PyFlink, Flink's Kafka SQL connector from Maven Central (shaded:
# kafka-clients is inside it; the jar first, as it is what may not resolve). Idempotent: a
# cache set up with the same versions is reused. kafka_eos/bench/peers/ holds the jobs.
#   setup.sh quix | flink
set -euo pipefail

name="${1:?usage: setup.sh quix|flink}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/peers/$name"
case "$name" in
  quix) package="quixstreams==3.28.0"; connector="" ;;
  flink) package="apache-flink==2.3.0"; connector="5.0.0-2.2" ;;
  *) echo "setup.sh: no contender named $name (quix, flink)" >&2; exit 2 ;;
esac
stamp="$package${connector:+ flink-sql-connector-kafka:$connector}"

if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; then
  echo "[$name] $stamp cached in $dest"
  exit 0
fi
echo "[$name] setting up $stamp in $dest"
rm -rf "$dest"
mkdir -p "$dest"
if [ -n "$connector" ]; then
  # Debian's Maven prints ANSI colour resets even in batch mode: keep them off the console.
  mvn -q -B -f "$here/flink-pom.xml" dependency:copy-dependencies \
    -Dconnector.version="$connector" -DincludeScope=runtime \
    -DoutputDirectory="$dest/jars" -DincludeArtifactIds=flink-sql-connector-kafka \
    2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'
  ls "$dest"/jars/flink-sql-connector-kafka-"$connector".jar >/dev/null
fi
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python=python3.11
"$python" -m venv "$dest/venv"
"$dest/venv/bin/pip" install -q --upgrade pip
"$dest/venv/bin/pip" install -q "$package"
echo "$stamp" >"$dest/.complete"
echo "[$name] $stamp set up"
