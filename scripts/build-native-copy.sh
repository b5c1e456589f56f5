#!/usr/bin/env bash
# Builds a C part against librdkafka: the bench's `native` system (bench/native/copy.c, the default
# SOURCE) into bench/native/build/ferry-native-copy, and the worker's native copy core
# (worker/copying/native/copy_core.c, a shared library: an OUTPUT ending in .so), which a worker uses
# when it is there and copies in Python otherwise. `make setup` runs it.
# Usage: build-native-copy.sh PYTHON OUTPUT [SOURCE]
#
# It links the librdkafka that the confluent-kafka wheel installed into PYTHON's environment (the
# library the Python systems run: the fairest comparison) and compiles against Debian's
# librdkafka-dev headers, installed here when missing (as root; otherwise it says what to install).
set -euo pipefail
python=$1
output=$2
source=${3:-bench/native/copy.c}
header=/usr/include/librdkafka/rdkafka.h
if [ ! -f "$header" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "$source needs $header: as root, apt-get install -y librdkafka-dev" >&2
        exit 1
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends librdkafka-dev
fi
# The wheel's library: confluent_kafka.libs/librdkafka-<hash>.so.1 beside the package.
library=$("$python" - <<'PY'
import pathlib

import confluent_kafka

folder = pathlib.Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
found = sorted(folder.glob("librdkafka*.so*"))
if not found:
    raise SystemExit(f"no librdkafka in {folder}: is confluent-kafka installed from its wheel?")
print(found[0])
PY
)
mkdir -p "$(dirname "$output")"
# A shared library is loaded into the Python process that already runs the wheel's librdkafka: linked by
# the same path, it binds to that one copy of its symbols.
shared=()
case "$output" in *.so) shared=(-shared -fPIC) ;; esac
cc -O2 -Wall -Wextra -Werror -std=gnu11 "${shared[@]}" -o "$output.tmp" "$source" "$library" \
    -Wl,-rpath,"$(dirname "$library")"
mv "$output.tmp" "$output"
