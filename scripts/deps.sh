#!/usr/bin/env bash
# Install everything shunt needs to build and test, from Debian 12 packages.
# Idempotent: when every package is already installed it does nothing (no apt
# at all), so reruns are fast.  Run as root (or with sudo available).
#
#   scripts/deps.sh            install what is missing
#   scripts/deps.sh --check    exit 1 and list what is missing, install nothing
set -euo pipefail

PACKAGES=(
	# build
	build-essential cmake pkg-config clang libclang-rt-14-dev
	libfabric-dev libfabric-bin librdmacm-dev libibverbs-dev uthash-dev
	# unit tests
	libcriterion-dev
	# end-to-end tests: real programs and the tools the scripts use
	sockperf iperf3 redis-server redis-tools memcached nginx curl wrk
	hyperfine valgrind python3 iproute2 procps psmisc binutils
	coreutils util-linux findutils grep sed jq strace
	# packaging and deployment tests (tests/deploy): cpack -G DEB, lintian,
	# the manifests' YAML, install-into's RPATH.  Not kubernetes-client:
	# Debian 12's kubectl (1.20, kustomize v2) cannot render kustomize
	# components; tests/deploy/kustomize_render.py uses a newer kubectl
	# when one is installed and its own renderer otherwise.
	dpkg-dev file lintian python3-yaml patchelf
	# reach (issue 32): CPython's own socket tests, io_uring and Go peers,
	# a static C binary
	libpython3.11-testsuite liburing-dev golang-go libc6-dev
	# the eBPF sockmap path (issue 35): clang's BPF target, libbpf, bpftool
	libbpf-dev bpftool
)

missing=()
for p in "${PACKAGES[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ "$st" == installed ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
	echo "deps: all ${#PACKAGES[@]} packages installed"
	exit 0
fi

if [[ "${1:-}" == --check ]]; then
	echo "deps: missing: ${missing[*]}" >&2
	exit 1
fi

echo "deps: installing: ${missing[*]}"
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || { echo "deps: run as root" >&2; exit 1; }
	SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# Keep package installs from starting system services (redis, nginx,
# memcached): the tests start their own instances on their own ports.  A
# policy-rc.d that exits 101 is what Debian's invoke-rc.d honours; only add
# ours if none is there, and remove it afterwards.
policy=/usr/sbin/policy-rc.d
ours=0
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
	"${SUDO[@]}" chmod 755 "$policy"
	ours=1
fi
cleanup() { if [[ $ours -eq 1 ]]; then "${SUDO[@]}" rm -f "$policy"; fi; }
trap cleanup EXIT

apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" \
	--no-install-recommends "${missing[@]}"

# Verify.
still=()
for p in "${missing[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ "$st" == installed ]] || still+=("$p")
done
if [[ ${#still[@]} -ne 0 ]]; then
	echo "deps: failed to install: ${still[*]}" >&2
	exit 1
fi
echo "deps: done"
