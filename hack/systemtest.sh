#!/usr/bin/env bash
# systemtest.sh [DEB]: the package on a booted system. Boots Debian 12 with systemd as
# PID 1 in systemd-nspawn, installs DEB (default: `make deb` of this tree, lintian
# included) with `apt-get install` and its real dependencies
# from the Debian mirror this machine uses, and checks what a user meets:
#
#   the arizuko user, its subordinate ids, the enabled sockets; a connection to
#   /run/arizuko/arizukod.sock starts arizukod.service (socket activation, Type=notify);
#   on this machine's cgroups v1 it refuses turns for the limits, saying why, until
#   allow_unlimited = true;
#   group members may use the API and others may not; the agent image is imported into
#   the arizuko user's rootless Podman; a real turn runs through the daemon and is found
#   with `journalctl -u arizukod ARIZUKO_RUN_ID=...`; a group's sidecar is a transient unit
#   of arizuko's own user manager while its turn runs, logs to the journal, and is gone
#   after the turn and after a SIGKILL of the daemon; a user's own daemon (the user units)
#   runs a turn too; the Cockpit page (hack/systemtest/cockpit.sh), logged in to with
#   headless Chromium, shows the groups and the runs with their tokens, and kills and
#   unparks; an upgrade keeps a changed conffile, restarts arizukod and leaves
#   Podman running; `apt-get remove` leaves nothing of the package running and keeps the
#   data; `apt-get purge` removes the data.
#
# It prints every check with its time and exits non-zero on the first failure, after
# printing the units' journal. Needs root, debootstrap and systemd-container (installed
# with apt-get when missing).
#
# Environment:
#   ARIZUKO_SYSTEMTEST_DIR      cache and work directory (/var/tmp/arizuko-systemtest);
#                               the debootstrapped tree is kept there between runs
#   ARIZUKO_SYSTEMTEST_TIMEOUT  seconds for the test once the tree exists (900)
#   ARIZUKO_SYSTEMTEST_BOOTSTRAP_TIMEOUT  seconds for debootstrap (1800)
#   ARIZUKO_SYSTEMTEST_MIRROR   Debian mirror (default: the one in this machine's apt sources)
#   ARIZUKO_SYSTEMTEST_KEEP=1   leave the booted container running at the end
#
# What the test adds inside the container, for this machine only (hack/systemtest/
# containers.conf, pointed at by a drop-in of arizuko-podman.service, and alice's own
# containers.conf): runc instead of crun, and no session keyring. hack/systemtest/README.md
# says why.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/pkg.sh
. hack/pkg.sh

ST_DIR=${ARIZUKO_SYSTEMTEST_DIR:-/var/tmp/arizuko-systemtest}
TIMEOUT=${ARIZUKO_SYSTEMTEST_TIMEOUT:-900}
BOOTSTRAP_TIMEOUT=${ARIZUKO_SYSTEMTEST_BOOTSTRAP_TIMEOUT:-1800}
SUITE=bookworm
BASE=$ST_DIR/$SUITE
MARKER=$BASE/.arizuko-systemtest-ready
RUN=$ST_DIR/run
APT_CACHE=$ST_DIR/apt-archives
LOGS=$ST_DIR/logs
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PODMAN_SOCK=/run/arizuko/podman/podman.sock
API_SOCK=/run/arizuko/arizukod.sock

say() { printf 'systemtest: %s\n' "$*" >&2; }
die() {
	printf 'systemtest: FAIL: %s\n' "$*" >&2
	exit 1
}

[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap, systemd-nspawn)"
case $ST_DIR in
/ | /bin* | /boot* | /dev* | /etc* | /lib* | /proc* | /run* | /sbin* | /sys* | /usr* | /var | /var/lib | /home | /root | /tmp)
	die "ARIZUKO_SYSTEMTEST_DIR=$ST_DIR: refusing a system directory"
	;;
esac
[[ $ST_DIR =~ ^/[A-Za-z0-9._/-]+$ && $ST_DIR != */ && $ST_DIR != *..* ]] ||
	die "ARIZUKO_SYSTEMTEST_DIR=$ST_DIR: must be an absolute, normalized path"

# ---- timings and results ----------------------------------------------------------------

declare -a RESULTS=()
t_start=$(date +%s.%N)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# pass NAME SECONDS DETAIL records one passed check.
pass() {
	RESULTS+=("$(printf '  ok  %7ss  %-34s %s' "$2" "$1" "$3")")
	printf 'systemtest: ok   %-34s %6ss  %s\n' "$1" "$2" "$3" >&2
}
summary() {
	printf '\nsystemtest: %d checks passed in %ss\n' "${#RESULTS[@]}" "$(since "$t_start")"
	printf '%s\n' "${RESULTS[@]}"
}

# ---- tools ---------------------------------------------------------------------------------

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v nsenter >/dev/null || need+=(util-linux)
if [[ ${#need[@]} -gt 0 ]]; then
	say "installing ${need[*]}"
	pkg_install "${need[@]}" >/dev/null
fi

mkdir -p "$ST_DIR" "$APT_CACHE" "$LOGS"
exec 9>"$ST_DIR/lock"
flock -n 9 || die "another systemtest holds $ST_DIR/lock"

# ---- the Debian mirror -------------------------------------------------------------------

# apt_uri SUITE prints the first URI this machine's apt sources use for SUITE.
apt_uri() {
	local suite=$1 f
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		awk -v s="$suite" '
			function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " s " ") && uri != "") { print uri; found = 1; exit } types = suites = uri = "" }
			/^[ \t]*$/ { flush(); next }
			/^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
			/^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
			/^URIs:/ { sub(/^URIs:[ \t]*/, ""); split($0, u, /[ \t]+/); uri = u[1] }
			END { if (!found) flush() }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		sed -E 's/\[[^]]*\]//' "$f" | awk -v s="$suite" '$1 == "deb" && $3 == s { print $2 }'
	done
}
MIRROR=${ARIZUKO_SYSTEMTEST_MIRROR:-$(apt_uri "$SUITE" | head -n 1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=$(apt_uri "$SUITE-security" | head -n 1)
say "Debian mirror: $MIRROR${SECURITY:+ (security: $SECURITY)}"

# ---- the package ----------------------------------------------------------------------------

DEB=${1:-}
if [[ -z $DEB ]]; then
	say "make deb (log: $LOGS/make-deb.log)"
	t=$(now)
	bash -c '. hack/env.sh && make deb' >"$LOGS/make-deb.log" 2>&1 || die "make deb failed: $(tail -n 20 "$LOGS/make-deb.log")"
	DEB=$(find dist -maxdepth 1 -name 'arizukod_*.deb' | head -n 1)
	pass "make deb (build, lintian: no errors)" "$(since "$t")" "$DEB"
fi
[[ -f $DEB ]] || die "$DEB: no such package"
DEB=$(cd "$(dirname "$DEB")" && pwd)/$(basename "$DEB")
say "package: $DEB"

# The example MCP sidecar (not packaged), static, for a group with a sidecar.
t=$(now)
SIDECAR_BIN=$ST_DIR/sidecar
bash -c '. hack/env.sh && go build -trimpath -ldflags "-s -w" -o "$1" ./examples/sidecar' _ "$SIDECAR_BIN" >"$LOGS/sidecar-build.log" 2>&1 ||
	die "building examples/sidecar failed: $(tail -n 20 "$LOGS/sidecar-build.log")"
pass "build examples/sidecar (static)" "$(since "$t")" "$SIDECAR_BIN"

# The Cockpit page's check (hack/systemtest/cockpit.sh): its fake model and its browser.
# shellcheck source=hack/systemtest/cockpit.sh
. hack/systemtest/cockpit.sh
cockpit_prepare

# ---- the cached tree --------------------------------------------------------------------------

include=systemd,systemd-sysv,dbus,curl
[[ $MIRROR != https:* ]] || include+=,ca-certificates
bootstrap_args=(--variant=minbase "--include=$include" "$SUITE")
want_marker="debootstrap ${bootstrap_args[*]} $MIRROR"
if [[ ! -f $MARKER || $(cat "$MARKER") != "$want_marker" ]]; then
	say "debootstrap $SUITE into $BASE (cached for later runs)"
	t=$(now)
	rm -rf --one-file-system "$BASE" "$BASE.tmp"
	timeout "$BOOTSTRAP_TIMEOUT" debootstrap "${bootstrap_args[@]}" "$BASE.tmp" "$MIRROR" >"$LOGS/debootstrap.log" 2>&1 ||
		die "debootstrap failed or took more than ${BOOTSTRAP_TIMEOUT}s: $LOGS/debootstrap.log"
	rm -f "$BASE.tmp"/var/cache/apt/archives/*.deb
	printf '%s\n' "$want_marker" >"$BASE.tmp/.arizuko-systemtest-ready"
	mv "$BASE.tmp" "$BASE"
	pass "debootstrap $SUITE (cached after)" "$(since "$t")" "$BASE"
else
	pass "debootstrap $SUITE" "0.0" "cached in $BASE"
fi

# ---- the booted container --------------------------------------------------------------------

NSPAWN_PID=
CT_PID=
WATCHDOG_PID=

nspawn_alive() { [[ -n $NSPAWN_PID ]] && kill -0 "$NSPAWN_PID" 2>/dev/null; }
mounted_under() { awk -v r="$1" '$5 == r || index($5, r "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; }
# child_of PID prints the first process whose parent is PID.
child_of() {
	local d line
	for d in /proc/[0-9]*; do
		read -r line 2>/dev/null <"$d/stat" || continue
		line=${line##*) }
		read -r _ ppid _ <<<"$line"
		if [[ $ppid == "$1" ]]; then
			echo "${d#/proc/}"
			return
		fi
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $WATCHDOG_PID ]] && kill "$WATCHDOG_PID" 2>/dev/null
	cockpit_stop
	if nspawn_alive && [[ ${ARIZUKO_SYSTEMTEST_KEEP:-0} == 1 ]]; then
		say "left running (ARIZUKO_SYSTEMTEST_KEEP=1): nspawn pid $NSPAWN_PID, container init pid $CT_PID;"
		say "  enter it with: nsenter -t $CT_PID -m -u -i -n -p -C -r -w /bin/bash"
		exit "$rc"
	fi
	if nspawn_alive; then
		# SIGTERM makes systemd-nspawn ask the container's systemd to power off.
		kill -TERM "$NSPAWN_PID" 2>/dev/null || true
		for _ in $(seq 1 40); do
			nspawn_alive || break
			sleep 0.5
		done
		nspawn_alive && kill -KILL "$NSPAWN_PID" 2>/dev/null
		wait "$NSPAWN_PID" 2>/dev/null || true
	fi
	if [[ -d $RUN ]] && ! mounted_under "$RUN"; then
		rm -rf --one-file-system "$RUN"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "timed out after ${TIMEOUT}s"; exit 124' TERM

# ct CMD...: run CMD inside the container (all of its namespaces, a clean environment).
ct() {
	timeout "${CT_TIMEOUT:-120}" nsenter -t "$CT_PID" -m -u -i -n -p -C -r -w \
		env -i PATH="$CLEAN_PATH" HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive "$@"
}

# fail NAME DETAIL: the check NAME failed; print what the units logged, then stop.
fail() {
	say "FAIL: $1: $2"
	if nspawn_alive && [[ -n $CT_PID ]]; then
		{
			echo "---- systemctl status"
			ct systemctl --no-pager status arizukod.socket arizukod.service arizuko-podman.socket arizuko-podman.service 2>&1 | tail -n 60
			echo "---- journalctl -u arizukod -u arizuko-podman"
			ct journalctl --no-pager -u arizukod -u arizuko-podman -n 80 2>&1
		} >&2 || true
	fi
	summary >&2
	exit 1
}

# The global deadline: everything after the cached tree.
# The watchdog's sleep dies with it, so no stray process holds the output open.
(
	trap 'kill "$sleep_pid" 2>/dev/null; exit 0' TERM
	sleep "$TIMEOUT" &
	sleep_pid=$!
	wait "$sleep_pid" && kill -TERM $$ 2>/dev/null
) </dev/null >/dev/null 2>&1 &
WATCHDOG_PID=$!

t=$(now)
if [[ -d $RUN ]]; then
	! mounted_under "$RUN" || die "something is mounted under $RUN; refusing to delete it"
	rm -rf --one-file-system "$RUN"
fi
cp -a --reflink=auto "$BASE" "$RUN"
rm -f "$RUN/.arizuko-systemtest-ready"
{
	echo "deb $MIRROR $SUITE main"
	echo "deb $MIRROR $SUITE-updates main"
	[[ -z $SECURITY ]] || echo "deb $SECURITY $SUITE-security main"
} >"$RUN/etc/apt/sources.list"
install -m 0644 "$DEB" "$RUN/root/$(basename "$DEB")"
install -m 0755 "$SIDECAR_BIN" "$RUN/root/sidecar"
# The test's tuning of the arizuko user's Podman for this machine (see the header).
install -D -m 0644 hack/systemtest/containers.conf "$RUN/etc/arizuko-systemtest/containers.conf"
install -D -m 0644 /dev/stdin "$RUN/etc/systemd/system/arizuko-podman.service.d/systemtest.conf" <<'EOF'
# hack/systemtest.sh: this machine's Podman settings (runc, no keyring, rlimits).
[Service]
Environment=CONTAINERS_CONF=/etc/arizuko-systemtest/containers.conf
EOF
echo arizuko-systemtest >"$RUN/etc/hostname"
pass "fresh copy of the tree" "$(since "$t")" "$RUN"

t=$(now)
setsid systemd-nspawn -q --register=no --keep-unit -D "$RUN" -M arizuko-systemtest --boot \
	--bind="$APT_CACHE:/var/cache/apt/archives" </dev/null >"$LOGS/boot.log" 2>&1 &
NSPAWN_PID=$!
for _ in $(seq 1 100); do
	nspawn_alive || die "systemd-nspawn exited: $LOGS/boot.log: $(tail -n 5 "$LOGS/boot.log")"
	CT_PID=$(child_of "$NSPAWN_PID")
	[[ -n $CT_PID ]] && break
	sleep 0.1
done
[[ -n $CT_PID ]] || fail "boot" "no container init under systemd-nspawn pid $NSPAWN_PID"
state=
for _ in $(seq 1 120); do
	state=$(CT_TIMEOUT=5 ct systemctl is-system-running 2>/dev/null || true)
	[[ $state == running || $state == degraded ]] && break
	sleep 0.5
done
[[ $state == running || $state == degraded ]] || fail "boot" "the system is '$state' after 60s"
[[ $state == running ]] || say "system is degraded: $(ct systemctl --failed --no-legend --plain 2>&1 | tr '\n' ' ')"
pass "boot to multi-user ($state)" "$(since "$t")" "$(ct systemctl --version | head -n 1)"

# ---- install --------------------------------------------------------------------------------

t=$(now)
CT_TIMEOUT=300 ct apt-get update -q >"$LOGS/apt-update.log" 2>&1 || fail "apt-get update" "$LOGS/apt-update.log"
pass "apt-get update" "$(since "$t")" "$MIRROR"

# runc: crun, the first choice of podman's "crun | runc", fails on this machine's cgroups.
t=$(now)
CT_TIMEOUT=600 ct apt-get install -y -q -o APT::Keep-Downloaded-Packages=true "/root/$(basename "$DEB")" runc \
	>"$LOGS/apt-install.log" 2>&1 || fail "apt-get install" "$(tail -n 20 "$LOGS/apt-install.log")"
newly=$(grep -o '[0-9]* newly installed' "$LOGS/apt-install.log" | cut -d' ' -f1)
fetched=$(sed -n 's/^Fetched \(.*\) in .*/\1/p' "$LOGS/apt-install.log")
pass "apt-get install ./$(basename "$DEB")" "$(since "$t")" "$newly packages installed, ${fetched:-0 B} downloaded"

t=$(now)
pw=$(ct getent passwd arizuko) || fail "arizuko user" "no user arizuko after install"
[[ $(cut -d: -f6 <<<"$pw") == /var/lib/arizuko ]] || fail "arizuko user" "home is not /var/lib/arizuko: $pw"
ct grep -q '^arizuko:' /etc/subuid || fail "subordinate ids" "no /etc/subuid entry for arizuko"
ct grep -q '^arizuko:' /etc/subgid || fail "subordinate ids" "no /etc/subgid entry for arizuko"
[[ $(ct loginctl show-user arizuko -P Linger 2>&1) == yes ]] || fail "lingering user" "arizuko does not linger: $(ct loginctl show-user arizuko 2>&1 | head -n 3)"
perm=$(ct stat -c '%a %U:%G' /var/lib/arizuko /run/arizuko /run/arizuko/podman | tr '\n' ',')
[[ $perm == "700 arizuko:arizuko,750 arizuko:arizuko,700 arizuko:arizuko," ]] || fail "directories" "unexpected owners or modes: $perm"
pass "user, subids, linger, directories" "$(since "$t")" "$(cut -d: -f1,3,6 <<<"$pw"), subuid $(ct grep '^arizuko:' /etc/subuid | cut -d: -f2,3), lingering"

t=$(now)
for u in arizukod.socket arizuko-podman.socket; do
	[[ $(ct systemctl is-enabled "$u" 2>&1) == enabled ]] || fail "enabled on install" "$u is not enabled"
	[[ $(ct systemctl is-active "$u" 2>&1) == active ]] || fail "started on install" "$u is not active"
done
[[ $(ct systemctl is-active arizukod.service 2>&1) == inactive ]] || fail "socket activation" "arizukod.service runs before any connection"
out=$(ct systemd-analyze verify --man=no arizukod.socket arizukod.service arizuko-podman.socket arizuko-podman.service 2>&1) ||
	fail "systemd-analyze verify" "$out"
[[ -z $out ]] || fail "systemd-analyze verify" "$out"
for f in /etc/arizuko/arizukod.toml /etc/arizuko/podman/containers.conf /usr/share/man/man8/arizukod.8.gz \
	/usr/share/man/man5/arizukod.toml.5.gz /usr/share/arizuko/skills/MIGRATION_VERSION /usr/libexec/arizuko/agent; do
	ct test -f "$f" || fail "installed files" "$f is missing"
done
pass "sockets enabled+listening, verify" "$(since "$t")" "arizukod.service inactive until a connection"

# ---- the engine and the daemon ---------------------------------------------------------------

t=$(now)
out=$(CT_TIMEOUT=180 ct arizukod image import-static --engine-socket "unix://$PODMAN_SOCK" \
	--tag localhost/arizuko-agent:latest /usr/libexec/arizuko/agent 2>&1) || fail "image import" "$out"
[[ $(ct systemctl is-active arizuko-podman.service) == active ]] || fail "podman activation" "arizuko-podman.service is not active"
pass "image import (podman socket-activated)" "$(since "$t")" "$out"

# health prints the body of GET /health, then the HTTP status on a line of its own.
health() { ct curl -sS --max-time 60 --unix-socket "$API_SOCK" -w '\n%{http_code}' http://d/health 2>&1; }

# The first connection starts arizukod.service; it answers at once and sends READY=1 once
# its store is open and the engine answered a ping (until then /health says 503 "degraded").
t=$(now)
first=$(health) || fail "socket activation" "curl: $first"
first_code=${first##*$'\n'}
state=
for _ in $(seq 1 120); do
	state=$(ct systemctl is-active arizukod.service || true)
	[[ $state == activating ]] || break
	sleep 0.5
done
[[ $state == active ]] || fail "socket activation" "arizukod.service is $state"
pass "connect -> arizukod.service active" "$(since "$t")" "first GET /health: HTTP $first_code; READY=1 after that"

# On this machine's cgroups v1 the arizuko user's rootless Podman cannot apply the memory,
# CPU and pids limits: arizukod refuses turns and says why (GET /health 503, doctor) until
# the administrator allows turns without them, as the packaged arizukod.toml explains.
t=$(now)
for _ in $(seq 1 120); do
	body=$(health) || fail "GET /health" "curl: $body"
	# Healthy at the engine's first ping, the limits are "pending" until its details came.
	[[ $body == *'"up": true'* && $body != *'"limits": "pending"'* ]] && break
	sleep 0.5
done
code=${body##*$'\n'}
body=${body%$'\n'*}
[[ $code == 503 && $body == *'"status": "degraded"'* && $body == *'cgroups v1'* && $body == *'allow_unlimited = true'* ]] ||
	fail "limits: turns refused" "HTTP $code: $body"
out=$(ct runuser -u arizuko -- env ARIZUKO_MODE=system DATA_DIR=/var/lib/arizuko CONTAINER_HOST="unix://$PODMAN_SOCK" \
	arizukod doctor --check limits 2>&1) && fail "limits: doctor" "the check passed: $out"
[[ $out == *'turns are refused'*'cgroups v1'* ]] || fail "limits: doctor" "$out"
ct sed -i 's/^#allow_unlimited = false$/allow_unlimited = true/' /etc/arizuko/arizukod.toml
ct grep -q '^allow_unlimited = true$' /etc/arizuko/arizukod.toml || fail "limits: opt out" "no '#allow_unlimited = false' line in /etc/arizuko/arizukod.toml"
ct systemctl restart arizukod.service
pass "limits: refused, then allow_unlimited" "$(since "$t")" "HTTP $code: $(grep -o '"limits": "[^"]*' <<<"$body" | cut -c1-90)..."

t=$(now)
for _ in $(seq 1 120); do
	body=$(health) || fail "GET /health" "curl: $body"
	[[ ${body##*$'\n'} == 200 && $body != *'"limits": "pending"'* ]] && break
	sleep 0.5
done
code=${body##*$'\n'}
body=${body%$'\n'*}
[[ $code == 200 ]] || fail "GET /health" "HTTP $code: $body"
[[ $body == *'"limits": "not applied (allow_unlimited = true)'* ]] || fail "GET /health" "engine.limits: $body"
pass "GET /health 200" "$(since "$t")" "$(tr -d ' \n' <<<"$body" | head -c 160)"

t=$(now)
main=$(ct systemctl show -P MainPID arizukod.service)
st=$(ct cat "/proc/$main/status")
grep -q '^NoNewPrivs:[[:space:]]*1' <<<"$st" || fail "hardening" "NoNewPrivs is not 1"
grep -q '^CapEff:[[:space:]]*0000000000000000' <<<"$st" || fail "hardening" "arizukod has capabilities"
grep -q '^Seccomp:[[:space:]]*2' <<<"$st" || fail "hardening" "no seccomp filter"
[[ $(ct stat -c %U "/proc/$main") == arizuko ]] || fail "hardening" "arizukod does not run as arizuko"
status=$(ct systemctl show -P StatusText arizukod.service)
score=$(ct systemd-analyze security --no-pager arizukod.service 2>/dev/null | sed -n 's/^→ Overall exposure level for arizukod.service: //p')
pass "arizukod confined" "$(since "$t")" "user arizuko, no caps, NoNewPrivs, seccomp; exposure $score; STATUS=$status"

t=$(now)
ct useradd -m -G arizuko alice
ct useradd -m mallory
out=$(ct runuser -u alice -- curl -sS --max-time 20 --unix-socket "$API_SOCK" -o /dev/null -w '%{http_code}' http://d/health 2>&1) || true
[[ $out == 200 ]] || fail "group member" "alice (group arizuko) got: $out"
out=$(ct runuser -u mallory -- curl -sS --max-time 20 --unix-socket "$API_SOCK" -o /dev/null -w '%{http_code}' http://d/health 2>&1) || true
[[ $out != 200 ]] || fail "other users" "mallory (not in group arizuko) got HTTP 200"
pass "API: group member yes, others no" "$(since "$t")" "alice 200; mallory: $(tr '\n' ' ' <<<"$out" | head -c 80)"

# arizukod doctor, run as the service runs (arizukod(8)).
t=$(now)
out=$(ct runuser -u arizuko -- env DATA_DIR=/var/lib/arizuko CONTAINER_HOST="unix://$PODMAN_SOCK" \
	arizukod doctor --check engine --check data-dir --check journald 2>&1) || fail "arizukod doctor" "$out"
pass "arizukod doctor (as arizuko)" "$(since "$t")" "$(grep -c '^ok' <<<"$out") checks ok: $(grep '^ok *engine' <<<"$out" | tr -s ' ' | cut -c1-90)"

# ---- a real turn -----------------------------------------------------------------------------

t=$(now)
out=$(ct arizukod groups add main 2>&1) || fail "groups add main" "$out"
CT_TIMEOUT=300 ct arizukod run --folder main --message "reply hi" >"$LOGS/run.json" 2>&1 ||
	fail "a turn through the daemon" "$(cat "$LOGS/run.json")"
run_id=$(sed -n 's/^  "id": "\([^"]*\)".*/\1/p' "$LOGS/run.json" | head -n 1)
result=$(sed -n 's/^  "result": "\([^"]*\)".*/\1/p' "$LOGS/run.json" | head -n 1)
[[ -n $run_id ]] || fail "a turn through the daemon" "no run id in: $(cat "$LOGS/run.json")"
pass "arizukod run --folder main (status ok)" "$(since "$t")" "run $run_id answered \"$result\""

t=$(now)
entries=$(ct journalctl --no-pager -u arizukod "ARIZUKO_RUN_ID=$run_id" -o cat 2>&1)
n=$(grep -c . <<<"$entries" || true)
[[ $n -gt 0 ]] || fail "journalctl -u arizukod ARIZUKO_RUN_ID=$run_id" "no entries"
folder_n=$(ct journalctl --no-pager -u arizukod ARIZUKO_FOLDER=main -o cat | grep -c . || true)
ok_n=$(ct journalctl --no-pager -u arizukod "ARIZUKO_RUN_ID=$run_id" ARIZUKO_STATUS=ok -o cat | grep -c . || true)
[[ $ok_n -gt 0 ]] || fail "journalctl ARIZUKO_STATUS=ok" "no entry of run $run_id with ARIZUKO_STATUS=ok: $entries"
pass "journalctl -u arizukod ARIZUKO_RUN_ID=" "$(since "$t")" "$n entries ($ok_n with ARIZUKO_STATUS=ok; ARIZUKO_FOLDER=main: $folder_n): $(tr '\n' '|' <<<"$entries" | head -c 120)"

# The agent ran in a container of the arizuko user's Podman, which is gone again. (Its name,
# not a run label: a container prepared ahead of its turn carries no run.)
t=$(now)
container=$(sed -n 's/^  "container": "\([^"]*\)".*/\1/p' "$LOGS/run.json" | head -n 1)
[[ -n $container ]] || fail "the turn's container" "no container in: $(cat "$LOGS/run.json")"
# The removal follows the answer (off the turn's critical path): wait for it, bounded.
for _ in $(seq 100); do
	events=$(ct journalctl --no-pager -u arizuko-podman -o cat | grep "name=$container[,)]" | sed -n 's/.* container \([a-z]*\) .*/\1/p' | tr '\n' ' ')
	[[ $events == *remove* ]] && break
	sleep 0.1
done
[[ $events == *start* && $events == *remove* ]] || fail "the turn's container" "podman events of run $run_id, after waiting for its removal: '$events'"
logs=$(ct sh -c 'ls /var/lib/arizuko/groups/main/logs/container-*.log 2>/dev/null | wc -l')
[[ $logs -gt 0 ]] || fail "the turn's container" "no /var/lib/arizuko/groups/main/logs/container-*.log"
left=$(ct runuser -u arizuko -- env XDG_RUNTIME_DIR=/run/arizuko/podman CONTAINER_HOST="unix://$PODMAN_SOCK" \
	podman --remote ps -a --filter "name=^$container\$" --format '{{.Names}}' 2>&1) || fail "the turn's container" "podman ps: $left"
[[ -z $left ]] || fail "the turn's container" "still there: $left"
pass "container of the turn: ran, removed" "$(since "$t")" "podman events: $events; $logs run log(s)"

# ---- sidecars: transient units of arizuko's own user manager ---------------------------------

# The daemon runs as arizuko in the system service: a group's sidecars become transient units
# of user@UID.service of the lingering arizuko (never of the system manager, which polkit
# would refuse), and run as arizuko. usd: systemctl for that manager, from root.
usd() { ct systemctl --no-pager --user -M arizuko@ "$@"; }
# sc_left prints the sidecar units arizuko's manager still has and the sidecar containers
# its Podman still has.
# A failing command prints its error, which fails the caller's check.
sc_left() {
	usd list-units --all --plain --no-legend 'arizuko-sc-*' 2>&1 | awk '{ print $1 }' || true
	ct runuser -u arizuko -- env XDG_RUNTIME_DIR=/run/arizuko/podman CONTAINER_HOST="unix://$PODMAN_SOCK" \
		podman --remote ps -a --filter 'name=^arizuko-sc-' --format '{{.Names}}' 2>&1 || true
}
# wait_unit_active: until the sidecar's unit is active, for at most 60 s.
wait_unit_active() {
	local s=
	for _ in $(seq 1 120); do
		s=$(usd is-active "$sc_unit" 2>&1 || true)
		[[ $s == active ]] && return 0
		sleep 0.5
	done
	fail "$1" "$sc_unit is '$s' after 60 s"
}

t=$(now)
arizuko_uid=$(ct id -u arizuko)
out=$(CT_TIMEOUT=180 ct arizukod image import-static --engine-socket "unix://$PODMAN_SOCK" \
	--tag localhost/arizuko-sidecar:test /root/sidecar 2>&1) || fail "sidecar image" "$out"
out=$(ct arizukod groups add tools --config \
	'{"sidecars":[{"name":"echo","image":"localhost/arizuko-sidecar:test"}]}' 2>&1) || fail "groups add tools" "$out"
inv=$(ct systemctl show -P InvocationID arizukod.service)
said=$(ct journalctl --no-pager -o cat -u arizukod "_SYSTEMD_INVOCATION_ID=$inv" | grep -E 'sidecars run' | tr '\n' ' ' || true)
[[ $said == *'sidecars run as systemd-user'* && $said != *'on the engine'* ]] || fail "sidecar mode" "the daemon says: '$said'"
ct test -S "/run/user/$arizuko_uid/systemd/private" || fail "sidecar mode" "no user manager socket /run/user/$arizuko_uid/systemd/private"
doc=$(ct runuser -u arizuko -- env ARIZUKO_MODE=system DATA_DIR=/var/lib/arizuko CONTAINER_HOST="unix://$PODMAN_SOCK" \
	arizukod doctor --check sidecars 2>&1) || fail "sidecar mode: doctor" "$doc"
[[ $doc == *"systemd-user: transient units of the user manager of uid $arizuko_uid"* ]] || fail "sidecar mode: doctor" "$doc"
# The sidecars' names carry the daemon's instance (arizuko-sc-<tag>-FOLDER-NAME), which
# doctor computes as the daemon does, from the same configuration and data directory.
sc_prefix=$(sed -n 's/.*sidecars are named \(arizuko-sc-[0-9a-f]*-\)FOLDER-NAME.*/\1/p' <<<"$doc")
[[ -n $sc_prefix ]] || fail "sidecar mode: doctor" "no sidecar names in: $doc"
sc_unit=${sc_prefix}tools-echo.service
pass "sidecars: arizuko's user manager" "$(since "$t")" "daemon: \"${said% }\"; user@$arizuko_uid.service $(ct systemctl is-active "user@$arizuko_uid.service"); doctor: $(grep sidecars <<<"$doc" | tr -s ' ' | cut -c1-110)"

# The agent calls the sidecar's echo tool through its socket; the unit's journal has what
# the sidecar printed.
t=$(now)
CT_TIMEOUT=180 ct arizukod run --folder tools --message 'mcp-socket echo.sock echo {"text":"hi from the sidecar"}' \
	>"$LOGS/run-sidecar.json" 2>&1 || fail "a turn with a sidecar" "$(cat "$LOGS/run-sidecar.json")"
grep -q 'hi from the sidecar' "$LOGS/run-sidecar.json" && grep -q '"status": "ok"' "$LOGS/run-sidecar.json" ||
	fail "a turn with a sidecar" "$(cat "$LOGS/run-sidecar.json")"
for _ in $(seq 1 20); do
	sc_log=$(ct journalctl --no-pager -o cat "_SYSTEMD_USER_UNIT=$sc_unit" 2>&1)
	[[ $sc_log == *'a session made 1 tool calls'* ]] && break
	sleep 0.25
done
[[ $sc_log == *'listening on /var/run/pub/arizuko/sidecars/echo.sock'* && $sc_log == *'a session made 1 tool calls'* ]] ||
	fail "the sidecar's journal" "journalctl _SYSTEMD_USER_UNIT=$sc_unit: $sc_log"
left=$(sc_left)
[[ -z $left ]] || fail "nothing left after the turn" "$left"
pass "turn calls the sidecar; its journal" "$(since "$t")" "journalctl _SYSTEMD_USER_UNIT=$sc_unit: $(grep -c . <<<"$sc_log") lines, the sidecar's: $(grep -o 'arizuko-example-sidecar: .*' <<<"$sc_log" | tr '\n' '|')"

# While a turn runs, its sidecar is an active unit of arizuko's manager, running as
# arizuko; after the turn nothing is left of it.
t=$(now)
CT_TIMEOUT=120 ct arizukod run --folder tools --message "sleep 8s" >"$LOGS/run-sidecar-sleep.json" 2>&1 &
turn_pid=$!
wait_unit_active "sidecar unit while the turn runs"
status=$(usd status "$sc_unit" 2>&1 || true)
printf '%s\n' "$status" >"$LOGS/sidecar-status.txt"
sc_user=$(usd show -P UID "$sc_unit" 2>&1 || true)
sc_main=$(usd show -P MainPID "$sc_unit" 2>&1 || true)
sc_cg=$(usd show -P ControlGroup "$sc_unit" 2>&1 || true)
owner=$(ct stat -c %U "/proc/$sc_main" 2>&1 || true)
[[ $owner == arizuko && $sc_cg == /user.slice/user-$arizuko_uid.slice/user@$arizuko_uid.service/* ]] ||
	fail "sidecar unit while the turn runs" "main process $sc_main of $owner (UID=$sc_user), cgroup $sc_cg"
wait "$turn_pid" || fail "a turn with a sidecar" "$(cat "$LOGS/run-sidecar-sleep.json")"
grep -q '"status": "ok"' "$LOGS/run-sidecar-sleep.json" || fail "a turn with a sidecar" "$(cat "$LOGS/run-sidecar-sleep.json")"
left=$(sc_left)
[[ -z $left ]] || fail "nothing left after the turn" "$left"
pass "sidecar unit active during the turn" "$(since "$t")" "$(grep -E '^ *Active:' <<<"$status" | sed 's/^ *//'); main pid $sc_main of $owner; $sc_cg"
say "systemctl --user -M arizuko@ status $sc_unit, while the turn ran:"
sed 's/^/    /' "$LOGS/sidecar-status.txt" | head -n 12 >&2
pass "after the turn: no unit, no container" "0.0" "systemctl --user -M arizuko@ list-units 'arizuko-sc-*' and podman ps -a: none"

# A sidecar that cannot start fails its turn, saying why; nothing is left of it.
t=$(now)
out=$(ct arizukod groups add broken --config \
	'{"sidecars":[{"name":"bad","image":"localhost/arizuko-sidecar:test","command":["-fail","boom: no API key"]}]}' 2>&1) ||
	fail "groups add broken" "$out"
CT_TIMEOUT=180 ct arizukod run --folder broken --message "reply hi" >"$LOGS/run-sidecar-bad.json" 2>&1 || true
bad_unit=${sc_prefix}broken-bad.service
bad_log=$(ct journalctl --no-pager -o cat "_SYSTEMD_USER_UNIT=$bad_unit" 2>&1)
[[ $bad_log == *'boom: no API key'* ]] || fail "a failing sidecar" "journalctl _SYSTEMD_USER_UNIT=$bad_unit: $bad_log"
grep -q "$bad_unit" "$LOGS/run-sidecar-bad.json" || fail "a failing sidecar" "the run does not name the unit: $(cat "$LOGS/run-sidecar-bad.json")"
left=$(sc_left)
[[ -z $left ]] || fail "a failing sidecar" "left: $left"
pass "a failing sidecar fails its turn" "$(since "$t")" "$(grep -o '"error": "[^"]*' "$LOGS/run-sidecar-bad.json" | head -n 1 | cut -c1-300)"

# A daemon killed during a turn leaves the sidecar's unit running (it lives in arizuko's
# user manager, not in arizukod.service). systemd restarts the daemon (Restart=on-failure);
# before any turn it stops what its killed predecessor left, then adopts the turn, whose
# sidecar starts afresh (a new invocation of the unit) and stops when the turn ends.
t=$(now)
CT_TIMEOUT=120 ct arizukod run --folder tools --message "sleep 20s" >"$LOGS/run-sidecar-kill.json" 2>&1 &
turn_pid=$!
wait_unit_active "sidecar unit before the kill"
old_main=$(usd show -P MainPID "$sc_unit" 2>&1 || true)
old_inv=$(usd show -P InvocationID "$sc_unit" 2>&1 || true)
d_pid=$(ct systemctl show -P MainPID arizukod.service)
ct systemctl kill -s KILL arizukod.service
state=
for _ in $(seq 1 120); do
	d_pid2=$(ct systemctl show -P MainPID arizukod.service)
	state=$(ct systemctl is-active arizukod.service || true)
	[[ $state == active && $d_pid2 != "$d_pid" && $d_pid2 != 0 ]] && break
	sleep 0.5
done
[[ $state == active && $d_pid2 != "$d_pid" ]] || fail "restart after SIGKILL" "arizukod.service is $state, MainPID $d_pid -> $d_pid2"
inv=$(ct systemctl show -P InvocationID arizukod.service)
for _ in $(seq 1 60); do
	said=$(ct journalctl --no-pager -o cat "_SYSTEMD_INVOCATION_ID=$inv" | grep -E 'leftover sidecar unit|adopting run|sidecar started' | tr '\n' '|' || true)
	[[ $said == *'stopped leftover sidecar unit'*'sidecar started'* ]] && break
	sleep 0.5
done
# The turn is adopted, or, when the kill came before its container started, run again:
# either way the old unit is stopped before the turn's sidecar starts anew.
[[ $said == *'stopped leftover sidecar unit'*'sidecar started'* ]] ||
	fail "nothing left after SIGKILL" "the restarted daemon says: '$said'"
! ct test -e "/proc/$old_main" || fail "nothing left after SIGKILL" "the killed daemon's sidecar (pid $old_main) still runs"
new_inv=$(usd show -P InvocationID "$sc_unit" 2>&1 || true)
[[ $new_inv != "$old_inv" ]] || fail "nothing left after SIGKILL" "$sc_unit is still invocation $old_inv"
t_ready=$(since "$t")
wait "$turn_pid" || fail "the adopted turn" "$(cat "$LOGS/run-sidecar-kill.json")"
grep -q '"status": "ok"' "$LOGS/run-sidecar-kill.json" || fail "the adopted turn" "$(cat "$LOGS/run-sidecar-kill.json")"
left=$(sc_left)
[[ -z $left ]] || fail "nothing left after SIGKILL" "after the adopted turn: $left"
pass "SIGKILL: old unit stopped, none left" "$(since "$t")" "arizukod pid $d_pid -> $d_pid2; ${t_ready}s: pid $old_main gone, invocation ${old_inv:0:8} -> ${new_inv:0:8}; daemon: ${said%|}; after the adopted turn: none"

# logind mounts /run/user/UID after a daemon started at boot may have: the daemon's view of
# /run/user (BindReadOnlyPaths= over ProtectHome=tmpfs) must receive such mounts.
t=$(now)
main=$(ct systemctl show -P MainPID arizukod.service)
ct mkdir -p /run/user/4242
ct mount -t tmpfs -o mode=0755,size=1m arizuko-systemtest /run/user/4242
ct touch /run/user/4242/probe
seen=$(ct nsenter -t "$main" -m stat -c %n /run/user/4242/probe 2>&1 || true)
ct umount /run/user/4242
ct rmdir /run/user/4242
[[ $seen == /run/user/4242/probe ]] || fail "a later runtime directory" "the daemon does not see a tmpfs mounted on /run/user/4242 after its start: $seen"
pass "daemon sees later /run/user mounts" "$(since "$t")" "tmpfs on /run/user/4242 after the start: visible in its namespace"

# ---- the Cockpit page -------------------------------------------------------------------------

cockpit_check

# ---- a user's own daemon (the user units) -----------------------------------------------------

# as_alice CMD...: CMD as alice, in her user manager's environment.
as_alice() {
	ct runuser -u alice -- env HOME=/home/alice XDG_RUNTIME_DIR="/run/user/$alice_uid" \
		DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$alice_uid/bus" "$@"
}
t=$(now)
alice_uid=$(ct id -u alice)
ct loginctl enable-linger alice
for _ in $(seq 1 60); do
	ct test -S "/run/user/$alice_uid/bus" && break
	sleep 0.5
done
ct install -d -o alice -g alice /home/alice/.config /home/alice/.config/containers /home/alice/.config/arizuko
ct install -o alice -g alice -m 0644 /etc/arizuko-systemtest/containers.conf /home/alice/.config/containers/containers.conf
# Her rootless Podman cannot apply the limits here either (cgroups v1).
ct sh -c 'printf "[limits]\nallow_unlimited = true\n" >/home/alice/.config/arizuko/arizukod.toml && chown alice:alice /home/alice/.config/arizuko/arizukod.toml'
out=$(as_alice systemctl --user enable --now podman.socket arizukod.socket 2>&1) || fail "user units" "$out"
out=$(as_alice arizukod image import-static --tag localhost/arizuko-agent:latest /usr/libexec/arizuko/agent 2>&1) ||
	fail "user units: image import" "$out"
user_sock=/run/user/$alice_uid/arizuko/arizukod.sock
as_alice curl -sS --max-time 60 --unix-socket "$user_sock" -o /dev/null http://d/health || fail "user units" "no answer on $user_sock"
for _ in $(seq 1 120); do
	state=$(as_alice systemctl --user is-active arizukod.service || true)
	[[ $state == activating ]] || break
	sleep 0.5
done
[[ $state == active ]] || fail "user units" "alice's arizukod.service is $state"
out=$(as_alice arizukod groups add main 2>&1) || fail "user units: groups add" "$out"
CT_TIMEOUT=300 as_alice arizukod run --folder main --message "reply hi" >"$LOGS/run-user.json" 2>&1 ||
	fail "user units: a turn" "$(cat "$LOGS/run-user.json")"
user_run=$(sed -n 's/^  "id": "\([^"]*\)".*/\1/p' "$LOGS/run-user.json" | head -n 1)
n=$(as_alice journalctl --user --no-pager -u arizukod "ARIZUKO_RUN_ID=$user_run" -o cat | grep -c . || true)
[[ $n -gt 0 ]] || fail "user units: journal" "journalctl --user -u arizukod ARIZUKO_RUN_ID=$user_run: no entries"
as_alice systemctl --user disable --now arizukod.socket arizukod.service podman.socket podman.service >/dev/null 2>&1
ct loginctl disable-linger alice
ct loginctl terminate-user alice 2>/dev/null || true
pass "user units: alice's own daemon" "$(since "$t")" "socket-activated in user@$alice_uid, run $user_run ok, $n journal entries"

# ---- upgrade ---------------------------------------------------------------------------------

# The same package with a higher version: an upgrade keeps the administrator's changes to
# the conffiles, restarts arizukod.service and leaves arizuko-podman.service (and so any
# running turn's container) alone.
t=$(now)
up=$RUN/root/upgrade
dpkg-deb -R "$DEB" "$up"
sed -i 's/^Version: .*/&+systemtest1/' "$up/DEBIAN/control"
up_version=$(sed -n 's/^Version: //p' "$up/DEBIAN/control")
dpkg-deb -b -Zgzip "$up" "$RUN/root/arizukod_upgrade.deb" >/dev/null
rm -rf "$up"
ct sed -i 's/^#max_running = 5$/max_running = 3/' /etc/arizuko/arizukod.toml
d_pid=$(ct systemctl show -P MainPID arizukod.service)
p_pid=$(ct systemctl show -P MainPID arizuko-podman.service)
CT_TIMEOUT=300 ct apt-get install -y -q /root/arizukod_upgrade.deb >"$LOGS/apt-upgrade.log" 2>&1 ||
	fail "upgrade" "$(tail -n 20 "$LOGS/apt-upgrade.log")"
# shellcheck disable=SC2016 # a dpkg-query format
[[ $(ct dpkg-query -W -f '${Version}' arizukod) == "$up_version" ]] || fail "upgrade" "arizukod is not at $up_version"
ct grep -q '^max_running = 3$' /etc/arizuko/arizukod.toml || fail "upgrade keeps conffiles" "the change to arizukod.toml is gone"
d_pid2=$(ct systemctl show -P MainPID arizukod.service)
p_pid2=$(ct systemctl show -P MainPID arizuko-podman.service)
[[ $(ct systemctl is-active arizukod.service) == active && $d_pid2 != "$d_pid" && $d_pid2 != 0 ]] ||
	fail "upgrade restarts arizukod" "arizukod.service: MainPID $d_pid -> $d_pid2, $(ct systemctl is-active arizukod.service)"
[[ $p_pid2 == "$p_pid" ]] || fail "upgrade leaves podman alone" "arizuko-podman.service MainPID $p_pid -> $p_pid2"
pass "upgrade to $up_version" "$(since "$t")" "conffile change kept; arizukod pid $d_pid -> $d_pid2; podman pid $p_pid kept"

t=$(now)
CT_TIMEOUT=300 ct arizukod run --folder main --message "reply hi" >"$LOGS/run2.json" 2>&1 ||
	fail "a turn after the upgrade" "$(cat "$LOGS/run2.json")"
pass "a turn after the upgrade (status ok)" "$(since "$t")" "run $(sed -n 's/^  "id": "\([^"]*\)".*/\1/p' "$LOGS/run2.json" | head -n 1)"

# ---- remove and purge ------------------------------------------------------------------------

# procs_of_package prints the processes of the package: arizukod, and everything of the
# arizuko user (its Podman, conmon, the pause process, agent containers).
procs_of_package() {
	# shellcheck disable=SC2016 # expanded inside the container
	ct sh -c 'uid=$(id -u arizuko 2>/dev/null || echo none)
		for d in /proc/[0-9]*; do
			comm=$(cat $d/comm 2>/dev/null) || continue
			u=$(awk "/^Uid:/ { print \$2 }" $d/status 2>/dev/null)
			if [ "$comm" = arizukod ] || [ "$u" = "$uid" ]; then echo "${d#/proc/} $comm"; fi
		done'
}

t=$(now)
before=$(procs_of_package | wc -l)
CT_TIMEOUT=300 ct apt-get remove -y -q arizukod >"$LOGS/apt-remove.log" 2>&1 || fail "apt-get remove" "$(tail -n 20 "$LOGS/apt-remove.log")"
sleep 1
left=$(procs_of_package)
[[ -z $left ]] || fail "nothing runs after remove" "still running: $left"
for u in arizukod.socket arizukod.service arizuko-podman.socket arizuko-podman.service; do
	s=$(ct systemctl is-active "$u" 2>&1 || true)
	[[ $s == inactive || $s == failed ]] || fail "nothing runs after remove" "$u is $s"
done
! ct test -e /var/lib/systemd/linger/arizuko || fail "remove" "arizuko still lingers"
ct test -d /var/lib/arizuko/groups/main || fail "remove keeps data" "/var/lib/arizuko/groups/main is gone"
ct test -f /etc/arizuko/arizukod.toml || fail "remove keeps conffiles" "/etc/arizuko/arizukod.toml is gone"
pass "apt-get remove: nothing runs" "$(since "$t")" "$before processes before, 0 after; units inactive; data and config kept"

t=$(now)
ct rm -rf /etc/systemd/system/arizuko-podman.service.d /etc/systemd/system/arizukod.service.d /etc/arizuko-systemtest
CT_TIMEOUT=300 ct apt-get purge -y -q arizukod >"$LOGS/apt-purge.log" 2>&1 || fail "apt-get purge" "$(tail -n 20 "$LOGS/apt-purge.log")"
for p in /var/lib/arizuko /etc/arizuko /run/arizuko; do
	! ct test -e "$p" || fail "purge" "$p is still there: $(ct ls -la "$p" 2>&1 | head -n 5)"
done
for l in /etc/systemd/system/sockets.target.wants/arizukod.socket /etc/systemd/system/sockets.target.wants/arizuko-podman.socket; do
	! ct test -L "$l" || fail "purge" "$l is still there"
done
pass "apt-get purge: data and config gone" "$(since "$t")" "user arizuko kept ($(ct getent passwd arizuko | cut -d: -f1,3))"

summary
