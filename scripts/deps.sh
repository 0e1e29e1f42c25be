#!/bin/sh
# Installs the Debian packages the project needs, when run as root; otherwise
# prints the one command that would. Quiet when everything is present.
set -eu
packages="build-essential pkg-config libevent-dev libmsgpack-dev check zlib1g-dev libdeflate-dev
libsodium-dev libjansson-dev libsystemd-dev python3 python3-numpy python3-matplotlib chrony iproute2
iputils-ping procps openssh-client openssh-server tar chromium systemd prometheus"
# openssh-server: the ssh backend's test starts its own sshd on a loopback
# port (tests/e2e/test_deploy_ssh.py); deploy/daqrun never needs a running one.
# chromium: the run report's test renders report.html headless.
# libsystemd-dev: sd_notify, the daemons' readiness as Type=notify units.
# systemd: systemd-analyze checks the installed units (verify, security).
# prometheus: its promtool checks every daemon's /metrics scrape (Debian
# ships promtool in no smaller package; the server itself is never started).
# Packages of optional targets, e.g. `make fuzz` sets DEPS_EXTRA="clang libclang-rt-14-dev"
# (the libFuzzer runtime is only a recommendation of clang, and recommendations
# are not installed below). iperf3: analysis/railcap.py, each rail's TCP
# capacity in the virtual cluster, DEPS_EXTRA=iperf3 (its e2e test skips
# without it).
packages="$packages ${DEPS_EXTRA:-}"
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
