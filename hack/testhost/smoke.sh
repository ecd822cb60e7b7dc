#!/usr/bin/env bash
# smoke.sh: prove that every engine of the test host runs a hardened container.
#
# For each engine of $ARIZUKO_TESTHOST_DIR/env: import a busybox-static image
# (no registry, no pull) through the API, run it with all capabilities dropped,
# no-new-privileges, a read-only root, network none and a 512 MiB memory limit,
# and check from inside: CapEff 0, NoNewPrivs 1, / not writable, only lo, a
# host directory from /tmp bind-mounted at the same path, and the memory limit
# (where the kernel applies it: not for rootless podman on cgroups v1).
# Uses the Docker-compatible API that all four engines serve. Run as root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

IMAGE_REPO=localhost/arizuko-testhost-busybox
IMAGE_TAG=latest
MEMORY=536870912
work=

# The check runs inside the container; its exit status is the number of
# failures. Report lines start with "@@ " so they are easy to find in the
# multiplexed log stream.
# shellcheck disable=SC2016 # expanded inside the container
PROBE='
fail=0
caps=$(sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status)
nnp=$(sed -n "s/^NoNewPrivs:[[:space:]]*//p" /proc/self/status)
ifs=$(ls /sys/class/net | tr "\n" " ")
mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max 2>/dev/null || echo none)
echo "@@ uid=$(id -u) caps=$caps no_new_privs=$nnp interfaces=$ifs memory=$mem nofile=$(ulimit -n) nproc=$(ulimit -u)"
[ "$caps" = 0000000000000000 ] || { echo "@@ FAIL: capabilities $caps"; fail=$((fail + 1)); }
[ "$nnp" = 1 ] || { echo "@@ FAIL: no_new_privs $nnp"; fail=$((fail + 1)); }
if touch /rootfs-is-writable 2>/dev/null; then echo "@@ FAIL: / is writable"; fail=$((fail + 1)); fi
[ "$ifs" = "lo " ] || { echo "@@ FAIL: interfaces $ifs"; fail=$((fail + 1)); }
[ "$(cat "$SHARED/token")" = "$TOKEN" ] || { echo "@@ FAIL: $SHARED/token not visible"; fail=$((fail + 1)); }
if [ "$EXPECT_MEMORY" != none ] && [ "$mem" != "$EXPECT_MEMORY" ]; then echo "@@ FAIL: memory limit $mem"; fail=$((fail + 1)); fi
echo "@@ failures=$fail"
exit $fail
'

build_rootfs_tar() {
	local out=$1 root busybox a
	busybox=$(command -v busybox) || die "busybox is not installed (package busybox-static)"
	root=$(mktemp -d)
	mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/etc" "$root/tmp"
	cp "$busybox" "$root/bin/busybox"
	for a in sh cat echo id ls sed tr touch sleep test true false; do
		ln -s busybox "$root/bin/$a"
	done
	tar -C "$root" -cf "$out" .
	rm -rf "$root"
}

ensure_image() {
	local name=$1 sock=$2 tar=$3
	if API_TIMEOUT=10 api "$sock" GET "/images/$IMAGE_REPO:$IMAGE_TAG/json" >/dev/null 2>&1; then
		return 0
	fi
	API_TIMEOUT=120 api "$sock" POST "/images/create?fromSrc=-&repo=$IMAGE_REPO&tag=$IMAGE_TAG" \
		-H 'Content-Type: application/x-tar' --data-binary "@$tar" >/dev/null ||
		die "$name: cannot import $IMAGE_REPO:$IMAGE_TAG"
}

# smoke NAME SOCK EXPECT_MEMORY SHARED_DIR TOKEN TAR
smoke() {
	local name=$1 sock=$2 expect=$3 shared=$4 token=$5 tar=$6 body id code logs
	ensure_image "$name" "$sock" "$tar"
	body=$(jq -n --arg image "$IMAGE_REPO:$IMAGE_TAG" --arg probe "$PROBE" --arg shared "$shared" \
		--arg token "$token" --arg expect "$expect" --argjson memory "$MEMORY" '{
		Image: $image,
		Cmd: ["/bin/sh", "-c", $probe],
		Env: ["SHARED=\($shared)", "TOKEN=\($token)", "EXPECT_MEMORY=\($expect)"],
		Labels: {"arizuko.testhost": "smoke"},
		HostConfig: {
			CapDrop: ["ALL"],
			SecurityOpt: ["no-new-privileges"],
			ReadonlyRootfs: true,
			NetworkMode: "none",
			Memory: $memory,
			PidsLimit: 64,
			Binds: ["\($shared):\($shared):ro"]
		}
	}')
	id=$(api "$sock" POST "/containers/create?name=arizuko-testhost-smoke-$name-$$" \
		-H 'Content-Type: application/json' -d "$body" | jq -r .Id) || die "$name: create failed"
	if ! api "$sock" POST "/containers/$id/start" >/dev/null; then
		api "$sock" DELETE "/containers/$id?force=1" >/dev/null || true
		die "$name: start failed"
	fi
	code=$(API_TIMEOUT=60 api "$sock" POST "/containers/$id/wait" | jq -r .StatusCode) || code=wait-failed
	logs=$(api "$sock" GET "/containers/$id/logs?stdout=1&stderr=1" | grep -ao '@@ .*' | cut -c4-) || logs=
	api "$sock" DELETE "/containers/$id?force=1" >/dev/null || say "warning: $name: cannot remove ${id:0:12}"
	printf '%-16s exit=%s %s\n' "$name" "$code" "$(head -n1 <<<"$logs")"
	if [[ $code != 0 ]]; then
		printf '%s\n' "$logs" >&2
		return 1
	fi
}

main() {
	require_root
	[[ -f $ENV_FILE ]] || die "$ENV_FILE is missing: run hack/testhost/up.sh first"
	# shellcheck disable=SC1090 # written by up.sh
	. "$ENV_FILE"
	local tar token failed=0
	work=$(mktemp -d /tmp/arizuko-testhost-smoke.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	tar=$work/rootfs.tar
	build_rootfs_tar "$tar"
	mkdir "$work/shared"
	token=$RANDOM$RANDOM
	printf '%s\n' "$token" >"$work/shared/token"
	# The rootless engine runs as the test user: it must be able to read it.
	chmod 0755 "$work" "$work/shared"
	chmod 0644 "$work/shared/token"

	smoke podman4 "${ARIZUKO_TEST_PODMAN4#unix://}" "$MEMORY" "$work/shared" "$token" "$tar" || failed=1
	smoke podman5 "${ARIZUKO_TEST_PODMAN5#unix://}" "$MEMORY" "$work/shared" "$token" "$tar" || failed=1
	smoke docker "${ARIZUKO_TEST_DOCKER#unix://}" "$MEMORY" "$work/shared" "$token" "$tar" || failed=1
	smoke podman-rootless "${ARIZUKO_TEST_PODMAN_ROOTLESS#unix://}" none "$work/shared" "$token" "$tar" || failed=1
	[[ $failed -eq 0 ]] || die "a smoke test failed"
	say "all engines ran a hardened container"
}

main "$@"
