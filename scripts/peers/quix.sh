#!/usr/bin/env bash
# Sets up the Quix Streams contender of `kafka-eos bench --suite contenders` in
# .cache/peers/quix: its own virtualenv, because Quix Streams 3.28 pins confluent-kafka below
# 2.13 and the project's is newer. Idempotent: a complete cache is reused.
# kafka_eos/peers/quix_job.py is the job.
set -euo pipefail

version="${1:-3.28.0}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/.cache/peers/quix"
stamp="quixstreams==$version"

if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; then
  echo "[quix] $stamp cached in $dest"
  exit 0
fi
echo "[quix] setting up $stamp in $dest"
rm -rf "$dest"
mkdir -p "$dest"
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python=python3.11
"$python" -m venv "$dest/venv"
"$dest/venv/bin/pip" install -q "$stamp"
echo "$stamp" >"$dest/.complete"
echo "[quix] $stamp set up"
