#!/bin/sh
# Installs the Debian packages est needs to build and test, when any is missing.
# As root it runs apt-get; otherwise it prints the exact command and stops.
# Only Debian's own packages: nothing is downloaded from anywhere else.
set -eu

PKGS="build-essential cmake pkg-config libopenblas-dev zlib1g-dev libsnappy-dev \
libjansson-dev libutf8proc-dev libpcre2-dev libcmocka-dev openmpi-bin libopenmpi-dev libmicrohttpd-dev"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

echo "est: installing Debian packages:$missing"
if [ "$(id -u)" != 0 ]; then
  echo "est: not root; run this first:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
