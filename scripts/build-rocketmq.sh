#!/usr/bin/env bash
# Build rocketmq-store-server, the protocol driver around the real Apache RocketMQ message
# store (impl/external/rocketmq_store/, README.md there). Idempotent: when nothing changed
# since the last build it says "up to date" and touches neither Maven nor the network.
#
# Needs Java >= 17 and Maven (3.8 here). When one is missing it prints ONE line naming what
# to install and exits 2.
#
# Fetches, through Maven, into Maven's own local repository (~/.m2, outside this repository):
# org.apache.rocketmq:rocketmq-store at the version pinned in the driver's pom.xml, its
# dependencies, and the pinned Maven plugins. It prints each artifact it downloads. Nothing
# of RocketMQ enters the repository. Writes, all under the driver's git-ignored target/:
#   rmqsim-rocketmq-store.jar  the driver's classes
#   classpath.txt              the runtime classpath (jars in ~/.m2)
#   native/librocksdbjni-linux64.so  RocksDB's JNI library, taken out of the rocksdbjni jar
#                              once (RocketMQ loads RocksDB when a store is constructed;
#                              without it each process would unpack 13 MB into /tmp)
#   app.jsa                    a class-data-sharing archive from one training session
#                              (halves the JVM's start; the launcher skips it if absent)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
drv="$root/impl/external/rocketmq_store"
target="$drv/target"

need() { echo "build-rocketmq: $*" >&2; exit 2; }

# --- tools --------------------------------------------------------------------------------
java="${JAVA:-java}"
command -v "$java" >/dev/null 2>&1 \
    || need "Java is missing: install a JDK >= 17 (apt-get install openjdk-17-jdk-headless)"
java_major="$("$java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p')"
[ -n "$java_major" ] && [ "$java_major" -ge 17 ] \
    || need "Java ${java_major:-?} is too old: install a JDK >= 17 (RocketMQ 5.5 and the driver need it)"
command -v mvn >/dev/null 2>&1 || need "Maven is missing: install it (apt-get install maven)"
command -v unzip >/dev/null 2>&1 || need "unzip is missing: install it (apt-get install unzip)"

# --- up to date? --------------------------------------------------------------------------
jar="$target/rmqsim-rocketmq-store.jar"
native="$target/native/librocksdbjni-linux64.so"
up_to_date() {
    [ -f "$jar" ] && [ -f "$target/classpath.txt" ] && [ -f "$native" ] || return 1
    [ "$target/app.jsa" -nt "$jar" ] || return 1 # a jar rebuilt by hand: a new archive
    [ -z "$(find "$drv/pom.xml" "$drv/src" -newer "$jar" -print -quit)" ] || return 1
    local entry
    while IFS= read -r entry; do [ -f "$entry" ] || return 1; done \
        < <(tr ':' '\n' < "$target/classpath.txt")
}
if up_to_date; then
    echo "build-rocketmq: up to date ($jar)" >&2
    exit 0
fi

# --- Maven --------------------------------------------------------------------------------
start=$(date +%s)
cd "$drv"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# Offline first (everything may be in ~/.m2 already), then online, printing each download.
if ! mvn -B -o -q package >"$log" 2>&1; then
    echo "build-rocketmq: fetching what ~/.m2 lacks (Maven Central, pinned versions)" >&2
    if ! mvn -B package >"$log" 2>&1; then
        grep -E '^\[ERROR\]' "$log" | head -20 >&2
        need "mvn package failed (the lines above are Maven's errors)"
    fi
    sed -n 's|^\[INFO\] Downloaded from [^:]*: [a-z]*://[^/]*/[^ ]*maven2/\([^ ]*\) (\(.*\))$|build-rocketmq: fetched \1 (\2)|p' \
        "$log" | grep -v '\.pom (' >&2 || true
    echo "build-rocketmq: $(grep -c '^\[INFO\] Downloaded from' "$log" || true) files downloaded (poms included)" >&2
fi

# --- RocksDB's JNI library, once ----------------------------------------------------------
rocksdbjni="$(tr ':' '\n' < "$target/classpath.txt" | grep '/rocksdbjni-[^/]*\.jar$' | head -n1)"
[ -n "$rocksdbjni" ] || need "no rocksdbjni jar on RocketMQ's classpath (target/classpath.txt)"
mkdir -p "$target/native"
unzip -p "$rocksdbjni" librocksdbjni-linux64.so > "$native.tmp"
mv "$native.tmp" "$native"

# --- class-data sharing: one training session -----------------------------------------------
rm -f "$target/app.jsa"
scratch="$(mktemp -d)"
b="aGVsbG8="
printf '%s\n' \
    '{"id":1,"op":"hello","now":0,"wait_at_points":false,"protocol":1,"layer":"store"}' \
    "{\"id\":2,\"op\":\"open\",\"now\":0,\"wait_at_points\":false,\"path\":\"$scratch/s\",\"config\":{\"flush\":\"sync\",\"segment_bytes\":4096,\"max_body_bytes\":1024}}" \
    "{\"id\":3,\"op\":\"put\",\"now\":1,\"wait_at_points\":false,\"topic\":\"t\",\"queue\":0,\"bodies\":[\"$b\"]}" \
    "{\"id\":4,\"op\":\"put\",\"now\":2,\"wait_at_points\":false,\"topic\":\"t\",\"queue\":0,\"bodies\":[\"$b\",\"$b\"]}" \
    '{"id":5,"op":"get","now":2,"wait_at_points":false,"topic":"t","queue":0,"offset":0,"max_count":5}' \
    '{"id":6,"op":"offsets","now":2,"wait_at_points":false,"topic":"t","queue":0}' \
    '{"id":7,"op":"flush","now":2,"wait_at_points":false}' \
    '{"id":8,"op":"retain","now":2,"wait_at_points":false,"cutoff":2}' \
    '{"id":9,"op":"close","now":2,"wait_at_points":false}' \
    | RMQSIM_JAVA_OPTS="-XX:ArchiveClassesAtExit=$target/app.jsa" \
        "$drv/rocketmq-store-server" >"$scratch/out" 2>"$scratch/err" || true
if [ "$(grep -c '"ok"' "$scratch/out" || true)" != 9 ]; then
    tail -5 "$scratch/err" >&2
    rm -rf "$scratch"
    need "the driver's training session failed (its stderr above)"
fi
rm -rf "$scratch"
[ -f "$target/app.jsa" ] || echo "build-rocketmq: no class-data archive written (the JVM starts slower)" >&2
version="$(sed -n 's|.*<rocketmq.version>\(.*\)</rocketmq.version>.*|\1|p' "$drv/pom.xml")"
echo "build-rocketmq: built $drv/rocketmq-store-server (rocketmq-store $version) in $(( $(date +%s) - start ))s" >&2
