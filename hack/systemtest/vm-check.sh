#!/bin/bash
# vm-check.sh: the checks inside hack/systemtest/vm.sh's machine (a oneshot unit at boot).
# Each result is a console line "VMCHECK ok|FAIL NAME: DETAIL"; the last is PASS or FAIL.
# The machine has no network: everything it needs is installed already.
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
sock=/run/arizuko/arizukod.sock
podman_sock=unix:///run/arizuko/podman/podman.sock

ok() { echo "VMCHECK ok $1: $2"; }
fail() {
	echo "VMCHECK FAIL $1: $2"
	journalctl -u arizukod -u arizuko-podman --no-pager -n 40 -o cat | sed 's/^/VMCHECK   | /'
	echo "VMCHECK FAIL"
	systemctl poweroff
	exit 1
}
# limits RUN_JSON prints the cgroup limits the example agent's "sandbox" saw.
limits() { local j=${1//\\\"/\"}; grep -o '"cgroup":{[^}]*}' <<<"$j"; }

[[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] || fail "cgroups v2" "$(stat -fc %T /sys/fs/cgroup)"
uid=$(id -u arizuko)
for _ in $(seq 1 120); do
	[[ -S /run/user/$uid/bus ]] && systemctl is-active -q arizukod.socket && break
	sleep 0.5
done
[[ $(loginctl show-user arizuko -P Linger 2>&1) == yes ]] || fail "linger" "arizuko does not linger"
[[ $(systemctl is-active "user@$uid.service") == active ]] || fail "user manager" "user@$uid.service is not active"
ok "boot" "cgroups v2, $(uname -r), user@$uid.service active, $(podman --version), $(crun --version | head -n 1)"

out=$(arizukod image import-static --engine-socket "$podman_sock" --tag localhost/arizuko-agent:latest /usr/libexec/arizuko/agent 2>&1) ||
	fail "image import" "$out"
ok "image import" "$out"

curl -sS --max-time 120 --unix-socket "$sock" -o /dev/null http://d/health || fail "socket activation" "no answer"
for _ in $(seq 1 240); do
	[[ $(systemctl is-active arizukod.service) == activating ]] || break
	sleep 0.5
done
[[ $(systemctl is-active arizukod.service) == active ]] || fail "socket activation" "arizukod.service is $(systemctl is-active arizukod.service)"
health=$(curl -sS --unix-socket "$sock" http://d/health)
ok "socket activation" "$(tr -d ' \n' <<<"$health" | head -c 120)"
# Rootless Podman under the user manager on cgroups v2 applies the limits: arizukod says so
# and needs no allow_unlimited.
[[ $health == *'"status": "ok"'* && $health == *'"limits": "applied"'* ]] || fail "limits applied" "$health"
ok "limits applied" "$(grep -o '"limits": "[^"]*"' <<<"$health")"

arizukod groups add main >/dev/null || fail "groups add" "refused"
run=$(arizukod run --folder main --message sandbox 2>&1) || fail "a turn" "$run"
lim=$(limits "$run")
[[ $lim == *'"memory":"1073741824"'* && $lim == *'"pids":"512"'* && $lim == *'"cpu":"200000 100000"'* ]] ||
	fail "per-container limits" "the agent saw $lim"
id=$(sed -n 's/^  "id": "\([^"]*\)".*/\1/p' <<<"$run")
n=$(journalctl -u arizukod "ARIZUKO_RUN_ID=$id" ARIZUKO_STATUS=ok -o cat | grep -c .)
[[ $n -gt 0 ]] || fail "journal" "no ARIZUKO_STATUS=ok entry for $id"
ok "a turn with its limits" "run $id: $lim; journalctl -u arizukod ARIZUKO_RUN_ID=$id: ok"

for i in 1 2 3; do
	arizukod run --folder main --message "reply hi" >/dev/null 2>&1 || fail "turn $i" "failed"
done
# The daemon keeps main's next container prepared (initialized: a libpod cgroup); it removes
# it when it stops. The user manager removes a scope shortly after its last process exits.
systemctl stop arizukod.service || fail "stop arizukod" "failed"
for _ in $(seq 1 20); do
	scopes=$(find /sys/fs/cgroup -name 'libpod-*' -type d | wc -l)
	[[ $scopes -eq 0 ]] && break
	sleep 0.5
done
deep=$(find /sys/fs/cgroup/system.slice/arizuko-podman.service -type d | wc -l)
[[ $scopes -eq 0 && $deep -eq 1 ]] || fail "no leftovers" "$scopes libpod cgroups, $deep cgroups under arizuko-podman.service"
warn=$(journalctl -u arizuko-podman -o cat | grep -c 'limits are not applied\|applies no per-container' || true)
[[ $warn -eq 0 ]] || fail "cgroup manager" "the podman service fell back to cgroupfs"
ok "three more turns, then a stop" "no libpod cgroup left (the prepared container removed), no nesting under arizuko-podman.service, cgroup manager systemd"

dpkg --remove arizukod >/dev/null 2>&1 || fail "dpkg --remove" "failed"
sleep 2
# procs: every process of user arizuko, and every arizukod (minbase has no procps).
procs() {
	local d u comm
	for d in /proc/[0-9]*; do
		comm=$(cat "$d/comm" 2>/dev/null) || continue
		u=$(awk '/^Uid:/ { print $2 }' "$d/status" 2>/dev/null)
		[[ $u == "$uid" || $comm == arizukod ]] && echo "${d#/proc/} $comm"
	done
	return 0
}
left=$(procs)
[[ -z $left ]] || fail "nothing runs after remove" "$left"
[[ $(systemctl is-active "user@$uid.service") != active ]] || fail "nothing runs after remove" "user@$uid.service is active"
ok "dpkg --remove" "no process of arizuko, user@$uid.service stopped, data kept: $(find /var/lib/arizuko -mindepth 1 -maxdepth 1 -printf '%f ')"
dpkg --purge arizukod >/dev/null 2>&1 || fail "dpkg --purge" "failed"
[[ ! -e /var/lib/arizuko && ! -e /etc/arizuko ]] || fail "purge" "data or config left"
ok "dpkg --purge" "/var/lib/arizuko and /etc/arizuko gone"

echo "VMCHECK PASS"
systemctl poweroff
