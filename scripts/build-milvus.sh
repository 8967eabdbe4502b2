#!/usr/bin/env bash
# Build rmqsim-milvus, the protocol driver around the real Milvus RocksMQ
# (impl/external/milvus_rocksmq/, README.md there), into
# impl/external/milvus_rocksmq/bin/rmqsim-milvus. Idempotent: a second run with nothing
# changed downloads nothing and relinks nothing (a few seconds).
#
# Needs Go >= the version Milvus's pkg/v2 module declares, a C compiler, and Python's pip.
# When one is missing it prints ONE line naming what to install and exits 2.
#
# Fetches (into ${XDG_CACHE_HOME:-~/.cache}/rmqsim, outside the repository, and says so):
#   - the PyPI wheel aimrocks==0.5.2 (hash-pinned below), for RocksDB 6.29.5's librocksdb.so
#     and its C headers (Milvus pins RocksDB 6.29.5; its binding does not build on 7.x);
#   - the Go modules pinned by impl/external/milvus_rocksmq/go.sum, through the Go module proxy
#     into Go's own module cache.
# Nothing of Milvus or RocksDB enters the repository. The binary's rpath points at the cached
# librocksdb.so, so the binary runs on this machine (rebuild after the cache is removed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
drv="$root/impl/external/milvus_rocksmq"

aimrocks_version="0.5.2"
aimrocks_sha256="762f7b41793165717a9e0589658cd81bffb54161295ec7403534d40692ac9281"
aimrocks_wheel="aimrocks-0.5.2-cp311-cp311-manylinux_2_24_x86_64.whl"

need() { echo "build-milvus: $*" >&2; exit 2; }

# --- tools --------------------------------------------------------------------------------
command -v go >/dev/null 2>&1 \
    || need "Go is missing: install Go >= 1.24.9 (Debian 12's golang-go, 1.19, is too old)"
go_min="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$drv/go.mod")"
go_have="$(go env GOVERSION | sed 's/^go//; s/[^0-9.].*$//')"
if [ "$(printf '%s\n%s\n' "$go_min" "$go_have" | sort -V | head -n1)" != "$go_min" ]; then
    need "Go $go_have is too old: install Go >= $go_min (Milvus's pkg/v2 module needs it)"
fi
cc="${CC:-$(go env CC)}"
command -v "$cc" >/dev/null 2>&1 \
    || need "no C compiler ($cc): install gcc and g++ (apt-get install build-essential)"
[ "$(uname -m)" = "x86_64" ] \
    || need "the aimrocks $aimrocks_version wheel (RocksDB 6.29.5) exists for x86_64 Linux only; this is $(uname -m)"
python="${PYTHON:-python3}"
"$python" -m pip --version >/dev/null 2>&1 \
    || need "pip is missing: install python3-pip (it fetches the aimrocks wheel with RocksDB 6.29.5)"

# --- RocksDB 6.29.5 from the aimrocks wheel -------------------------------------------------
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rmqsim"
rocks="$cache/aimrocks-$aimrocks_version"
if [ ! -f "$rocks/lib/librocksdb.so" ] || [ ! -f "$rocks/include/rocksdb/c.h" ]; then
    mkdir -p "$cache/wheels"
    if [ ! -f "$cache/wheels/$aimrocks_wheel" ]; then
        req="$(mktemp)"
        echo "aimrocks==$aimrocks_version --hash=sha256:$aimrocks_sha256" > "$req"
        "$python" -m pip download -q --no-deps --only-binary=:all: --require-hashes \
            --platform manylinux_2_24_x86_64 --python-version 3.11 --implementation cp \
            --abi cp311 -r "$req" -d "$cache/wheels" >&2
        rm -f "$req"
        echo "build-milvus: fetched $aimrocks_wheel from PyPI (aimrocks==$aimrocks_version:" \
            "RocksDB 6.29.5 librocksdb.so and headers) into $cache/wheels" >&2
    fi
    echo "$aimrocks_sha256  $cache/wheels/$aimrocks_wheel" | sha256sum -c --quiet - \
        || need "$cache/wheels/$aimrocks_wheel does not match its pinned sha256: remove it and rerun"
    tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
    "$python" -m zipfile -e "$cache/wheels/$aimrocks_wheel" "$tmp"
    rm -rf "$rocks"
    mkdir -p "$rocks/lib" "$rocks/include"
    mv "$tmp/aimrocks/librocksdb.so" "$rocks/lib/"
    mv "$tmp/aimrocks/include/rocksdb" "$rocks/include/"
    rm -rf "$tmp"
    echo "build-milvus: unpacked librocksdb.so and include/rocksdb into $rocks" >&2
fi

# gorocksdb asks pkg-config for "rocksdb": answer from the cache, so pkg-config itself is not
# needed (the flags are also in CGO_CFLAGS / CGO_LDFLAGS below).
pkgconfig="$rocks/pkg-config"
if [ ! -x "$pkgconfig" ]; then
    cat > "$pkgconfig" <<EOF
#!/bin/sh
# Written by scripts/build-milvus.sh: pkg-config for the one package "rocksdb".
for a in "\$@"; do
    case "\$a" in
        --cflags) echo "-I$rocks/include" ;;
        --libs) echo "-L$rocks/lib -lrocksdb" ;;
        --modversion) echo "6.29.5" ;;
    esac
done
EOF
    chmod +x "$pkgconfig"
fi

# --- the driver ---------------------------------------------------------------------------
cd "$drv"
export GOFLAGS="-buildvcs=false"
export CGO_ENABLED=1
export PKG_CONFIG="$pkgconfig"
export CGO_CFLAGS="-O2 -I$rocks/include"
export CGO_LDFLAGS="-L$rocks/lib -Wl,-rpath,$rocks/lib"

milvus_mod="github.com/milvus-io/milvus/pkg/v2"
milvus_version="$(go list -m -f '{{.Version}}' "$milvus_mod")"
go mod download "$milvus_mod"
milvus_dir="$(go list -m -f '{{.Dir}}' "$milvus_mod")"
[ -n "$milvus_dir" ] && [ -d "$milvus_dir/mq/mqimpl/rocksmq/server" ] \
    || need "the Milvus module has no mq/mqimpl/rocksmq/server package at $milvus_dir"
# `go build -overlay` refuses files beneath the module cache, so the build uses a pristine
# copy of the (checksum-verified) Milvus module outside it, through a workspace file whose
# replace directive points there; the overlay adds the driver's file to that copy's package.
copy="$cache/milvus-pkg-v2@$milvus_version"
if [ ! -f "$copy/.complete" ]; then
    rm -rf "$copy"
    cp -r "$milvus_dir" "$copy.tmp"
    chmod -R u+w "$copy.tmp"
    mv "$copy.tmp" "$copy"
    touch "$copy/.complete"
    echo "build-milvus: copied $milvus_mod@$milvus_version (Go module proxy, verified by go.sum) to $copy" >&2
fi
mkdir -p bin
write_if_changed() { # file content
    if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then printf '%s\n' "$2" > "$1"; fi
}
write_if_changed bin/go.work "go $go_min

use ..

replace $milvus_mod $milvus_version => $copy"
write_if_changed bin/overlay.json "{\"Replace\": {\"$copy/mq/mqimpl/rocksmq/server/zz_rmqsim_access.go\": \"$drv/_overlay/zz_rmqsim_access.go\"}}"
export GOWORK="$drv/bin/go.work"
overlay="bin/overlay.json"

# -gcflags=all=-l: no inlining anywhere, so the run-time patch of time.Now (clock.go) reaches
# every caller.
start=$(date +%s)
go build -overlay "$overlay" -gcflags=all=-l -o bin/rmqsim-milvus .
echo "build-milvus: built $drv/bin/rmqsim-milvus ($(go list -m -f '{{.Path}} {{.Version}}' github.com/milvus-io/milvus/pkg/v2), RocksDB 6.29.5) in $(( $(date +%s) - start ))s" >&2
