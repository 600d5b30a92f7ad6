#!/usr/bin/env bash
# Installs the Debian 12 packages Crux needs to build and test, if any is missing.
# Idempotent and non-interactive; used by ./run.sh and ./test.sh. Needs root (or sudo) only when
# something is missing.
set -euo pipefail

CRUX_DEB_PACKAGES=(
  g++ cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  clang-format
  clang libclang-rt-14-dev
  libzmq3-dev cppzmq-dev libsodium-dev libprotobuf-dev protobuf-compiler libsqlite3-dev
  libboost-dev libsystemd-dev prometheus-cpp-dev prometheus
  gnuplot-nox
  libhiredis-dev redis-server libjemalloc-dev
  libcurl4-openssl-dev etcd-server etcd-client openssl
  pybind11-dev python3-dev python3-torch python3-pytest libibverbs-dev
  dpkg-dev file time
)

missing=()
for p in "${CRUX_DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "crux: installing missing Debian packages: ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "crux: need root to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
