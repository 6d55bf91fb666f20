#!/usr/bin/env bash
# Install the pinned npm packages of every package-lock.json in the checkout (SDK builds,
# the MCP and E2B clients, the browser driver) into node_modules beside it — only where
# the lock file changed since the last install, so the common case costs a hash per file.
#
# Run by `make test` after scripts/deps.sh (which brings node and npm), and by `make build`
# for the console.
set -euo pipefail
cd "$(dirname "$0")/.."
# With directories as arguments (make build: the console's), only theirs.
locks() {
	if (($#)); then printf '%s/package-lock.json\0' "$@"; else git ls-files -z '*package-lock.json' 2>/dev/null; fi
}
locks "$@" | while IFS= read -r -d '' lock; do
	case "$lock" in */node_modules/*) continue ;; esac
	dir=$(dirname "$lock")
	stamp="$dir/node_modules/.sbx-lock.sha256"
	want=$(sha256sum "$lock" | cut -d' ' -f1)
	if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
		continue
	fi
	echo "npm-deps: installing $dir" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
done
