#!/bin/sh
# Build the frame-decoder fuzzer (tests/fuzz/fuzz_proto.c) with libFuzzer + ASan + UBSan
# into build-fuzz/ and run it for a bounded time.
#
#   scripts/fuzz.sh [seconds]     default 30
#
# Crashes are written to build-fuzz/crashes/; the corpus persists in build-fuzz/corpus/.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-30}
out=build-fuzz
CC=${FUZZ_CC:-clang}
mkdir -p "$out/corpus" "$out/crashes"

$CC -std=gnu17 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer \
    -o "$out/fuzz_proto" tests/fuzz/fuzz_proto.c src/proto/proto.c src/common/util.c

# A few well-formed seeds: 4 split-seed bytes, then frames.
if [ -z "$(ls -A "$out/corpus")" ]; then
    python3 - "$out/corpus" <<'PY'
import os, struct, sys
d = sys.argv[1]
def fr(stream, typ, flags, payload):
    return struct.pack(">IIBBH", len(payload), stream, typ, flags, 0) + payload
seeds = {
    "hello": fr(0, 1, 0, b'{"version":1,"role":"daemon"}'),
    "open": fr(1, 2, 0, b'{"op":"exec","argv":["/bin/sh","-c","echo hi"]}') + fr(1, 5, 1, b"\0\1\0\0"),
    "mixed": fr(1, 3, 0, b"x" * 300) + fr(1, 4, 0, b"") + fr(0, 9, 0, b"ping") + fr(3, 8, 0, b'{"signal":9}'),
    "partial": fr(5, 3, 1, b"y" * 1000)[:500],
    "bad": fr(0, 9, 0, b"ok") + struct.pack(">IIBBH", 0, 0, 11, 0, 0),
}
for name, body in seeds.items():
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"\x01\x02\x03\x04" + body)
PY
fi

echo "fuzzing proto_decoder for ${secs}s"
"$out/fuzz_proto" -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/crashes/" "$out/corpus"
