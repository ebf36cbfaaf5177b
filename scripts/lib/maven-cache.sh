# Sourced by the fetch scripts (docker/kafka/fetch-jars.sh, scripts/*/fetch.sh): a folder under
# .cache/ filled from Maven Central once, and reused as it is once marked complete. Sets `root`
# (the project) and `here` (the fetch script's folder, which holds its pom.xml).

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"

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

# jar_count DIR: how many jars DIR holds.
jar_count() {
  ls "$1" | grep -c '\.jar$'
}

# fetch_dependencies TAG WHAT DEST JAR [MAVEN ARGS...]: the runtime dependencies of the fetch
# script's pom.xml (with the ARGS, such as its version property) into DEST, unless DEST is
# complete; JAR, one of them, must be among what came.
fetch_dependencies() {
  local tag="$1" what="$2" dest="$3" jar="$4"
  shift 4
  cache_open "$tag" "$what" "$dest"
  maven -f "$here/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dest" "$@"
  ls "$dest/$jar" >/dev/null
  cache_close "$tag" "$dest" "$(jar_count "$dest") jars for $what ($(du -sh "$dest" | cut -f1))"
}
