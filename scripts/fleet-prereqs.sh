#!/usr/bin/env bash
# The fleet tier's Debian packages: the Docker engine (docker.io), debootstrap (the local base
# image) and Prometheus (promtool and the server for the monitoring test). Installs only what is
# missing, so a second run does nothing. Without root it says what to install and goes on: the
# fleet tier then fails with the same message, it is never skipped.
set -euo pipefail
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v promtool >/dev/null || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "fleet tier: install ${missing[*]} (apt-get install -y ${missing[*]}) as root" >&2
    exit 0
fi
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
