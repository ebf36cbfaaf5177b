#!/usr/bin/env bash
# Builds the local image kafka-eos/kafka:<version> from Maven Central jars on the local base
# image; no image registry is involved. Idempotent: an existing image is kept unless the
# image's inputs (this folder) changed since it was built.
set -euo pipefail

version="${1:?usage: build.sh KAFKA_VERSION}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
image="kafka-eos/kafka:$version"
base="${BASE_IMAGE:-kafka-eos/jre-base:bookworm-17}"
inputs="$(cat "$here/Dockerfile" "$here/entrypoint.sh" "$here/server.properties" \
  "$here/log4j2.properties" "$here/pom.xml" | sha256sum | cut -c1-12)"

if [ "$(docker image inspect -f '{{index .Config.Labels "io.kafka-eos.inputs"}}' "$image" 2>/dev/null)" = "$inputs" ]; then
  echo "[kafka-image] $image is up to date"
  exit 0
fi
"$here/../base/build.sh"
"$here/fetch-jars.sh" "$version"

context="$root/.cache/kafka/$version/context"
rm -rf "$context"
mkdir -p "$context"
cp -r "$root/.cache/kafka/$version/libs" "$context/libs"
rm -f "$context/libs/.complete"
cp "$here/Dockerfile" "$here/entrypoint.sh" "$here/server.properties" "$here/log4j2.properties" "$context/"
echo "[kafka-image] building $image"
# The legacy builder suffices for a COPY-only Dockerfile and needs no buildx plugin.
DOCKER_BUILDKIT=0 docker build -q --build-arg BASE_IMAGE="$base" --build-arg KAFKA_VERSION="$version" \
  --label "io.kafka-eos.inputs=$inputs" -t "$image" "$context" >"$context.log" 2>&1 \
  || { cat "$context.log" >&2; exit 1; }
rm -f "$context.log"
rm -rf "$context"
echo "[kafka-image] built $image"
