#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests (docs/scale-out.md): Debian's server binaries,
# initdb in a directory of the caller's, listening on 127.0.0.1 only, trust auth.
#
#   scripts/pg.sh start DIR          prints the URL of database "sbx"
#   scripts/pg.sh createdb DIR NAME  prints the URL of a new, empty database NAME
#   scripts/pg.sh stop DIR
#
# PostgreSQL refuses to run as root: as root the server runs as "nobody", and DIR is
# handed to it. Test settings only (fsync off): never a store anyone keeps.
set -euo pipefail

die() { echo "pg.sh: $*" >&2; exit 1; }
(($# >= 2)) || die "usage: pg.sh start|stop DIR | createdb DIR NAME"
cmd=$1 dir=$2
bin=${SBX_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[[ -x $bin/postgres ]] || die "no PostgreSQL server binaries under /usr/lib/postgresql (scripts/deps.sh installs them)"

as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u nobody -- "$@"
	else
		"$@"
	fi
}

url() { echo "postgres://sbx@127.0.0.1:$(cat "$dir/port")/$1"; }

case $cmd in
start)
	[[ -d $dir ]] || die "$dir is not a directory"
	[[ $(id -u) -eq 0 ]] && chown nobody "$dir"
	chmod 700 "$dir"
	as_pg "$bin/initdb" -D "$dir/data" -U sbx --auth=trust --locale=C -E UTF8 \
		--no-instructions >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
	# A free port, then the server on it; another process may take it between the two,
	# so a few tries.
	for _ in 1 2 3 4 5; do
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
		echo "$port" >"$dir/port"
		if as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o \
			"-h 127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c synchronous_commit=off" \
			start >/dev/null 2>&1; then
			as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U sbx sbx
			url sbx
			exit 0
		fi
	done
	tail -n 20 "$dir/server.log" >&2 || true
	die "the server did not start"
	;;
createdb)
	(($# == 3)) || die "usage: pg.sh createdb DIR NAME"
	as_pg "$bin/createdb" -h 127.0.0.1 -p "$(cat "$dir/port")" -U sbx "$3"
	url "$3"
	;;
stop)
	[[ -d $dir/data ]] || exit 0
	as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	;;
*)
	die "unknown command $cmd"
	;;
esac
