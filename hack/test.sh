#!/usr/bin/env bash
# test.sh: the whole test suite, on the real test host. Starts the test host (Podman 4.3,
# Podman 5 in a Debian 13 chroot, Docker, rootless Podman, journald, a systemd manager) from
# distro packages, runs gofmt, go vet, every test with engines required (a missing engine
# fails, never skips), each fuzz target for a bounded time, builds the .deb and .rpm and
# installs the .deb on a Debian booted with systemd as PID 1 (hack/systemtest.sh), then
# stops the test host.
#
# A plain `go test ./...` is the unit suite: it starts no service. The tests that need the
# test host live in files named *_e2e_test.go and run here, where ARIZUKO_REQUIRE_ENGINES=1
# turns a missing engine into a failure.
#
#   hack/test.sh            everything
#   hack/test.sh ./runtime  only these packages (the test host still starts)
#   FUZZTIME=0 hack/test.sh no fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/env.sh
. hack/env.sh

FUZZTIME=${FUZZTIME:-10s}
PKGS=("${@:-./...}")
T0=$SECONDS

say() { printf '\ntest: %s\n' "$*" >&2; }

[[ ${PKGS[*]} != ./... ]] || say "the whole suite takes about 40 minutes on a bare machine: the test host's packages (listed as they install), Kubernetes built once (cached in /var/tmp/arizuko-k8s), gofmt and vet, go test, fuzzing for $FUZZTIME per target, the .deb and .rpm and a booted-system test"
say "gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go'))
[[ -z $unformatted ]] || { echo "gofmt would change: $unformatted" >&2; exit 1; }
go vet "${PKGS[@]}"
go mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy: run go mod tidy" >&2; exit 1; }

say "starting the test host"
bash hack/testhost/up.sh
trap 'say "stopping the test host"; bash hack/testhost/down.sh' EXIT
# shellcheck disable=SC1091
. "${ARIZUKO_TESTHOST_DIR:-/var/tmp/arizuko-testhost}/env"
# The tests get a TMPDIR of their own (t.TempDir(), enginetest.DataDir, go's work files),
# in a directory the test host shares with the Podman 5 chroot at the same path, and it
# must be empty when they end: checking it rather than /tmp, whatever else on the machine
# writes to /tmp meanwhile cannot fail a correct run.
TMPDIR=$(mktemp -d "$ARIZUKO_TESTHOST_TESTS_TMP/XXXXXX")
# Like /tmp: the rootless engine's user reaches the directories the tests open to it.
chmod 1777 "$TMPDIR"
export TMPDIR
trap 'rm -rf --one-file-system "$TMPDIR"; say "stopping the test host"; bash hack/testhost/down.sh' EXIT
export ARIZUKO_REQUIRE_ENGINES=1
# The Claude image's Debian rootfs and Claude Code's npm package (about 175 MB): downloaded
# once, kept outside the clone between runs.
export ARIZUKO_CACHE_DIR=${ARIZUKO_CACHE_DIR:-/var/tmp/arizuko-cache}
# Podman 5's real Quadlet generator lives in the Debian 13 chroot; the tests' TMPDIR is
# shared with it, so their unit directories resolve there too.
QUADLET_GENERATOR=$ARIZUKO_TESTHOST_DIR/quadlet-generator
printf '#!/bin/sh\nexec chroot %s /usr/libexec/podman/quadlet "$@"\n' "$ARIZUKO_TEST_PODMAN5_CHROOT" >"$QUADLET_GENERATOR"
chmod +x "$QUADLET_GENERATOR"
export QUADLET_GENERATOR

# The suite must leave the work tree as it found it, and its TMPDIR empty.
tree_before=$(git status --porcelain)

say "go test ${PKGS[*]} (a line per package as it finishes)"
go test -count=1 -timeout 45m "${PKGS[@]}"

if [[ $FUZZTIME != 0 && ${PKGS[*]} == ./... ]]; then
	say "fuzzing every target for $FUZZTIME"
	FUZZLOG=$ARIZUKO_TESTHOST_DIR/logs/fuzz.log
	while read -r file target; do
		pkg=./$(dirname "$file")
		echo "fuzz $pkg $target"
		ok=0
		for _ in 1 2; do
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >"$FUZZLOG" 2>&1; then
				ok=1
				break
			fi
			# Go's fuzz coordinator sometimes misses its own deadline while a worker is
			# mid-input ("context deadline exceeded", no failing input): that is not a
			# finding, so it gets one more try. A real finding writes its input and fails.
			grep -q 'Failing input written' "$FUZZLOG" && break
			grep -q 'context deadline exceeded' "$FUZZLOG" || break
			echo "fuzz $pkg $target: the fuzzer missed its deadline, once more"
		done
		[[ $ok == 1 ]] || { cat "$FUZZLOG"; exit 1; }
	done < <(git grep -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed -E 's/:func / /')
fi
tmp_left=$(ls -A "$TMPDIR")
[[ -z $tmp_left ]] || { echo "the tests left these in $TMPDIR:" $tmp_left >&2; exit 1; }
[[ $(git status --porcelain) == "$tree_before" ]] || { echo "the tests changed the work tree:" >&2; git status --porcelain >&2; exit 1; }

if [[ ${PKGS[*]} == ./... ]]; then
	say "packages: make deb and rpm (lintian, rpmlint, systemd-analyze verify), then the booted-system test"
	command -v make >/dev/null || pkg_install make >/dev/null
	make -s packages
	bash hack/systemtest.sh
fi
say "all tests passed in $((SECONDS - T0)) s"
