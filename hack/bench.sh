#!/usr/bin/env bash
# bench.sh: `make bench`. Builds bin/arizukod, bin/agent and bin/bench, makes sure the test
# host's Podman 4 and Docker engines answer (starting the test host when they do not), runs
# the benchmarks of bench/ on them, prints the table and writes BENCHMARKS.md.
#
# The test host is left as it was found: when this script had to start it and none of its
# services ran before, it stops it again at the end; a test host that was up, even partly,
# stays up. Arguments are passed to the bench program (bin/bench -h lists them), e.g.
#   hack/bench.sh -mode=phases     only the per-phase engine API costs
#   hack/bench.sh -mode=cold       only the socket-activated cold starts (-cold=N of them)
#   hack/bench.sh -mode=gvisor     only turns under gVisor (runsc) against runc
#   hack/bench.sh -mode=tracing    only what tracing costs a turn (on and off)
#   hack/bench.sh -turns=100       more turns per latency method
#   hack/bench.sh -mode=claude     only Claude Code turns: bare, podman run, arizukod (warm agents off, on)
#   hack/bench.sh -mode=density    only concurrent Claude Code turns, rising until something gives
#   hack/bench.sh -warm-agents=0   without the "warm agents on" row
#
# The Claude Code measurements build the bench's own arizuko-claude image from the cache of
# the tests ($ARIZUKO_CACHE_DIR, as hack/test.sh sets it: the Debian rootfs and Claude Code's
# npm package, downloaded on the first build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/env.sh
. hack/env.sh

TESTHOST_DIR=${ARIZUKO_TESTHOST_DIR:-/var/tmp/arizuko-testhost}
ENV_FILE=$TESTHOST_DIR/env

say() { printf 'bench: %s\n' "$*" >&2; }

[[ $(id -u) -eq 0 ]] || { say "run as root: the test host's engines are rootful"; exit 1; }

# answers SOCKET_URI: the engine at unix://PATH answers its ping.
answers() {
	local path=${1#unix://}
	[[ -S $path ]] && [[ $(curl -sS --max-time 5 --unix-socket "$path" http://d/_ping 2>/dev/null) == OK ]]
}

engines_up() {
	[[ -f $ENV_FILE ]] || return 1
	# shellcheck disable=SC1090
	(. "$ENV_FILE" && answers "$ARIZUKO_TEST_PODMAN4" && answers "$ARIZUKO_TEST_DOCKER")
}

# any_service_alive: a pidfile of the test host names a live process.
any_service_alive() {
	local f pid
	for f in "$TESTHOST_DIR"/pids/*.pid; do
		[[ -f $f ]] || continue
		read -r pid <"$f" || continue
		[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && return 0
	done
	return 1
}

started_testhost=
if ! engines_up; then
	if ! any_service_alive; then
		started_testhost=1
	fi
	say "the test host's engines do not answer: starting it (hack/testhost/up.sh)"
	bash hack/testhost/up.sh
	if [[ -n $started_testhost ]]; then
		trap 'say "stopping the test host this run started"; bash hack/testhost/down.sh' EXIT
	else
		say "part of the test host ran before: it stays up afterwards"
	fi
fi
# shellcheck disable=SC1090
. "$ENV_FILE"

export ARIZUKO_CACHE_DIR=${ARIZUKO_CACHE_DIR:-/var/tmp/arizuko-cache}
VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
say "building bin/arizukod, bin/agent, bin/arizuko-claude, bin/bench and the memory floors"
go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o bin/arizukod ./cmd/arizukod
go build -trimpath -ldflags '-s -w' -o bin/agent ./examples/agent
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/arizuko-claude ./cmd/arizuko-claude
go build -trimpath -o bin/bench ./bench
go build -trimpath -ldflags '-s -w' -o bin/depsfloor ./bench/depsfloor
# The same floor with the bindings' API packages, which runtime/podman does without.
tags=${GOFLAGS#*-tags=}
go build -tags "${tags%% *},bindingsapi" -trimpath -ldflags '-s -w' -o bin/depsfloor-bindings-api ./bench/depsfloor

bin/bench -podman "$ARIZUKO_TEST_PODMAN4" -docker "$ARIZUKO_TEST_DOCKER" -testhost "$TESTHOST_DIR" \
	-arizukod bin/arizukod -agent bin/agent -claude-runner bin/arizuko-claude -cache-dir "$ARIZUKO_CACHE_DIR" -skills container/skills -repo . -out BENCHMARKS.md "$@"
