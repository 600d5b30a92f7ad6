#!/usr/bin/env bash
# The Debian packages, end to end (issue #17 item 6; run by ctest as packaging_debs):
#   1. cpack -G DEB in the build directory (every component's package);
#   2. unpack them into a temporary root and check what is where;
#   3. build a consumer against the installed client library with find_package (CMake) and with
#      pkg-config, and run both; import the Python module;
#   4. validate the packaged default configs (cruxd --check-config, crux-hostd --check-config) and
#      the installed units (ExecStart names an installed binary; systemd-analyze verify).
# Usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crux_packages.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cpack"
(cd "$tmp" && cpack --config "$build/CPackConfig.cmake" -B "$tmp/debs" >"$tmp/cpack.log" 2>&1) ||
  { tail -30 "$tmp/cpack.log"; fail "cpack failed"; }
packages=(cruxd crux-switch-agent crux-hostd crux-nccl libcrux-client0 libcrux-client-dev
          python3-crux)
mkdir "$tmp/root"
for p in "${packages[@]}"; do
  deb=$(ls "$tmp"/debs/${p}_*.deb 2>/dev/null | head -1)
  [[ -n $deb ]] || fail "package $p was not built (cpack log: $tmp/cpack.log)"
  [[ $(dpkg-deb -f "$deb" Package) == "$p" ]] || fail "$deb: wrong Package field"
  dpkg-deb -x "$deb" "$tmp/root"
  echo "   $p: $(dpkg-deb -f "$deb" Version), depends: $(dpkg-deb -f "$deb" Depends)"
done
root=$tmp/root
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libdir=$root/usr/lib/$arch

step "installed files"
for f in usr/bin/cruxd usr/bin/cruxctl usr/bin/crux-switch-agent usr/bin/crux-hostd \
         etc/cruxd/cruxd.yaml etc/crux/hostd.yaml \
         usr/lib/$arch/crux/libnccl-profiler-crux.so usr/lib/$arch/crux/libcrux-verbs-shim.so \
         usr/lib/$arch/libcrux_client.so.0 usr/lib/$arch/libcrux_client.so \
         usr/include/crux/client/client.h usr/include/crux/core/base/status.h \
         usr/lib/$arch/cmake/crux/cruxConfig.cmake usr/lib/$arch/pkgconfig/crux-client.pc \
         usr/lib/python3/dist-packages/crux/__init__.py \
         usr/share/crux/grafana/crux-overview.json usr/share/crux/prometheus/crux-rules.yml; do
  [[ -e $root/$f ]] || fail "$f missing"
done
nm -D --defined-only "$root/usr/lib/$arch/crux/libnccl-profiler-crux.so" | grep -q ncclProfiler_v6 ||
  fail "the packaged plugin does not export ncclProfiler_v6"
grep -q "NCCL_PROFILER_PLUGIN=/usr/lib/$arch/crux/libnccl-profiler-crux.so" \
  "$root"/usr/share/doc/crux-nccl/nccl.conf.example || fail "nccl.conf.example paths"

step "consumer via find_package(crux)"
cmake -S "$src/tests/packaging/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "configure"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "build"; }
LD_LIBRARY_PATH=$libdir "$tmp/consumer/crux_consumer" | tee "$tmp/run1.log"
grep -q "consumer ok" "$tmp/run1.log" || fail "consumer (CMake) did not run"

step "consumer via pkg-config"
flags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
        pkg-config --cflags --libs crux-client)
echo "   pkg-config: $flags"
# shellcheck disable=SC2086
g++ -std=c++17 "$src/tests/packaging/consumer/main.cc" -o "$tmp/consumer_pc" $flags
LD_LIBRARY_PATH=$libdir "$tmp/consumer_pc" | grep -q "consumer ok" || fail "consumer (pkg-config)"

step "python3-crux"
/usr/bin/python3 - "$root/usr/lib/python3/dist-packages" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import crux
assert crux.__file__.startswith(sys.argv[1]), crux.__file__
try:
    crux.Client("tcp://127.0.0.1:1", "", ["host0"])
    raise SystemExit("an empty job id was accepted")
except ValueError as e:
    assert "job_id" in str(e), e
print("   import crux from the package: ok")
PY

step "packaged configs"
"$root/usr/bin/cruxd" --check-config --config "$root/etc/cruxd/cruxd.yaml" >/dev/null ||
  fail "the packaged /etc/cruxd/cruxd.yaml does not validate"
"$root/usr/bin/crux-hostd" --check-config --config "$root/etc/crux/hostd.yaml" >/dev/null ||
  fail "the packaged /etc/crux/hostd.yaml does not validate"

step "units"
for unit in cruxd crux-switch-agent crux-hostd; do
  file=$root/usr/lib/systemd/system/$unit.service
  [[ -f $file ]] || fail "$unit.service not installed"
  exec=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$file")
  [[ $exec == /usr/bin/* && -x $root$exec ]] || fail "$unit.service: ExecStart $exec is not an installed binary"
  doc=$(sed -n 's|^Documentation=file://\(.*\)|\1|p' "$file")
  [[ -z $doc || -f $root$doc ]] || fail "$unit.service: Documentation $doc is not installed"
  if [[ -x /usr/bin/systemd-analyze ]]; then
    mkdir -p "$tmp/verify"
    sed "s|^ExecStart=/usr/bin/|ExecStart=$root/usr/bin/|" "$file" >"$tmp/verify/$unit.service"
    out=$(/usr/bin/systemd-analyze verify "$tmp/verify/$unit.service" 2>&1) ||
      { echo "$out"; fail "systemd-analyze verify $unit.service"; }
    if grep -q "$unit.service" <<<"$out"; then echo "$out"; fail "systemd-analyze: $unit.service"; fi
    echo "   $unit.service: ExecStart $exec, systemd-analyze verify ok"
  fi
done
echo "packages ok"
