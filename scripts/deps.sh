#!/bin/sh
# Installs the Debian packages a command needs, when run as root; otherwise
# prints the one command that would. Quiet when everything is present.
#
#   scripts/deps.sh run     what building and running needs (make run)
#   scripts/deps.sh [test]  that and what the tests need besides (make test)
#   scripts/deps.sh --list [run|test]   prints the set's packages, installs nothing
set -eu
list=false
if [ "${1:-}" = "--list" ]; then
	list=true
	shift
fi
set_name="${1:-test}"
# Building the daemons, running deploy/daqrun on one host and its report.
# chrony: the daemons read the host's clock state with chronyc.
# libsystemd-dev: sd_notify, the daemons' readiness as Type=notify units.
# libhdf5-dev: the HDF5 output (common/sys/h5writer.c).
run_packages="build-essential pkg-config libevent-dev libmsgpack-dev zlib1g-dev libdeflate-dev
libsodium-dev libjansson-dev libsystemd-dev libhdf5-dev python3 python3-matplotlib chrony"
# What only the tests (and the other backends they drive) use.
# check: the unit tests. python3-numpy: analysis/compare.py.
# iproute2, iputils-ping: the netns backend's virtual cluster.
# openssh-server: the ssh backend's test starts its own sshd on a loopback
# port (tests/e2e/test_deploy_ssh.py); deploy/daqrun never needs a running one.
# chromium: the run report's test renders report.html headless, and the
# console's test (tests/e2e/test_console.py) drives it with playwright-core.
# systemd: systemd-analyze checks the installed units (verify, security).
# prometheus: its promtool checks every daemon's /metrics scrape (Debian
# ships promtool in no smaller package; the server itself is never started).
# python3-h5py, hdf5-tools: the HDF5 files read back and h5dump'ed
# (tests/e2e/test_h5writer.py, analysis/h5events.py).
test_packages="check python3-numpy iproute2 iputils-ping procps openssh-client openssh-server tar
chromium systemd prometheus python3-h5py hdf5-tools"
case "$set_name" in
run) packages="$run_packages" ;;
test) packages="$run_packages $test_packages" ;;
*)
	echo "deps: no set '$set_name' (run or test)" >&2
	exit 2
	;;
esac
# Packages of optional targets, e.g. `make fuzz` sets DEPS_EXTRA="clang libclang-rt-14-dev"
# (the libFuzzer runtime is only a recommendation of clang, and recommendations
# are not installed below). iperf3: analysis/railcap.py, each rail's TCP
# capacity in the virtual cluster, DEPS_EXTRA=iperf3 (its e2e test skips
# without it).
packages="$packages ${DEPS_EXTRA:-}"
# node and npm: make bundles the operator's console (console/, npm ci and
# esbuild); Debian's when the machine has none of its own.
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	packages="$packages nodejs npm"
fi
if $list; then
	# shellcheck disable=SC2086
	printf '%s\n' $packages
	exit 0
fi
missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0
echo "deps: missing Debian packages:$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: run as root, or install them with: sudo apt-get install$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
