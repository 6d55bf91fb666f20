#!/usr/bin/env bash
# Install the Debian packages sbx needs to build, run and test — only the missing ones.
#
# Run by `make deps`, `make run`, `make test` (and so by CI on every run), so the common case,
# "everything is already there", must cost one dpkg-query and nothing else: no `apt-get update`,
# no network. Machines are handed over fresh at times, so this file, not a human, is the record
# of what the project needs.
set -euo pipefail

# One package per line; a comment says what needs it. Keep it sorted by purpose, not name.
PACKAGES=(
	# toolchain: gcc builds everything; clang + compiler-rt for the fuzz build; clang-format for `make format`
	gcc make pkg-config libc6-dev clang libclang-rt-14-dev clang-format
	# daemon libraries (HTTP/SSE, WebSocket frames, JSON, store, crypto, MIME, syscall filter, AV scan)
	libmicrohttpd-dev libwslay-dev libjansson-dev libsqlite3-dev libssl-dev libmagic-dev
	libseccomp-dev libclamav-dev
	# egress proxy: the client's CONNECT / plain-HTTP request head
	libhttp-parser-dev
	# skills: bundles read with libarchive, SKILL.md front matter with libyaml
	libarchive-dev libyaml-dev
	# llm_query: sbxd calls the operator's OpenAI-compatible endpoint
	libcurl4-openssl-dev
	# runtimes: gVisor (default backend, at least RUNSC_MIN below); bubblewrap, the namespaces
	# backend's bench baseline
	runsc bubblewrap
	# the docker backend's tests start a private dockerd (tests/e2e/test_docker.py)
	docker.io
	# templates: debootstrap builds root filesystems; the keyring verifies the archive
	debootstrap debian-archive-keyring
	# tests and tooling: Python's and Node's stdlib test clients, network namespaces, PDF checks,
	# a static shell for minimal test roots, TLS material
	python3 nodejs iproute2 poppler-utils busybox-static ca-certificates openssl
	# used by the scripts themselves (flock, sha256sum, du)
	util-linux coreutils
	# make bench: curl is the transfers' client, file the cold artifacts' typing floor
	curl file
	# browser tests: Debian's Chromium, driven headless by playwright-core (tests/browser)
	chromium
	# the metrics test parses /metrics with a real Prometheus text parser (run by /usr/bin/python3)
	python3-prometheus-client
	# the PostgreSQL store (docs/scale-out.md): libpq for sbxd, the server for the tests
	# (scripts/pg.sh starts a throwaway one)
	libpq-dev postgresql
	# xxd embeds the Python kernel (kernel/*.py) into the static agent at build time
	xxd
	# OpenAPI: scripts/openapi.py merges docs/openapi/*.yaml (and the build embeds it as JSON);
	# the Python SDK (sdk/python) runs on httpx (wsproto for the terminal) and is tested with
	# pytest, its answers checked against the OpenAPI schemas with jsonschema
	python3-yaml python3-httpx python3-wsproto python3-pytest python3-jsonschema
	# and is installed by Debian's pip into a throw-away venv, built offline with setuptools
	python3-pip python3-venv python3-setuptools
)

# runsc resumes a sandbox in place after `checkpoint --leave-running` from this release on, so
# a fork keeps its parent running instead of restoring it (docs/snapshots.md). Bookworm has it
# in bookworm-backports only (its own runsc is 0.0~20221219).
RUNSC_MIN=0.0~20240729

# dpkg-query prints one status line per package; a package dpkg has never heard of makes it
# print an error on stderr and still report the others, so collect "name status version"
# lines and treat anything not "install ok installed" as missing.
missing=()
status=$(dpkg-query -W -f='${Package} ${Status} ${Version}\n' "${PACKAGES[@]}" 2>/dev/null || true)
for p in "${PACKAGES[@]}"; do
	if ! grep -q "^$p install ok installed " <<<"$status"; then
		missing+=("$p")
	fi
done
runsc_version=$(awk '$1 == "runsc" && $4 == "installed" { print $5 }' <<<"$status")
old_runsc=0
if [[ -z $runsc_version ]] || dpkg --compare-versions "$runsc_version" lt "$RUNSC_MIN"; then
	old_runsc=1
	for i in "${!missing[@]}"; do
		[[ ${missing[i]} != runsc ]] || unset 'missing[i]'
	done
fi

if ((${#missing[@]} == 0 && old_runsc == 0)); then
	exit 0
fi

if ((old_runsc)); then
	echo "deps: installing runsc $RUNSC_MIN or newer (have: ${runsc_version:-none})" >&2
fi
if ((${#missing[@]})); then
	echo "deps: installing ${missing[*]}" >&2
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "deps: need root to install packages (run as root or install them by hand)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Other sessions on the same machine may be running apt at the same moment: wait for dpkg's lock
# instead of failing.
APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
# The release's backports suite, for runsc: apt pins backports low (priority 100), so nothing
# else comes from it unless asked for with -t.
. /etc/os-release
backports="${VERSION_CODENAME:-bookworm}-backports"
if [[ $VERSION_CODENAME == bookworm ]] && ! grep -rqs -- "$backports" /etc/apt/sources.list \
	/etc/apt/sources.list.d/; then
	echo "deb http://deb.debian.org/debian $backports main" >/etc/apt/sources.list.d/sbx-backports.list
fi
"${APT[@]}" update
# --no-install-recommends keeps the host lean; every package we rely on is listed above.
if ((${#missing[@]})); then
	"${APT[@]}" install --no-install-recommends "${missing[@]}"
fi
if ((old_runsc)); then
	"${APT[@]}" install --no-install-recommends -t "$backports" runsc
	runsc --version >&2
fi
