# shellcheck shell=bash disable=SC2034
# lib.sh: paths and helpers shared by up.sh, down.sh and smoke.sh (sourced, never run).
#
# Everything the test host owns lives under one private directory, so the
# machine's own podman/docker storage and configuration are never touched.

TESTHOST_DIR=${ARIZUKO_TESTHOST_DIR:-/var/tmp/arizuko-testhost}
TESTHOST_USER=${ARIZUKO_TESTHOST_USER:-arizukotest}
# The parent of the tests' own TMPDIR: hack/test.sh makes a fresh one in it per run and
# checks that the tests left it empty. Short, because the tests' sockets live under it
# and a socket's path holds 107 bytes.
TESTHOST_TESTS_TMP=${ARIZUKO_TESTHOST_TESTS_TMP:-/var/tmp/azt}
# Host paths that appear at the same path inside the podman 5 chroot, so bind
# mounts of host directories (Go's t.TempDir() lives in $TMPDIR, else /tmp) resolve
# there too.
TESTHOST_SHARED_PATHS=${ARIZUKO_TESTHOST_SHARED_PATHS:-/tmp $TESTHOST_TESTS_TMP}
TESTHOST_WAIT=${ARIZUKO_TESTHOST_WAIT:-60}
TESTHOST_SUITE=${ARIZUKO_TESTHOST_SUITE:-trixie}

CHROOT=$TESTHOST_DIR/$TESTHOST_SUITE
CHROOT_MARKER=$CHROOT/.arizuko-testhost-ready
RUNDIR=$TESTHOST_DIR/run
PIDDIR=$TESTHOST_DIR/pids
LOGDIR=$TESTHOST_DIR/logs
STATEDIR=$TESTHOST_DIR/state
ENV_FILE=$TESTHOST_DIR/env

P4_DIR=$TESTHOST_DIR/podman4
P4_SOCK=$P4_DIR/podman.sock
# podman4-gvisor: a second Podman 4.3 service whose own runtime is gVisor's runsc
# (Podman's API has no runtime per container). Its runroot is $RUNDIR/pg: Podman
# refuses one longer than 50 bytes.
PG_DIR=$TESTHOST_DIR/podman4-gvisor
PG_SOCK=$PG_DIR/podman.sock
# The runsc wrapper every engine registers (contrib/gvisor/runsc-arizuko): on the host
# for podman4, podman4-gvisor and rootless Podman, at the same path in the chroot for
# podman 5.
RUNSC_WRAPPER=/usr/local/libexec/arizuko-testhost/runsc-arizuko
# Rootless Podman on cgroups v1 has no cgroups to give runsc: its wrapper adds
# --ignore-cgroups (its containers have no limits there anyway).
RUNSC_WRAPPER_ROOTLESS=/usr/local/libexec/arizuko-testhost/runsc-arizuko-rootless
P5_DIR=$TESTHOST_DIR/podman5
P5_SOCK=$P5_DIR/podman.sock
DK_DIR=$TESTHOST_DIR/docker
DK_SOCK=$DK_DIR/docker.sock
CTRD_SOCK=$RUNDIR/containerd/containerd.sock

SYSTEMD_RUNTIME_DIR=/run/user/0
USER_MANAGER_CGROUP=/user.slice/user-0.slice/user@0.service
JOURNAL_DIR=/run/systemd/journal
SYSTEMD_MARKER_DIR=/run/systemd/system

# The services see only the distro's binaries (there is a docker v28 client in
# /usr/local/bin here, and nothing from /usr/local must shadow runc & co).
CLEAN_PATH=/usr/sbin:/usr/bin:/sbin:/bin

# shellcheck source=hack/pkg.sh
. "$(dirname "${BASH_SOURCE[0]}")/../pkg.sh"

say() { printf 'testhost: %s\n' "$*" >&2; }
die() {
	printf 'testhost: error: %s\n' "$*" >&2
	exit 1
}

# no_arguments "$@": the check of a script that takes no argument but -h/--help, which
# prints its usage; anything else prints the usage and fails (exit 2).
no_arguments() {
	case ${1:-} in
	-h | --help)
		usage
		exit 0
		;;
	"") ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

require_root() {
	[[ $(id -u) -eq 0 ]] || die "must run as root (it starts container engines and mounts the chroot)"
}

# check_layout refuses directory layouts that could make a mount or an
# `rm -rf` reach outside the test host's own directory.
check_layout() {
	[[ $TESTHOST_DIR =~ ^/[A-Za-z0-9._/-]+$ ]] ||
		die "ARIZUKO_TESTHOST_DIR=$TESTHOST_DIR: must be an absolute path of letters, digits, '.', '_', '-', '/'"
	[[ $TESTHOST_DIR != */ && $TESTHOST_DIR != *//* && $TESTHOST_DIR != */./* && $TESTHOST_DIR != */../* && $TESTHOST_DIR != */.. ]] ||
		die "ARIZUKO_TESTHOST_DIR=$TESTHOST_DIR: must be a normalized path"
	case $TESTHOST_DIR in
	/ | /bin* | /boot* | /dev* | /etc* | /lib* | /proc* | /run | /sbin* | /sys* | /usr* | /var | /var/lib | /home | /root)
		die "ARIZUKO_TESTHOST_DIR=$TESTHOST_DIR: refusing a system directory"
		;;
	esac
	local p
	for p in $TESTHOST_SHARED_PATHS; do
		[[ $p =~ ^/[A-Za-z0-9._/-]+$ && $p != */ ]] ||
			die "ARIZUKO_TESTHOST_SHARED_PATHS: $p must be an absolute normalized path"
		if [[ $TESTHOST_DIR == "$p" || $TESTHOST_DIR == "$p"/* || $p == "$TESTHOST_DIR"/* ]]; then
			die "ARIZUKO_TESTHOST_DIR=$TESTHOST_DIR and shared path $p overlap; the chroot would mount itself"
		fi
	done
}

# mounts_under BASE prints every mount point at or below BASE.
mounts_under() {
	awk -v b="$1" '$5 == b || index($5, b "/") == 1 { print $5 }' /proc/self/mountinfo
}

is_mountpoint() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# unmount_tree BASE unmounts everything mounted at or below BASE. Each topmost
# mount is first made recursively private: that changes only our copies, and
# an unmount of a private mount cannot propagate to a peer outside BASE (the
# classic way to lose the host's /dev/pts after `umount -R` of a chroot).
unmount_tree() {
	local base=$1 mp tries=0
	local -a tops
	while :; do
		mapfile -t tops < <(mounts_under "$base" | LC_ALL=C sort -u |
			awk '{ for (k in kept) if (index($0, k "/") == 1) next; kept[$0] = 1; print }')
		[[ ${#tops[@]} -gt 0 ]] || return 0
		tries=$((tries + 1))
		[[ $tries -le 50 ]] || die "could not unmount everything under $base"
		for mp in "${tops[@]}"; do
			mount --make-rprivate "$mp" || die "cannot make $mp private; refusing to unmount it"
			umount -R "$mp" 2>/dev/null || umount -R -l "$mp" || die "cannot unmount $mp"
		done
	done
}

assert_no_mounts_under() {
	local left
	left=$(mounts_under "$1")
	[[ -z $left ]] || die "still mounted under $1, refusing to delete it: $left"
}

# Services are background processes with a pidfile in $PIDDIR. Line 1 is the
# pid, line 2 a string its command line must contain, so a stale pidfile (after
# a reboot the pid may belong to anyone) never leads to killing a stranger.

# proc_stat_field PID N prints field N (3 = state, 4 = ppid) of /proc/PID/stat.
proc_stat_field() {
	local line
	read -r line 2>/dev/null <"/proc/$1/stat" || return 1
	line=${line##*) }
	local -a fields
	read -r -a fields <<<"$line"
	printf '%s\n' "${fields[$2 - 3]}"
}

proc_alive() {
	local state
	state=$(proc_stat_field "$1" 3) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# descendants PID prints the pids of every descendant of PID.
descendants() {
	local d line pid ppid
	local -A kids=()
	for d in /proc/[0-9]*; do
		read -r line 2>/dev/null <"$d/stat" || continue
		pid=${line%% *}
		line=${line##*) }
		line=${line#* }
		ppid=${line%% *}
		kids[$ppid]+=" $pid"
	done
	local -a queue=("$1")
	while [[ ${#queue[@]} -gt 0 ]]; do
		pid=${queue[0]}
		queue=("${queue[@]:1}")
		for d in ${kids[$pid]:-}; do
			printf '%s\n' "$d"
			queue+=("$d")
		done
	done
}

proc_cmdline() {
	tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null
}

# service_pid NAME prints the pid of service NAME when it is alive and ours.
service_pid() {
	local f=$PIDDIR/$1.pid pid token
	[[ -f $f ]] || return 1
	{
		read -r pid
		read -r token
	} <"$f" || true
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	proc_alive "$pid" || return 1
	[[ $(proc_cmdline "$pid") == *"$token"* ]] || return 1
	printf '%s\n' "$pid"
}

# wait_gone SECONDS PID...: wait until none of PID is alive; false on timeout.
wait_gone() {
	local secs=$1 i p alive
	shift
	for ((i = 0; i <= secs * 10; i++)); do
		alive=
		for p in "$@"; do
			if proc_alive "$p"; then
				alive=1
				break
			fi
		done
		[[ -n $alive ]] || return 0
		sleep 0.1
	done
	return 1
}

# stop_service NAME [GRACE]: SIGTERM, wait up to GRACE seconds, then SIGKILL;
# then the same for whatever the service started that is still its descendant
# (the rootless podman service runs as a parent and a child in the user
# namespace, and the parent may exit first).
stop_service() {
	local name=$1 grace=${2:-20} pid p
	local -a kids=() left=()
	if pid=$(service_pid "$name"); then
		say "stopping $name (pid $pid)"
		mapfile -t kids < <(descendants "$pid")
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_gone "$grace" "$pid"; then
			say "$name did not exit within ${grace}s, sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			wait_gone 5 "$pid" || true
		fi
		for p in "${kids[@]}"; do
			if proc_alive "$p"; then left+=("$p"); fi
		done
		if [[ ${#left[@]} -gt 0 ]]; then
			kill -TERM "${left[@]}" 2>/dev/null || true
			wait_gone 5 "${left[@]}" || kill -KILL "${left[@]}" 2>/dev/null || true
		fi
	fi
	rm -f "$PIDDIR/$name.pid"
}

# api SOCKET METHOD PATH [curl args...] talks HTTP to an engine's API socket.
api() {
	local sock=$1 method=$2 path=$3
	shift 3
	curl -sS --fail-with-body --max-time "${API_TIMEOUT:-30}" --unix-socket "$sock" -X "$method" "$@" "http://d$path"
}

ping_ok() {
	[[ -S $1 ]] || return 1
	[[ $(curl -sS --max-time 3 --unix-socket "$1" http://d/_ping 2>/dev/null) == OK ]]
}

rootless_uid() {
	id -u "$TESTHOST_USER" 2>/dev/null
}

rootless_sock() {
	printf '/run/user/%s/podman/podman.sock\n' "$1"
}

# pidfile_alive NAME: the pid in NAME's pidfile is alive (its command line may
# not show the token yet: it is checked right after the fork).
pidfile_alive() {
	local pid
	[[ -f $PIDDIR/$1.pid ]] || return 1
	read -r pid <"$PIDDIR/$1.pid" || true
	[[ $pid =~ ^[0-9]+$ ]] && proc_alive "$pid"
}

# start_service NAME TOKEN CMD... runs CMD in its own session with a pidfile
# and a log file, unless NAME is already running.
start_service() {
	local name=$1 token=$2 log=$LOGDIR/$1.log pid
	shift 2
	if service_pid "$name" >/dev/null; then
		return 0
	fi
	[[ ! -f $log ]] || mv -f "$log" "$log.1"
	(
		[[ -z ${SERVICE_CGROUP:-} ]] || enter_cgroup "$SERVICE_CGROUP"
		cd / && exec setsid "$@" </dev/null >"$log" 2>&1
	) &
	pid=$!
	printf '%s\n%s\n' "$pid" "$token" >"$PIDDIR/$name.pid"
	say "started $name (pid $pid, log $log)"
}

fail_service() {
	local name=$1
	shift
	printf 'testhost: error: %s: %s\n' "$name" "$*" >&2
	if [[ -f $LOGDIR/$name.log ]]; then
		printf -- '--- last lines of %s ---\n' "$LOGDIR/$name.log" >&2
		tail -n 40 "$LOGDIR/$name.log" >&2
		printf -- '---\n' >&2
	fi
	exit 1
}

# wait_for NAME CHECK... polls CHECK until it succeeds, the service dies or
# $TESTHOST_WAIT seconds pass.
wait_for() {
	local name=$1 i
	shift
	for ((i = 0; i < TESTHOST_WAIT * 5; i++)); do
		if "$@"; then
			[[ $i -lt 25 ]] || say "$name took $((i / 5))s to become ready"
			return 0
		fi
		pidfile_alive "$name" || fail_service "$name" "exited before it was ready"
		sleep 0.2
	done
	fail_service "$name" "not ready after ${TESTHOST_WAIT}s"
}

# enter_cgroup PATH moves the calling (sub)shell into cgroup PATH of every
# hierarchy but cpuset (whose new cgroups have no cpus until configured).
enter_cgroup() {
	local path=$1 top
	if [[ -f /sys/fs/cgroup/cgroup.procs ]]; then
		mkdir -p "/sys/fs/cgroup$path"
		echo "$BASHPID" >"/sys/fs/cgroup$path/cgroup.procs"
		return
	fi
	for top in /sys/fs/cgroup/*; do
		[[ -f $top/cgroup.procs && $top != */cpuset && ! -L $top ]] || continue
		mkdir -p "$top$path"
		echo "$BASHPID" >"$top$path/cgroup.procs"
	done
}

# remove_cgroups NAME... removes the (empty) cgroups NAME at the top of every
# hierarchy, children first; a cgroup that still has processes stays.
remove_cgroups() {
	local name top
	for name in "$@"; do
		for top in /sys/fs/cgroup/*/"$name"; do
			[[ -d $top ]] || continue
			find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
	done
}
