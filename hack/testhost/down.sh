#!/usr/bin/env bash
# down.sh: stop everything hack/testhost/up.sh started (run as root).
#
# Removes the engines' containers, stops the services by pidfile, unmounts
# only mounts below the test host's directory (each made private first, so the
# host's /dev/pts, /tmp and friends are never touched) and removes the sockets.
# The debootstrap chroot, the engines' image storage and the installed packages
# stay as a cache; --purge deletes them too. Safe to run when nothing is up.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

usage() {
	cat <<EOF
usage: $0 [--purge]
Stops the test host. --purge also deletes $TESTHOST_DIR (chroot, image storage),
the user $TESTHOST_USER when up.sh created it, and the packages up.sh installed.
EOF
}

# remove_containers NAME SOCK force-removes every container of a private engine.
# Every container there is ours: the engines and their storage are private.
remove_containers() {
	local name=$1 sock=$2 ids id
	ping_ok "$sock" || return 0
	ids=$(API_TIMEOUT=10 api "$sock" GET '/containers/json?all=1' | jq -r '.[].Id') || {
		say "warning: cannot list the containers of $name"
		return 0
	}
	for id in $ids; do
		say "removing container ${id:0:12} of $name"
		API_TIMEOUT=60 api "$sock" DELETE "/containers/$id?force=1&v=1" >/dev/null ||
			say "warning: cannot remove container ${id:0:12} of $name"
	done
}

# ancestors prints this script's pid and those of its ancestors.
ancestors() {
	local pid=$$
	while [[ $pid =~ ^[0-9]+$ && $pid -gt 1 ]]; do
		printf '%s\n' "$pid"
		pid=$(proc_stat_field "$pid" 4) || break
	done
}

# leftover_pids prints processes of the test host that survived their service:
# anything rooted in the test host's directory (the podman 5 chroot), anything
# of the rootless test user, the processes of our docker containers, and
# engine helpers (conmon, shims) whose command line names the test host's
# directory.
leftover_pids() {
	local uid=$1 self pid comm
	self=" $(ancestors | tr '\n' ' ') "
	{
		find /proc -mindepth 2 -maxdepth 2 -name root -lname "$TESTHOST_DIR/*" 2>/dev/null | cut -d/ -f3
		if [[ -n $uid ]]; then
			grep -l "^Uid:[[:space:]]*${uid}[[:space:]]" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3
		fi
		grep -l ':/arizuko-testhost-docker/' /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3
		grep -lF "$TESTHOST_DIR/" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | while read -r pid; do
			read -r comm 2>/dev/null <"/proc/$pid/comm" || continue
			case $comm in
			conmon | containerd-shim* | podman | dockerd | containerd | runc | catatonit | slirp4netns | docker-proxy)
				printf '%s\n' "$pid"
				;;
			esac
		done
	} | sort -un | while read -r pid; do
		if [[ $self != *" $pid "* ]] && proc_alive "$pid"; then printf '%s\n' "$pid"; fi
	done
}

sweep_leftovers() {
	local uid=$1
	local -a pids
	mapfile -t pids < <(leftover_pids "$uid")
	[[ ${#pids[@]} -gt 0 ]] || return 0
	say "stopping leftover processes: ${pids[*]}"
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait_gone 5 "${pids[@]}" && return 0
	mapfile -t pids < <(leftover_pids "$uid")
	[[ ${#pids[@]} -gt 0 ]] || return 0
	say "killing leftover processes: ${pids[*]}"
	kill -KILL "${pids[@]}" 2>/dev/null || true
	wait_gone 5 "${pids[@]}" || say "warning: still running: ${pids[*]}"
}

remove_marked_dir() {
	local marker=$STATEDIR/$1 dir=$2
	[[ -f $marker ]] || return 0
	if [[ -d $dir ]]; then
		assert_no_mounts_under "$dir"
		rm -rf --one-file-system "$dir"
	fi
	rm -f "$marker"
}

# remove_empty_dirs MARKER DIR...: rmdir the folders (only when empty) an
# engine made outside the test host's directory, when they were absent before.
remove_empty_dirs() {
	local marker=$STATEDIR/$1
	shift
	[[ -f $marker ]] || return 0
	rmdir "$@" 2>/dev/null || true
	[[ -e ${*: -1} ]] || rm -f "$marker"
}

# stop_pause_process ends the rootless podman's user-namespace keeper
# (catatonit -P), which outlives the API service.
stop_pause_process() {
	local uid=$1 f pid
	f=/run/user/$uid/libpod/tmp/pause.pid
	[[ -n $uid && -f $f ]] || return 0
	# The file has no trailing newline.
	read -r pid <"$f" || [[ -n ${pid:-} ]] || return 0
	if [[ $pid =~ ^[0-9]+$ ]] && proc_alive "$pid" &&
		[[ $(awk '/^Uid:/ { print $2 }' "/proc/$pid/status") == "$uid" ]]; then
		say "stopping the rootless pause process (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		wait_gone 5 "$pid" || kill -KILL "$pid" 2>/dev/null || true
	fi
}

remove_packages() {
	local -a pkgs=()
	local p
	[[ -f $STATEDIR/installed-packages ]] || return 0
	while read -r p; do
		[[ -n $p ]] && pkgs+=("$p")
	done <"$STATEDIR/installed-packages"
	[[ ${#pkgs[@]} -gt 0 ]] || return 0
	say "removing the packages up.sh installed: ${pkgs[*]}"
	if command -v apt-get >/dev/null; then
		env DEBIAN_FRONTEND=noninteractive apt-get -y -q remove "${pkgs[@]}" ||
			say "warning: apt-get remove failed"
	elif command -v dnf >/dev/null; then
		dnf remove -y "${pkgs[@]}" || say "warning: dnf remove failed"
	fi
}

main() {
	local purge=
	case ${1:-} in
	--purge) purge=1 ;;
	-h | --help)
		usage
		return 0
		;;
	"") ;;
	*)
		usage >&2
		return 2
		;;
	esac
	require_root
	check_layout
	local uid
	uid=$(rootless_uid || true)
	if [[ ! -d $TESTHOST_DIR ]]; then
		say "nothing to stop: $TESTHOST_DIR does not exist"
		return 0
	fi
	rm -f "$ENV_FILE"

	bash "$HERE/../kube/down.sh" || say "warning: hack/kube/down.sh failed"
	remove_containers podman4 "$P4_SOCK"
	remove_containers podman4-gvisor "$PG_SOCK"
	remove_containers podman5 "$P5_SOCK"
	remove_containers docker "$DK_SOCK"
	[[ -z $uid ]] || remove_containers podman-rootless "$(rootless_sock "$uid")"

	stop_service systemd-user
	if [[ -f $STATEDIR/started-user-at-0 ]]; then
		systemctl stop user@0.service || say "warning: cannot stop user@0.service"
		rm -f "$STATEDIR/started-user-at-0"
	fi
	stop_service podman-rootless
	stop_pause_process "$uid"
	stop_service podman5
	stop_service dockerd 30
	stop_service containerd
	stop_service podman4
	stop_service podman4-gvisor
	stop_service journald
	sweep_leftovers "$uid"

	unmount_tree "$TESTHOST_DIR"
	rm -f "$P4_SOCK" "$PG_SOCK" "$P5_SOCK" "$DK_SOCK"
	if [[ -n $uid && -f $STATEDIR/mounted-rootless-runtime-dir ]]; then
		unmount_tree "/run/user/$uid"
		rmdir "/run/user/$uid" 2>/dev/null || true
		rm -f "$STATEDIR/mounted-rootless-runtime-dir"
	fi
	if [[ -f $STATEDIR/created-run-systemd-system ]]; then
		rmdir "$SYSTEMD_MARKER_DIR" 2>/dev/null || say "warning: $SYSTEMD_MARKER_DIR is not empty, leaving it"
		rm -f "$STATEDIR/created-run-systemd-system"
	fi
	remove_empty_dirs created-run-docker /run/docker/plugins /run/docker
	remove_empty_dirs created-run-containerd /run/containerd/s /run/containerd
	remove_marked_dir created-root-runtime-dir "$SYSTEMD_RUNTIME_DIR"
	remove_cgroups arizuko-testhost-docker
	if [[ -f $STATEDIR/created-systemd-cgroups ]]; then
		remove_cgroups user.slice
		compgen -G '/sys/fs/cgroup/*/user.slice' >/dev/null || rm -f "$STATEDIR/created-systemd-cgroups"
	fi
	remove_marked_dir created-journal-dir "$JOURNAL_DIR"

	if [[ -n $purge ]]; then
		assert_no_mounts_under "$TESTHOST_DIR"
		if [[ -f $STATEDIR/created-user && -n $uid ]]; then
			say "deleting user $TESTHOST_USER and its home"
			userdel -r "$TESTHOST_USER" 2>/dev/null || userdel -r -f "$TESTHOST_USER" ||
				say "warning: cannot delete user $TESTHOST_USER"
		fi
		if [[ -f $STATEDIR/created-var-lib-containers ]]; then
			rm -f /var/lib/containers/cache/blob-info-cache-v1.boltdb
			rmdir /var/lib/containers/cache /var/lib/containers 2>/dev/null || true
		fi
		remove_packages
		rm -rf "${RUNSC_WRAPPER%/*}"
		say "deleting $TESTHOST_DIR"
		rm -rf --one-file-system "$TESTHOST_DIR"
	fi
	say "down"
}

main "$@"
