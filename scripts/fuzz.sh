#!/bin/sh
# Build every libFuzzer target in tests/fuzz/ with ASan + UBSan into build-fuzz/ and run
# each for a bounded time.
#
#   scripts/fuzz.sh [seconds per target]     default 30
#
# Crashes go to build-fuzz/crashes/<target>/; corpora persist in build-fuzz/corpus/<target>/.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-30}
out=build-fuzz
CC=${FUZZ_CC:-clang}
CFLAGS="-std=gnu17 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# The daemon's own library list, so targets that link daemon modules never fall behind it.
LIBS=$(make -s --no-print-directory print-libs)
INCS=$(make -s --no-print-directory print-cflags)

# The daemon's modules without its main, for targets that test daemon code.
daemon_srcs=$(ls src/daemon/*.c src/daemon/*/*.c src/runtime/*.c src/common/*.c src/proto/*.c |
    grep -v -e '^src/daemon/main.c$' -e '^src/runtime/shim.c$')

build() { # target sources...
    t=$1
    shift
    mkdir -p "$out/corpus/$t" "$out/crashes/$t"
    # shellcheck disable=SC2086
    $CC $CFLAGS $INCS -o "$out/$t" "tests/fuzz/$t.c" "$@" $LIBS
}

build fuzz_proto src/proto/proto.c src/common/util.c
# shellcheck disable=SC2086
build fuzz_requests $daemon_srcs
build fuzz_sni src/daemon/egress/sni.c
# shellcheck disable=SC2086
build fuzz_skill_md $daemon_srcs

# A few well-formed seeds for each corpus.
python3 - "$out/corpus" <<'PY'
import os, struct, sys
root = sys.argv[1]
def fr(stream, typ, flags, payload):
    return struct.pack(">IIBBH", len(payload), stream, typ, flags, 0) + payload
seeds = {
  "fuzz_proto": {
    "hello": b"\x01\x02\x03\x04" + fr(0, 1, 0, b'{"version":1,"role":"daemon"}'),
    "open": b"\x01\x02\x03\x04" + fr(1, 2, 0, b'{"op":"exec","argv":["/bin/sh","-c","echo hi"]}') + fr(1, 5, 1, b"\0\1\0\0"),
    "mixed": b"\x01\x02\x03\x04" + fr(1, 3, 0, b"x" * 300) + fr(1, 4, 0, b"") + fr(0, 9, 0, b"ping") + fr(3, 8, 0, b'{"signal":9}'),
    "partial": b"\x01\x02\x03\x04" + fr(5, 3, 1, b"y" * 1000)[:500],
    "bad": b"\x01\x02\x03\x04" + fr(0, 9, 0, b"ok") + struct.pack(">IIBBH", 0, 0, 11, 0, 0),
  },
  "fuzz_requests": {
    "shell": b'{"shell":"echo hi","timeout_seconds":5,"cwd":"/workspace","env":{"A":"b"}}',
    "code": b'{"language":"python","code":"print(1)","ttl_seconds":60,"template":"base"}',
    "bad": b'{"shell":1,"ttl_seconds":0,"env":{"SBX_X":"1"},"backend":"v1"}',
  },
  "fuzz_skill_md": {
    "ok": b"---\nname: docx\ndescription: Word\nversion: 1.0\nenvs:\n  - A\n  - {name: B, required: true}\n---\n# docx\n",
    "bad": b"---\nname: [\n---\n",
  },
  "fuzz_sni": {
    # A TLS 1.2 ClientHello naming pypi.org, and one without extensions.
    "hello": bytes.fromhex("160301003c010000380303" + "11" * 32 + "000002130101000011"
                           "0000000d000b000008707970692e6f7267"),
    "noext": bytes.fromhex("160301002f0100002b0303" + "11" * 32 + "00000213010100"),
  },
}
for target, files in seeds.items():
    d = os.path.join(root, target)
    if os.listdir(d):
        continue
    for name, body in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(body)
PY

for t in fuzz_proto fuzz_requests fuzz_sni fuzz_skill_md; do
    echo "fuzzing $t for ${secs}s"
    "$out/$t" -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/crashes/$t/" "$out/corpus/$t"
done
