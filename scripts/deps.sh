#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages strobe needs to build, test and benchmark, and only those that are
# missing, so `make demo` and `make check` work on a fresh Debian 12 machine run as root.
# Usage: scripts/deps.sh [build|check|bench]   (each level includes the ones before it)
set -euo pipefail
level=${1:-build}

build_pkgs=(make gcc pkg-config zlib1g-dev libprotobuf-c-dev protobuf-c-compiler libjansson-dev
            libdw-dev libelf-dev libmicrohttpd-dev libgnutls28-dev libsqlite3-dev libzstd-dev libcurl4-openssl-dev libdeflate-dev
            libcurl3-gnutls libdebuginfod1 libiberty-dev clang libbpf-dev bpftool) # clang + bpftool: the agent's eBPF program and its skeleton
# libiberty-dev: binutils' C++ and Rust demangler (symbolize/demangle.c), linked statically
# libcurl3-gnutls: the libcurl the HTTP clients load (net/curl_lazy.c), on the GnuTLS strobe links
# libdebuginfod1: the server's debuginfod client, loaded when --debuginfod is given (net/debuginfod_lazy.c)
check_pkgs=(g++ clang libclang-rt-14-dev libcmocka-dev golang-go perl libxml2-utils time linux-perf debuginfod llvm bolt-16
            chromium firefox-esr gnutls-bin openjdk-17-jdk-headless protobuf-compiler python3 python3-dev
            jq sqlite3 clickhouse-server zookeeperd) # jq, sqlite3: tests/e2e/server_spans.sh (range JSON; a database from before the span index)
# llvm, bolt-16: llvm-profdata and llvm-bolt, which tests/e2e/pgo.sh feeds strobe's PGO exports to
# clickhouse-server: the ClickHouse store backend's tests and benchmark (tests/e2e/server_clickhouse.sh, bench/clickhouse.sh)
# zookeeperd: ZooKeeper 3.8 for the replicated ClickHouse store test (tests/e2e/server_clickhouse_replicas.sh runs
#   its jar with java itself, on a loopback port; the system service is not used)
# python3: JSON and byte checks in the Connect e2e tests (server_connect, server_doors); no PyPI modules
# jq: reads the JSON of /api/v1/cost and /api/v1/leaks in tests/e2e/server_cost.sh and server_leaks.sh
# python3-dev (libpython3.11-dev): Python.h for agent_python/mixed's C extension, and the CPython headers
#   test_python_offsets checks agent/python_offsets.c against; python3 also runs agent_python's workloads
# openjdk-17-jdk-headless: java, javac and jfr for tests/e2e/jfr_truth.sh (real JFR recordings)
# protobuf-compiler: protoc --encode/--decode, an encoder independent of ours (wire conformance
# of Connect and OTLP, jfr_truth's labels part, server_symbolize's fresh profile)
# g++: tests/workloads/cxx/*.cc (libstrobe-heap.so's C++ safety workload, the naming tests)
# debuginfod: elfutils' debuginfod-find, the client tests/e2e/server_debuginfo.sh checks the server's /buildid/ with
# gnutls-bin: certtool, which tests/e2e/server_tls.sh makes its throwaway CA and certificates with
# (libgnutls28-dev: the server checks its certificate and key with GnuTLS, libmicrohttpd serves them)
# chromium and firefox-esr: the web UI's browser tests and benchmark (chromium driven by
# playwright-core, firefox over WebDriver BiDi by puppeteer-core: playwright drives only its own
# patched Firefox builds); node and npm for the browser tests (jsdom, playwright-core and
# puppeteer-core from the npm registry, into node_modules/)
command -v node >/dev/null && command -v npm >/dev/null || check_pkgs+=(nodejs npm)
bench_pkgs=(heaptrack libjemalloc2 valgrind autofdo bpfcc-tools bpftrace) # bench/heap.sh's peers (valgrind: its instruction counts); autofdo: create_llvm_prof, bench/pgo.sh's peer; bpfcc-tools (profile-bpfcc, offcputime-bpfcc) and bpftrace: bench/oncpu.sh's in-kernel aggregating peers

want=("${build_pkgs[@]}")
case "$level" in
  build) ;;
  check) want+=("${check_pkgs[@]}") ;;
  bench) want+=("${check_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "deps.sh: unknown level '$level' (build, check or bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
npm_deps() { # the npm packages of package.json, once
  [ "$level" = build ] && return 0
  [ -d node_modules/jsdom ] && [ -d node_modules/playwright-core ] && [ -d node_modules/puppeteer-core ] && return 0
  echo "deps.sh: npm install (jsdom, playwright-core, puppeteer-core: the browser tests)" >&2
  npm install --no-audit --no-fund --loglevel=error >/dev/null
}
cd "$(dirname "$0")/.."
if [ ${#missing[@]} -eq 0 ]; then npm_deps; exit 0; fi

if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing packages: ${missing[*]}; run as root or install them with apt-get" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
