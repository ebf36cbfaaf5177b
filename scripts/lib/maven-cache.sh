# Sourced by the fetch scripts (docker/kafka/fetch-jars.sh, scripts/*/fetch.sh): a folder under
# .cache/ filled from Maven Central once, and reused as it is once marked complete.

# cache_open TAG WHAT DEST: ends the script when DEST is complete; else empties DEST for a fetch.
cache_open() {
  if [ -f "$3/.complete" ]; then
    echo "[$1] $2 cached in $3"
    exit 0
  fi
  echo "[$1] resolving $2 from Maven Central into $3"
  rm -rf "$3"
  mkdir -p "$3"
}

# maven ARGS...: quiet, batch mode. Debian's Maven prints ANSI colour resets even in batch
# mode: keep them off the console. Maven's exit status is the function's (pipefail).
maven() {
  mvn -q -B "$@" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g'
}

# cache_close TAG DEST SUMMARY: marks DEST complete, so the next run reuses it.
cache_close() {
  touch "$2/.complete"
  echo "[$1] $3"
}
