#!/bin/sh
# Starts one combined KRaft broker+controller node.
#
# Environment:
#   KAFKA_NODE_ID                  node id (default 1)
#   KAFKA_CONTROLLER_QUORUM_VOTERS static voters (default: this node alone)
#   KAFKA_CLUSTER_ID               cluster id shared by every node of a cluster
#   KAFKA_ADVERTISED_LISTENERS     what clients are told (default EXTERNAL://localhost:9092)
#   KAFKA_CFG_<KEY>                any broker property, e.g. KAFKA_CFG_TRANSACTION_MAX_TIMEOUT_MS
#                                  (lower-cased, '_' becomes '.')
#   KAFKA_INTERNAL_HOST            name other nodes reach this one by (default: hostname)
#   KAFKA_FORMAT_FEATURES          features to finalize when the storage is first formatted
#                                  instead of the release's defaults, as name=level pairs
#                                  separated by commas, e.g. transaction.version=1 (a 4.x
#                                  cluster on transactions V1); every node of a cluster must
#                                  get the same value
#   KAFKA_WAIT_FOR_OVERRIDES=1     at every start, wait until $OVERRIDES exists, append it and
#                                  remove it: testcontainers learns the mapped port only after
#                                  the container started (and again after a restart), then
#                                  writes advertised.listeners there.
set -eu
# The classpath wildcard is for java, not for the shell.
set -f

CONF_DIR=/opt/kafka/config
CONF=/var/lib/kafka/server.properties
OVERRIDES=$CONF_DIR/override.properties
node_id="${KAFKA_NODE_ID:-1}"
host="${KAFKA_INTERNAL_HOST:-$(hostname)}"

if [ "${KAFKA_WAIT_FOR_OVERRIDES:-0}" = 1 ]; then
  echo "waiting for $OVERRIDES"
  i=0
  while [ ! -f "$OVERRIDES" ]; do
    i=$((i + 1))
    [ "$i" -le 1200 ] || { echo "no $OVERRIDES after 120 s" >&2; exit 1; }
    sleep 0.1
  done
fi

mkdir -p /var/lib/kafka/data
{
  cat "$CONF_DIR/server.properties"
  echo "node.id=$node_id"
  echo "controller.quorum.voters=${KAFKA_CONTROLLER_QUORUM_VOTERS:-$node_id@localhost:9093}"
  echo "listeners=EXTERNAL://0.0.0.0:9092,INTERNAL://0.0.0.0:19092,CONTROLLER://0.0.0.0:9093"
  echo "advertised.listeners=${KAFKA_ADVERTISED_LISTENERS:-EXTERNAL://localhost:9092},INTERNAL://$host:19092"
  echo "log.dirs=/var/lib/kafka/data"
  env | sed -n 's/^KAFKA_CFG_\([A-Z0-9_]*\)=\(.*\)$/\1=\2/p' | while IFS='=' read -r key value; do
    printf '%s=%s\n' "$(echo "$key" | tr 'A-Z_' 'a-z.')" "$value"
  done
  [ ! -f "$OVERRIDES" ] || cat "$OVERRIDES"
} >"$CONF"
[ "${KAFKA_WAIT_FOR_OVERRIDES:-0}" != 1 ] || rm -f "$OVERRIDES"

java_cmd="java -cp /opt/kafka/libs/* -Dlog4j2.configurationFile=$CONF_DIR/log4j2.properties"
feature_args=""
for pair in $(echo "${KAFKA_FORMAT_FEATURES:-}" | tr ',' ' '); do
  feature_args="$feature_args --feature $pair"
done
# shellcheck disable=SC2086
$java_cmd kafka.tools.StorageTool format --ignore-formatted \
  -t "${KAFKA_CLUSTER_ID:-a2Fma2EtZW9zLWNsdXN0ZQ}" -c "$CONF" $feature_args
# shellcheck disable=SC2086
exec $java_cmd ${KAFKA_HEAP_OPTS:--Xmx512m -Xms128m} kafka.Kafka "$CONF"
