#!/usr/bin/env bash
# The project's test command: everything CI runs, on a fresh machine.
# It installs and starts what the tests need, then vets and runs every test
# with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

go version
go mod download

# The server's tests run against PostgreSQL as well as SQLite, and check the
# curator's page in headless Chromium: install both from Debian's packages if
# they are missing (as root; a developer without root installs them once).
need=()
[[ -x /usr/bin/chromium ]] || need+=(chromium)
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || need+=(postgresql)
if ((${#need[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "scripts/test.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
		exit 1
	fi
	echo "installing ${need[*]} from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi

# A throwaway PostgreSQL cluster on a free local port, owned by a non-root
# user (the postgres user the package creates, when we are root), stopped
# and deleted on exit.
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
pgdir=$(mktemp -d /tmp/knowdp-pg.XXXXXX)
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
	chown postgres: "$pgdir"
	as_pg=(runuser -u postgres --)
fi
stop_pg() {
	"${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$pgdir"
}
trap stop_pg EXIT
"${as_pg[@]}" "$pgbin/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 >"$pgdir/initdb.log" 2>&1 ||
	{ cat "$pgdir/initdb.log" >&2; exit 1; }
port=
for _ in 1 2 3 4 5 6 7 8; do
	p=$((20000 + RANDOM % 40000))
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		continue # in use
	fi
	if "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 \
		-o "-p $p -k $pgdir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null; then
		port=$p
		break
	fi
done
if [[ -z $port ]]; then
	echo "scripts/test.sh: could not start PostgreSQL" >&2
	cat "$pgdir/server.log" >&2 || true
	exit 1
fi
"${as_pg[@]}" "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres knowdp_test
export KNOWDP_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/knowdp_test?sslmode=disable"
echo "$("$pgbin/postgres" --version) on 127.0.0.1:$port for the tests"

# Tests that need PostgreSQL or Chromium skip themselves without them, so
# that a contributor's plain "go test ./..." passes; here nothing may skip.
export KNOWDP_TEST_REQUIRE_ALL=1

go vet ./...
go test -race -timeout 20m ./...

# The Apache Beam pipeline is a module of its own (beam/), so that the core
# stays light; its tests run a real Prism runner in process and as a
# separately started job server.
(cd beam && go mod download && go vet ./... && go test -count=1 -timeout 20m ./...)
