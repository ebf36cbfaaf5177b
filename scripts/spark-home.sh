#!/usr/bin/env bash
# A SPARK_HOME for the tests' Spark processes: the venv's pip-installed PySpark, every entry
# linked, except python/lib (pyspark.zip and py4j's zip). Spark puts
# $SPARK_HOME/python/lib/pyspark.zip first on every Python worker's path, and a zip holds no
# cached bytecode: each of the 6 or so Python processes a query starts (a daemon per planning
# step) and each worker forked from them compiles pyspark again, about 0.5 s of CPU each.
# Without the zip they import the same PySpark, and py4j, from the venv's site-packages, where
# bytecode is cached. The oldest-PySpark run keeps the default layout, as users have it.
# Usage: spark-home.sh VENV DEST. Idempotent: DEST is made anew each time.
set -euo pipefail

venv="$1"
dest="$2"
pyspark="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"

rm -rf "$dest"
mkdir -p "$dest/python"
for entry in "$pyspark"/*; do
  [ "$(basename "$entry")" = python ] || ln -s "$entry" "$dest/"
done
ln -s "$pyspark/python/pyspark" "$dest/python/pyspark"
echo "[spark-home] $dest: PySpark $("$venv/bin/python" -c 'import pyspark; print(pyspark.__version__)') without python/lib"
