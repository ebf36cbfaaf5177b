#!/usr/bin/env bash
# Builds the local base image (Debian bookworm + a headless Java 17 runtime) without any image
# registry: debootstrap a minimal rootfs from Debian's packages, then `docker import` it.
# Idempotent: an existing image of the same tag is kept.
set -euo pipefail

image="${BASE_IMAGE:-kafka-eos/jre-base:bookworm-17}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf '[base-image] %s\n' "$*"; }

if docker image inspect "$image" >/dev/null 2>&1; then
  say "$image exists; skipping"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q debootstrap >/dev/null
fi

rootfs="$(mktemp -d /tmp/kafka-eos-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
say "debootstrap bookworm + openjdk-17-jre-headless into $rootfs (about a minute)"
debootstrap --variant=minbase --include=openjdk-17-jre-headless bookworm "$rootfs" "$mirror" \
  >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log" >&2; exit 1; }
rm -f "$rootfs.log"
# Trim what a JVM server never needs, to keep the image small.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/usr/share/locale

say "docker import -> $image"
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  - "$image" >/dev/null
# Prove the image runs Java. Read the whole output first: `| head -n 1` would close the pipe
# on `docker run`, whose SIGPIPE then fails this script under pipefail.
if ! java_version="$(docker run --rm "$image" java -version 2>&1)"; then
  printf '%s\n' "$java_version" >&2
  docker image rm "$image" >/dev/null
  say "the imported image cannot run java; removed it (rerun to rebuild)"
  exit 1
fi
say "${java_version%%$'\n'*}"
