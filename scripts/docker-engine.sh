#!/usr/bin/env bash
# Makes a Docker engine reachable, or stops the one this script started.
#   scripts/docker-engine.sh start   install Debian's docker.io (and docker-compose, for the compose
#                                    files in docker/) if needed, start dockerd, wait for it
#   scripts/docker-engine.sh stop    stop the dockerd this script started (by its recorded pid)
# Idempotent: an engine that already answers `docker info` is used as it is and never stopped here.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="$root/.cache/dockerd"
pidfile="$state/dockerd.pid"
log="$state/dockerd.log"

say() { printf '[docker-engine] %s\n' "$*"; }

engine_answers() { docker info >/dev/null 2>&1; }

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    say "no $1 and not root: install Debian's $1" >&2
    return 1
  fi
  say "installing Debian's $1 (once per machine)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q "$1" >/dev/null
}

start() {
  command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
  if engine_answers; then
    say "a Docker engine is reachable; using it"
    return 0
  fi
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  mkdir -p "$state"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    say "dockerd (pid $(cat "$pidfile")) is starting; waiting"
  else
    say "starting dockerd in the background (log: $log)"
    nohup dockerd >"$log" 2>&1 &
    echo $! >"$pidfile"
  fi
  for _ in $(seq 1 60); do
    if engine_answers; then
      say "dockerd is up (pid $(cat "$pidfile"))"
      return 0
    fi
    sleep 1
  done
  say "dockerd did not answer within 60 s; last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
  return 1
}

stop() {
  if [ ! -f "$pidfile" ]; then
    say "no dockerd started by this script; nothing to stop"
    return 0
  fi
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    say "stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
