#!/usr/bin/env bash
# check-units.sh STAGE: systemd-analyze verify on every unit staged under STAGE (by
# packaging/stage.sh), and the exposure score of arizukod.service. Fails on any finding.
#
# verify checks that ExecStart= binaries exist: copies of the units point at the staged
# files instead of /usr/bin/arizukod and /usr/libexec/arizuko/, which the build machine
# need not have.
set -euo pipefail
stage=$(cd "${1:?usage: check-units.sh STAGE}" && pwd)
command -v systemd-analyze >/dev/null || {
	echo "check-units.sh: systemd-analyze is missing (Debian: apt-get install systemd)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/system" "$tmp/user" "$tmp/run"
chmod 0700 "$tmp/run"

for d in lib/systemd/system usr/lib/systemd/system; do
	[[ -d $stage/$d ]] && cp "$stage/$d"/*.s* "$tmp/system/"
done
cp "$stage"/usr/lib/systemd/user/* "$tmp/user/"
sed -i -e "s|/usr/bin/arizukod|$stage/usr/bin/arizukod|g" \
	-e "s|/usr/libexec/arizuko/|$stage/usr/libexec/arizuko/|g" "$tmp"/system/* "$tmp"/user/*

failed=0
verify() {
	local out
	if ! out=$("$@" 2>&1) || [[ -n $out ]]; then
		printf '%s\n' "$out" >&2
		failed=1
	fi
}
units=("$tmp"/system/*)
verify systemd-analyze verify --man=no "${units[@]}"
verify env XDG_RUNTIME_DIR="$tmp/run" systemd-analyze --user verify --man=no "$tmp"/user/*
echo "systemd-analyze verify: ${#units[@]} system units, $(find "$tmp/user" -type f | wc -l) user units: $([[ $failed == 0 ]] && echo ok || echo FAILED)"

for s in arizukod.service arizuko-podman.service; do
	systemd-analyze security --offline=true --no-pager "$tmp/system/$s" 2>/dev/null |
		sed -n 's/^→ Overall exposure level for .*: /systemd-analyze security '"$s"': /p'
done
exit "$failed"
