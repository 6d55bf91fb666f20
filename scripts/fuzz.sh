#!/bin/sh
# Build every libFuzzer target in tests/fuzz/ with ASan + UBSan into build-fuzz/ (the smoke
# run's into build-fuzz/smoke-build/, at -O0) and run each for a bounded time over its
# committed corpus (docs/fuzzing.md).
#
#   scripts/fuzz.sh [seconds per target]          default 30 (make fuzz)
#   scripts/fuzz.sh --smoke [seconds per target]  default 3, TAP output (make test)
#   scripts/fuzz.sh --build                       build only
#   FUZZ_TARGETS="fuzz_sni fuzz_ws" scripts/fuzz.sh ...   some targets only
#
# Seeds and kept regression inputs are in tests/fuzz/corpus/<target>/ and only read; new
# finds go to build-fuzz/corpus/<target>/ (to build-fuzz/smoke/, dropped, for --smoke),
# crashes to build-fuzz/crashes/<target>/. A crash, once fixed, is committed to the
# target's corpus so every later run replays it.
set -eu
cd "$(dirname "$0")/.."
mode=long
case "${1:-}" in
--smoke) mode=smoke; shift; secs=${1:-3} ;;
--build) mode=build ;;
*) secs=${1:-30} ;;
esac
out=build-fuzz
# Where the modules, archives and targets are built: the smoke run's in a directory of its
# own at -O0. A clean build is mostly the daemon's modules (over 200, ASan + UBSan +
# coverage), which clang compiles in about two thirds of the CPU time at -O0 (make test builds
# them from a clean clone in CI); a smoke run's few seconds of a target execute about as many
# inputs either way, as the fuzzer's own work dominates. Long runs keep -O1.
bin=$out
opt=-O1
if [ "$mode" = smoke ]; then
    bin=$out/smoke-build
    opt=-O0
fi
CC=${FUZZ_CC:-clang}
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# The targets themselves are held to the project's warnings; the daemon's modules are
# already (by gcc), so clang's own opinions about them are not errors here.
TCFLAGS="-std=gnu17 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
LIBS=$(make -s --no-print-directory print-libs)
INCS=$(make -s --no-print-directory print-cflags)
targets=${FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')}

mkdir -p "$bin"
# The daemon's modules and libsbx, instrumented, as archives: make rebuilds what changed.
if ! CFLAGS="$opt -g -w" make -s -j2 BUILD=$bin CC="$CC" SAN="$SAN" \
    $bin/libsbxd.a $bin/libsbx.a >"$bin/build.log" 2>&1; then
    cat "$bin/build.log" >&2
    exit 1
fi
for t in $targets; do
    if [ "$bin/$t" -nt "tests/fuzz/$t.c" ] && [ "$bin/$t" -nt tests/fuzz/fuzz.h ] &&
        [ "$bin/$t" -nt $bin/libsbxd.a ] && [ "$bin/$t" -nt $bin/libsbx.a ]; then
        continue
    fi
    # shellcheck disable=SC2086
    $CC $TCFLAGS $INCS -o "$bin/$t" "tests/fuzz/$t.c" $bin/libsbxd.a $bin/libsbx.a $LIBS
done
[ "$mode" = build ] && exit 0

# Reports on stderr, never in a log file a test harness may have configured.
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run() { # target finds-dir
    mkdir -p "$2" "$out/crashes/$1"
    "$bin/$1" -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/crashes/$1/" "$2" "tests/fuzz/corpus/$1"
}
if [ "$mode" = long ]; then
    for t in $targets; do
        echo "fuzzing $t for ${secs}s"
        run "$t" "$out/corpus/$t"
    done
    exit 0
fi

# --smoke: every input of the corpus replayed, then a few seconds of new ones; one TAP
# line per target.
n=0 failed=0
echo "1..$(echo "$targets" | wc -w)"
for t in $targets; do
    n=$((n + 1))
    rm -rf "$out/smoke/$t"
    if run "$t" "$out/smoke/$t" >"$out/smoke-$t.log" 2>&1; then
        echo "ok $n - $t"
    else
        echo "not ok $n - $t"
        tail -n 40 "$out/smoke-$t.log" | sed 's/^/# /'
        failed=1
    fi
    rm -rf "$out/smoke/$t"
done
exit $failed
