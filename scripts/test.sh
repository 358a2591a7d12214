#!/usr/bin/env bash
# The project's test command: everything CI runs, on a fresh machine.
# It installs and starts what the tests need, then vets and runs every test
# with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

go version
go mod download
go vet ./...
go test -race -timeout 20m ./...
