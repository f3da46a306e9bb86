#!/usr/bin/env sh
# Installs the programs the test suite runs besides Python, from Debian's packages:
#   prometheus  - promtool and a real Prometheus server (tests/test_prometheus.py,
#                 tests/test_grpc_conventions.py)
#   faketime    - libfaketime, to step a node's wall clock (tests/clock_steps/) and give
#                 a test host a clock of its own (tests/hosts/)
#   iproute2    - ip and tc, for the test hosts in network namespaces (tests/hosts/)
#   nftables    - nft, for the test hosts' lossy links (tests/hosts/)
# Does nothing when all are present. Needs root or sudo for apt-get.
set -eu

missing=""
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    missing="$missing prometheus"
fi
if ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
    missing="$missing faketime"
fi
if ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
    missing="$missing iproute2"
fi
if ! command -v nft >/dev/null 2>&1; then
    missing="$missing nftables"
fi
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    run=""
elif command -v sudo >/dev/null 2>&1; then
    run="sudo"
else
    echo "The tests need Debian packages:$missing. Install them as root" \
         "(apt-get install$missing) and run make test again." >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "The tests need:$missing (no apt-get here: install them with your package manager)." >&2
    exit 1
fi
echo "installing the test tools:$missing"
$run apt-get update -qq
# shellcheck disable=SC2086 - one word per package
DEBIAN_FRONTEND=noninteractive $run apt-get install -y -qq --no-install-recommends $missing >/dev/null
