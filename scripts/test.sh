#!/usr/bin/env bash
# The project's test command: everything CI runs, on a fresh machine.
# It installs and starts what the tests need, then vets and runs every test,
# with the race detector where there is concurrency to check.
set -euo pipefail
cd "$(dirname "$0")/.."

go version
go mod download

# The server's tests run against PostgreSQL as well as SQLite, and check the
# operator's console and the release report in headless Chromium; the Python
# package is tested with Debian's python3: install them from Debian's
# packages if they are missing (as root; a developer without root installs
# them once).
need=()
[[ -x /usr/bin/chromium ]] || need+=(chromium)
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || need+=(postgresql)
# The Python package's tests run with Debian's python3, with and without
# pandas.
[[ -x /usr/bin/python3 ]] || need+=(python3)
# The documentation's server examples call it with curl.
[[ -x /usr/bin/curl ]] || need+=(curl)
/usr/bin/python3 -c 'import pandas' 2>/dev/null || need+=(python3-pandas)
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

# Timings go to stderr, step by step, so that a slow step shows.
step() {
	local start=$SECONDS
	echo "== $*" >&2
	"$@"
	echo "== $((SECONDS - start)) s: $*" >&2
}

# One build for vet and the tests: go vet compiles every package with the
# flags go test uses without -race, so the tests reuse that build, and
# their own vet pass (a subset of go vet's checks) is off.
step go vet ./...

# Every test once, without the race detector, which makes the long
# numerical and statistical checks (exact audits, brute-force sensitivities,
# coverage of margins of error) many times slower and has nothing to find
# in single-goroutine code. The server and cmd/knowdp's serve tests run
# below, with it.
core=$(go list ./... | grep -v '^github.com/knowdp/knowdp/server$')
# shellcheck disable=SC2086
step go test -vet=off -timeout 20m $core -skip '^TestServe'

# The race detector where there is concurrency: the server (its ledger,
# group commit, admission control, and the noise samplers its queries
# share: noise is built with the detector as the server's dependency),
# the privacy accountant, and knowdp serve.
step go test -race -vet=off -timeout 20m ./server
step go test -race -vet=off -timeout 20m -run 'Accountant' ./privacy
step go test -race -vet=off -timeout 20m -run '^TestServe' ./cmd/knowdp

# The Apache Beam pipeline is a module of its own (beam/), so that the core
# stays light; its tests run a real Prism runner in process and as a
# separately started job server.
# Vet and the tests share one build of the Beam SDK (the same flags, so the
# tests and the Prism job server they build reuse what vet compiled).
(cd beam && go mod download && step go vet ./... && step go test -vet=off -count=1 -timeout 20m ./...)

# Every shell block of README.md and docs/*.md, run verbatim on the bundled
# data, each document in a fresh copy of the repository, so that no example
# drifts from the code (blocks that cannot run here say why in a
# "doc-test: skip" comment). After the tests: the Beam SDK is compiled by
# then, and the documentation's knowdp-beam builds reuse it.
step go run ./scripts/doctest
