#!/usr/bin/env bash
# up.sh: install and start the arizukod test host (idempotent, run as root).
#
# Starts, each with private storage and configuration under
# ${ARIZUKO_TESTHOST_DIR:-/var/tmp/arizuko-testhost}:
#   podman4          Debian 12 podman 4.3, rootful API service
#   podman4-gvisor   the same podman 4.3 with gVisor's runsc as its own runtime
#   podman5          Debian 13 podman 5.x in a debootstrap chroot, rootful API service
#   docker           Debian 12 docker.io dockerd with its own containerd
#   podman-rootless  podman 4.3 API service of the unprivileged user arizukotest
# plus a standalone systemd-journald and a systemd user manager for root, and a
# Kubernetes cluster (hack/kube/up.sh: one real node, 100 kwok nodes).
# Writes $ARIZUKO_TESTHOST_DIR/env (source it) and fails when anything does not
# come up: in CI a missing engine is a failure, never a skip.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

usage() {
	cat <<EOF
usage: $0
Installs the needed distro packages and starts the test host engines.
Environment: ARIZUKO_TESTHOST_DIR (default /var/tmp/arizuko-testhost),
ARIZUKO_TESTHOST_USER (default arizukotest), ARIZUKO_TESTHOST_SHARED_PATHS
(host paths visible at the same path in the podman 5 chroot, default /tmp and
ARIZUKO_TESTHOST_TESTS_TMP), ARIZUKO_TESTHOST_TESTS_TMP (the parent of the
TMPDIR hack/test.sh gives the tests, default /var/tmp/azt),
ARIZUKO_TESTHOST_MIRROR (Debian mirror for the chroot), ARIZUKO_TESTHOST_WAIT
(seconds to wait for each service, default 60).
EOF
}

DEB_PACKAGES=(podman runc runsc uidmap slirp4netns fuse-overlayfs catatonit conmon
	busybox-static socat debootstrap debian-archive-keyring docker.io containerd
	systemd systemd-container curl jq util-linux passwd ca-certificates
	etcd-server containernetworking-plugins openssl iproute2)
RPM_PACKAGES=(podman runc shadow-utils slirp4netns fuse-overlayfs catatonit conmon
	busybox socat debootstrap moby-engine containerd systemd systemd-container
	curl jq util-linux etcd containernetworking-plugins openssl iproute)

# install_packages installs what is missing; `apt-get update` only runs when
# the package lists are missing or an install from them failed.
install_packages() {
	local -a missing=()
	local p
	if command -v apt-get >/dev/null; then
		local installed
		installed=" $(dpkg-query -W -f='${db:Status-Abbrev}${Package} ' "${DEB_PACKAGES[@]}" 2>/dev/null |
			grep -o 'ii *[^ ]*' | sed 's/^ii *//' | tr '\n' ' ') " || true
		for p in "${DEB_PACKAGES[@]}"; do
			[[ $installed == *" $p "* ]] || missing+=("$p")
		done
		# The MCP SDK test runs the official TypeScript client: Node.js and npm, unless the
		# machine has them from elsewhere already.
		command -v node >/dev/null || missing+=(nodejs)
		command -v npm >/dev/null || missing+=(npm)
		[[ ${#missing[@]} -gt 0 ]] || return 0
		say "installing ${#missing[@]} packages and their dependencies (2 to 6 minutes on a bare machine): ${missing[*]}"
		local policy=/usr/sbin/policy-rc.d own_policy=
		if [[ ! -e $policy ]]; then
			# Keep package scripts from starting the system's own docker/containerd.
			printf '#!/bin/sh\nexit 101\n' >"$policy"
			chmod 0755 "$policy"
			own_policy=1
		fi
		local rc=0
		pkg_install "${missing[@]}" || rc=$?
		[[ -z $own_policy ]] || rm -f "$policy"
		[[ $rc -eq 0 ]] || die "apt-get could not install: ${missing[*]}"
	elif command -v dnf >/dev/null; then
		for p in "${RPM_PACKAGES[@]}"; do
			rpm -q "$p" >/dev/null 2>&1 || missing+=("$p")
		done
		command -v node >/dev/null || missing+=(nodejs)
		command -v npm >/dev/null || missing+=(npm)
		[[ ${#missing[@]} -gt 0 ]] || return 0
		say "installing ${#missing[@]} packages and their dependencies (2 to 6 minutes on a bare machine): ${missing[*]}"
		pkg_install "${missing[@]}" || die "dnf could not install: ${missing[*]}"
	else
		die "no apt-get or dnf: install ${DEB_PACKAGES[*]} by hand"
	fi
	mkdir -p "$STATEDIR"
	printf '%s\n' "${missing[@]}" >>"$STATEDIR/installed-packages"
}

# debian_mirror prints the Debian mirror named in the machine's apt sources.
debian_mirror() {
	local uri
	if [[ -n ${ARIZUKO_TESTHOST_MIRROR:-} ]]; then
		printf '%s\n' "$ARIZUKO_TESTHOST_MIRROR"
		return
	fi
	if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
		uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' \
			/etc/apt/sources.list.d/debian.sources)
	fi
	if [[ -z ${uri:-} && -r /etc/apt/sources.list ]]; then
		uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/ && $i !~ /security/) { print $i; exit } }' \
			/etc/apt/sources.list)
	fi
	printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

# containers_conf RUNTIME RUNSC [TMP_DIR NETWORK_DIR]: the configuration of a test
# Podman whose own runtime is RUNTIME, with gVisor registered as "runsc" through the
# wrapper RUNSC (contrib/gvisor/runsc-arizuko: runsc with --network=none --host-uds=all).
containers_conf() {
	cat <<EOF
# Written by hack/testhost/up.sh: private configuration of a test engine.
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
log_driver = "k8s-file"

[engine]
runtime = "$1"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
	if [[ -n ${3:-} ]]; then
		printf 'tmp_dir = "%s"\n\n[network]\nnetwork_config_dir = "%s"\n' "$3" "$4"
	fi
	printf '\n[engine.runtimes]\nrunsc = ["%s"]\n' "$2"
}

# install_runsc_wrappers puts the runsc wrappers where the engines find them: on the
# host, and in the podman 5 chroot (whose runsc is Debian 13's).
install_runsc_wrappers() {
	local src=$HERE/../../contrib/gvisor/runsc-arizuko
	[[ -f $src ]] || die "$src is missing"
	install -D -m 0755 "$src" "$RUNSC_WRAPPER"
	sed 's|--host-uds=all|--host-uds=all --ignore-cgroups|' "$src" >"$RUNSC_WRAPPER_ROOTLESS.tmp"
	chmod 0755 "$RUNSC_WRAPPER_ROOTLESS.tmp"
	mv -f "$RUNSC_WRAPPER_ROOTLESS.tmp" "$RUNSC_WRAPPER_ROOTLESS"
	install -D -m 0755 "$src" "$CHROOT$RUNSC_WRAPPER"
}

write_configs() {
	mkdir -p "$P4_DIR/storage" "$P4_DIR/networks" "$PG_DIR/storage" "$PG_DIR/networks" "$P5_DIR" "$DK_DIR/data" "$DK_DIR/containerd"
	containers_conf runc "$RUNSC_WRAPPER" "$RUNDIR/podman4/tmp" "$P4_DIR/networks" >"$P4_DIR/containers.conf"
	cat >"$P4_DIR/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$P4_DIR/storage"
runroot = "$RUNDIR/podman4/storage"
EOF
	containers_conf runsc "$RUNSC_WRAPPER" "$RUNDIR/pg/tmp" "$PG_DIR/networks" >"$PG_DIR/containers.conf"
	cat >"$PG_DIR/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$PG_DIR/storage"
runroot = "$RUNDIR/pg/storage"
EOF
	containers_conf runc "$RUNSC_WRAPPER" >"$P5_DIR/containers.conf"
	# dockerd 20.10 would write its identity key to /etc/docker/key.json. gVisor is
	# registered per container, with its flags as runtimeArgs.
	printf '{"deprecated-key-path": "%s", "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=all"]}}}\n' \
		"$DK_DIR/key.json" >"$DK_DIR/daemon.json"
	cat >"$DK_DIR/containerd.toml" <<EOF
# Written by hack/testhost/up.sh: the private containerd of the test dockerd.
version = 2
root = "$DK_DIR/containerd"
state = "$RUNDIR/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$CTRD_SOCK"

[ttrpc]
  address = "$CTRD_SOCK.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$DK_DIR/containerd/opt"
EOF
}

# mount_rundir puts the runtime state (podman runroot, dockerd exec-root,
# containerd state) on a tmpfs, so every start begins like after a reboot.
mount_rundir() {
	mkdir -p "$RUNDIR"
	is_mountpoint "$RUNDIR" || mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$RUNDIR"
	mkdir -p "$RUNDIR/podman4/tmp" "$RUNDIR/podman4/storage" "$RUNDIR/containerd" "$RUNDIR/docker"
}

ensure_user() {
	local uid gid home start
	if ! id -u "$TESTHOST_USER" >/dev/null 2>&1; then
		say "creating user $TESTHOST_USER"
		useradd -m -s /bin/bash -c "arizukod test user" "$TESTHOST_USER"
		mkdir -p "$STATEDIR"
		touch "$STATEDIR/created-user"
	fi
	uid=$(id -u "$TESTHOST_USER")
	gid=$(id -g "$TESTHOST_USER")
	home=$(getent passwd "$TESTHOST_USER" | cut -d: -f6)
	[[ -d $home ]] || die "home $home of $TESTHOST_USER is missing"
	if ! grep -q "^$TESTHOST_USER:" /etc/subuid || ! grep -q "^$TESTHOST_USER:" /etc/subgid; then
		start=$(awk -F: 'BEGIN { m = 100000 } { e = $2 + $3; if (e > m) m = e } END { print m }' /etc/subuid /etc/subgid)
		say "adding subordinate ids $start-$((start + 65535)) for $TESTHOST_USER"
		grep -q "^$TESTHOST_USER:" /etc/subuid || usermod --add-subuids "$start-$((start + 65535))" "$TESTHOST_USER"
		grep -q "^$TESTHOST_USER:" /etc/subgid || usermod --add-subgids "$start-$((start + 65535))" "$TESTHOST_USER"
	fi
	# Like logind: a private tmpfs runtime dir owned by the user, mode 0700.
	local rdir=/run/user/$uid
	mkdir -p /run/user
	chmod 0755 /run/user
	if ! is_mountpoint "$rdir"; then
		mkdir -p "$rdir"
		mount -t tmpfs -o "mode=0700,uid=$uid,gid=$gid,nosuid,nodev,size=256m" tmpfs "$rdir"
		mkdir -p "$STATEDIR"
		touch "$STATEDIR/mounted-rootless-runtime-dir"
	fi
	install -d -o "$uid" -g "$gid" -m 0700 "$home/.config" "$home/.config/containers"
	containers_conf runc "$RUNSC_WRAPPER_ROOTLESS" >"$home/.config/containers/containers.conf"
	# Without this podman 4.3 picks vfs, which copies every image per container.
	# /dev/fuse is root-only here, so this is the kernel's native rootless overlay.
	printf '[storage]\ndriver = "overlay"\n' >"$home/.config/containers/storage.conf"
	chown "$uid:$gid" "$home/.config/containers/containers.conf" "$home/.config/containers/storage.conf"
}

# mark_if_absent PATH NAME remembers that PATH did not exist before the test
# host ran, so down.sh may remove what an engine leaves there.
mark_if_absent() {
	[[ -e $1 ]] || touch "$STATEDIR/$2"
}

ensure_chroot() {
	[[ -f $CHROOT_MARKER ]] && return 0
	local partial=$CHROOT.partial mirror
	mirror=$(debian_mirror)
	unmount_tree "$partial"
	unmount_tree "$CHROOT"
	assert_no_mounts_under "$partial"
	assert_no_mounts_under "$CHROOT"
	rm -rf --one-file-system "$partial" "$CHROOT"
	# A throw-away chroot needs no fsync after every package.
	mkdir -p "$partial/etc/dpkg/dpkg.cfg.d"
	echo force-unsafe-io >"$partial/etc/dpkg/dpkg.cfg.d/arizuko-testhost-unsafe-io"
	say "debootstrap $TESTHOST_SUITE from $mirror into $CHROOT (minutes; log $LOGDIR/debootstrap.log)"
	if ! debootstrap --variant=minbase --include=podman,runc,runsc,uidmap,ca-certificates \
		"$TESTHOST_SUITE" "$partial" "$mirror" >"$LOGDIR/debootstrap.log" 2>&1; then
		tail -n 30 "$LOGDIR/debootstrap.log" >&2
		unmount_tree "$partial"
		die "debootstrap of $TESTHOST_SUITE failed"
	fi
	unmount_tree "$partial"
	[[ -x $partial/usr/bin/podman && -x $partial/usr/sbin/runc ]] || die "debootstrap left no podman/runc in $partial"
	mv "$partial" "$CHROOT"
	dpkg-query --admindir="$CHROOT/var/lib/dpkg" -W -f='podman ${Version}\n' podman >"$CHROOT_MARKER"
}

# chroot_runsc installs gVisor's runsc in a chroot made before it was on the list.
chroot_runsc() {
	[[ -x $CHROOT/usr/bin/runsc ]] && return 0
	say "installing runsc in $CHROOT"
	local apt=(chroot "$CHROOT" env -i PATH="$CLEAN_PATH" DEBIAN_FRONTEND=noninteractive apt-get -y -q)
	"${apt[@]}" install --no-install-recommends runsc >>"$LOGDIR/chroot-apt.log" 2>&1 ||
		{ "${apt[@]}" update >>"$LOGDIR/chroot-apt.log" 2>&1 && "${apt[@]}" install --no-install-recommends runsc >>"$LOGDIR/chroot-apt.log" 2>&1; } ||
		die "cannot install runsc in $CHROOT (log $LOGDIR/chroot-apt.log)"
}

# mount_chroot makes the chroot usable by podman 5. Order matters:
#  1. the chroot onto itself (else image unpacking fails: "remount /, flags: 0x44000")
#  2. /proc /sys /dev recursively, each made a slave at once, so unmounting the
#     copy can never unmount the host's /dev/pts and friends
#  3. a fresh tmpfs /run (podman's runroot and tmp_dir)
#  4. the shared host paths (default /tmp and the tests' TMPDIR parent) and the
#     socket folder at the same paths. A shared path is bound alone, not
#     recursively, and private: a mount below it on the host (another engine's
#     overlay under /tmp) is neither copied in now nor propagated later, so no
#     copy in the chroot, or in a container of podman 5, keeps it busy ("device or
#     resource busy" in that engine's storage).
mount_chroot() {
	local d p
	mkdir -p "$TESTHOST_TESTS_TMP"
	chmod 1777 "$TESTHOST_TESTS_TMP"
	if ! is_mountpoint "$CHROOT"; then
		mount --bind "$CHROOT" "$CHROOT"
		mount --make-private "$CHROOT"
	fi
	for d in proc sys dev; do
		if ! is_mountpoint "$CHROOT/$d"; then
			mount --rbind "/$d" "$CHROOT/$d"
			mount --make-rslave "$CHROOT/$d"
		fi
	done
	is_mountpoint "$CHROOT/run" || mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$CHROOT/run"
	for p in $TESTHOST_SHARED_PATHS; do
		[[ -d $p ]] || die "shared path $p is not a directory"
		mkdir -p "$CHROOT$p"
		if ! is_mountpoint "$CHROOT$p"; then
			mount --bind "$p" "$CHROOT$p"
			mount --make-rprivate "$CHROOT$p"
		fi
	done
	mkdir -p "$CHROOT$P5_DIR"
	if ! is_mountpoint "$CHROOT$P5_DIR"; then
		mount --bind "$P5_DIR" "$CHROOT$P5_DIR"
		mount --make-private "$CHROOT$P5_DIR"
	fi
}

# restart_if_deaf NAME SOCK: a service that runs but does not answer its ping
# within $TESTHOST_WAIT seconds (a leftover of an earlier, broken start) is
# stopped so it starts afresh.
restart_if_deaf() {
	local i
	service_pid "$1" >/dev/null || return 0
	for ((i = 0; i < TESTHOST_WAIT * 5; i++)); do
		ping_ok "$2" && return 0
		service_pid "$1" >/dev/null || return 0
		sleep 0.2
	done
	say "$1 runs but does not answer on $2, restarting it"
	stop_service "$1"
}

# fresh_tmpdir DIR [OWNER] empties the TMPDIR of a podman service that is not
# running. Podman sets TMPDIR=/var/tmp when unset, and its image import API
# leaves its upload there (api_load.tar*): each service gets its own.
fresh_tmpdir() {
	assert_no_mounts_under "$1"
	rm -rf --one-file-system "$1"
	mkdir -m 0700 "$1"
	[[ -z ${2:-} ]] || chown "$2" "$1"
}

start_podman4() {
	restart_if_deaf podman4 "$P4_SOCK"
	if ! service_pid podman4 >/dev/null; then
		rm -f "$P4_SOCK"
		fresh_tmpdir "$P4_DIR/tmp"
	fi
	start_service podman4 "$P4_SOCK" env -i PATH="$CLEAN_PATH" HOME=/root TMPDIR="$P4_DIR/tmp" \
		CONTAINERS_CONF="$P4_DIR/containers.conf" CONTAINERS_STORAGE_CONF="$P4_DIR/storage.conf" \
		podman --root "$P4_DIR/storage" --runroot "$RUNDIR/podman4/storage" \
		system service --time=0 "unix://$P4_SOCK"
}

start_podman5() {
	mount_chroot
	chroot_runsc
	restart_if_deaf podman5 "$P5_SOCK"
	if ! service_pid podman5 >/dev/null; then
		rm -f "$P5_SOCK"
		fresh_tmpdir "$P5_DIR/tmp"
	fi
	start_service podman5 "$P5_SOCK" env -i PATH="$CLEAN_PATH" HOME=/root TMPDIR="$P5_DIR/tmp" \
		CONTAINERS_CONF="$P5_DIR/containers.conf" PODMAN_IGNORE_CGROUPSV1_WARNING=1 \
		chroot "$CHROOT" /usr/bin/podman system service --time=0 "unix://$P5_SOCK"
}

start_podman4_gvisor() {
	restart_if_deaf podman4-gvisor "$PG_SOCK"
	if ! service_pid podman4-gvisor >/dev/null; then
		rm -f "$PG_SOCK"
		fresh_tmpdir "$PG_DIR/tmp"
	fi
	start_service podman4-gvisor "$PG_SOCK" env -i PATH="$CLEAN_PATH" HOME=/root TMPDIR="$PG_DIR/tmp" \
		CONTAINERS_CONF="$PG_DIR/containers.conf" CONTAINERS_STORAGE_CONF="$PG_DIR/storage.conf" \
		podman --root "$PG_DIR/storage" --runroot "$RUNDIR/pg/storage" \
		system service --time=0 "unix://$PG_SOCK"
}

start_containerd() {
	if ! service_pid containerd >/dev/null; then
		rm -f "$CTRD_SOCK" "$CTRD_SOCK.ttrpc"
	fi
	start_service containerd "$DK_DIR/containerd.toml" env -i PATH="$CLEAN_PATH" HOME=/root \
		containerd --config "$DK_DIR/containerd.toml"
}

start_dockerd() {
	restart_if_deaf dockerd "$DK_SOCK"
	service_pid dockerd >/dev/null || rm -f "$DK_SOCK"
	start_service dockerd "$DK_SOCK" env -i PATH="$CLEAN_PATH" HOME=/root \
		dockerd --host "unix://$DK_SOCK" \
		--config-file "$DK_DIR/daemon.json" \
		--data-root "$DK_DIR/data" --exec-root "$RUNDIR/docker" --pidfile "$RUNDIR/dockerd.pid" \
		--containerd "$CTRD_SOCK" --containerd-namespace arizuko-testhost \
		--containerd-plugins-namespace arizuko-testhost-plugins \
		--iptables=false --ip-forward=false --ip-masq=false --bridge=none --userland-proxy=false \
		--exec-opt native.cgroupdriver=cgroupfs --cgroup-parent /arizuko-testhost-docker \
		--default-ulimit nofile=1024:1024 --default-ulimit nproc=4096:4096
}

start_rootless() {
	local uid gid home sock
	uid=$(rootless_uid)
	gid=$(id -g "$TESTHOST_USER")
	home=$(getent passwd "$TESTHOST_USER" | cut -d: -f6)
	sock=$(rootless_sock "$uid")
	restart_if_deaf podman-rootless "$sock"
	if ! service_pid podman-rootless >/dev/null; then
		rm -f "$sock"
		mkdir -p "$TESTHOST_DIR/rootless"
		fresh_tmpdir "$TESTHOST_DIR/rootless/tmp" "$uid:$gid"
	fi
	# podman 4.3 does not create the socket's folder itself.
	install -d -o "$uid" -g "$gid" -m 0700 "${sock%/*}"
	start_service podman-rootless "$sock" setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env \
		env XDG_RUNTIME_DIR="/run/user/$uid" HOME="$home" PATH="$CLEAN_PATH" TMPDIR="$TESTHOST_DIR/rootless/tmp" \
		CONTAINERS_CONF="$home/.config/containers/containers.conf" \
		podman system service --time=0 "unix://$sock"
}

process_named() {
	local f
	for f in /proc/[0-9]*/comm; do
		[[ $(cat "$f" 2>/dev/null) == "$1" ]] && return 0
	done
	return 1
}

start_journald() {
	if service_pid journald >/dev/null; then return 0; fi
	if process_named systemd-journal && [[ -S $JOURNAL_DIR/socket ]]; then
		say "a systemd-journald is already running; using it"
		return 0
	fi
	mkdir -p "$STATEDIR"
	if [[ ! -d $JOURNAL_DIR ]]; then
		mkdir -p "$JOURNAL_DIR"
		touch "$STATEDIR/created-journal-dir"
	fi
	start_service journald systemd-journald env -i PATH="$CLEAN_PATH" /lib/systemd/systemd-journald
}

journald_ready() {
	[[ -S $JOURNAL_DIR/socket && -S $JOURNAL_DIR/stdout ]]
}

user_manager_state() {
	env XDG_RUNTIME_DIR="$SYSTEMD_RUNTIME_DIR" systemctl --user is-system-running 2>/dev/null || true
}

user_manager_ready() {
	case $(user_manager_state) in
	running | degraded) return 0 ;;
	*) return 1 ;;
	esac
}

start_user_manager() {
	if service_pid systemd-user >/dev/null || user_manager_ready; then return 0; fi
	mkdir -p "$STATEDIR"
	if [[ $(cat /proc/1/comm) == systemd ]]; then
		say "systemd is PID 1: starting its user@0.service"
		systemctl start user@0.service || fail_service systemd-user "systemctl start user@0.service failed"
		touch "$STATEDIR/started-user-at-0"
		return 0
	fi
	if [[ ! -d $SYSTEMD_MARKER_DIR ]]; then
		mkdir -p "$SYSTEMD_MARKER_DIR"
		touch "$STATEDIR/created-run-systemd-system"
	fi
	if [[ ! -d $SYSTEMD_RUNTIME_DIR ]]; then
		mkdir -p /run/user
		mkdir -m 0700 "$SYSTEMD_RUNTIME_DIR"
		touch "$STATEDIR/created-root-runtime-dir"
	fi
	# A user manager started in the root cgroup moves every process of the
	# machine into /init.scope. Start it where logind would, in its own
	# subtree: it then manages only that, and journald names its units as on
	# a real machine (_SYSTEMD_USER_UNIT, read with journalctl --user-unit).
	mark_if_absent /sys/fs/cgroup/systemd/user.slice created-systemd-cgroups
	SERVICE_CGROUP=$USER_MANAGER_CGROUP start_service systemd-user "systemd --user" env -i PATH="$CLEAN_PATH" HOME=/root USER=root LOGNAME=root \
		SHELL=/bin/bash XDG_RUNTIME_DIR="$SYSTEMD_RUNTIME_DIR" /lib/systemd/systemd --user
}

# verify_systemd_run proves that a transient user unit runs and that its
# output reaches the journal under its unit name (_SYSTEMD_USER_UNIT, as on a
# real machine: `journalctl --user-unit UNIT` finds it, `journalctl -u` does not).
# The probe lives a moment: journald reads the unit from the writer's cgroup,
# and a process that exits at once may be logged with no unit at all.
verify_systemd_run() {
	local unit token i
	token=arizuko-testhost-probe-$$-$RANDOM
	unit=$token.service
	if ! env XDG_RUNTIME_DIR="$SYSTEMD_RUNTIME_DIR" systemd-run --user --quiet --wait --collect \
		--unit="$unit" /bin/sh -c "echo $token; sleep 0.5" >&2; then
		fail_service systemd-user "systemd-run --user failed"
	fi
	for ((i = 0; i < 50; i++)); do
		if journalctl --user-unit "$unit" -o cat --no-pager 2>/dev/null | grep -qF "$token"; then
			return 0
		fi
		sleep 0.2
	done
	fail_service journald "the output of $unit did not reach journalctl --user-unit"
}

# engine_version reads the Server and Api-Version headers of /_ping: podman
# 4.3 takes about a second to answer /version.
engine_version() {
	local headers server api
	headers=$(curl -sS --max-time 5 -o /dev/null -D - --unix-socket "$1" http://d/_ping 2>/dev/null | tr -d '\r') || true
	server=$(sed -n 's/^[Ss]erver: *\([^ ]*\).*/\1/p' <<<"$headers")
	api=$(sed -n 's/^[Aa]pi-[Vv]ersion: *//p' <<<"$headers")
	printf '%s (API %s)\n' "${server:-unknown}" "${api:-unknown}"
}

# kube_version names the cluster's kubelet and runtime, as its node reports them.
kube_version() {
	local bin
	[[ -f $TESTHOST_DIR/kube/state/bin ]] || return 0
	read -r bin <"$TESTHOST_DIR/kube/state/bin"
	"$bin/kubectl" --kubeconfig "$TESTHOST_DIR/kube/config/admin.kubeconfig" get node localhost \
		-o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}' 2>/dev/null || true
}

write_env() {
	local uid home tmp
	uid=$(rootless_uid)
	home=$(getent passwd "$TESTHOST_USER" | cut -d: -f6)
	tmp=$(mktemp "$ENV_FILE.XXXXXX")
	{
		printf '# Written by hack/testhost/up.sh; source it: . %s\n' "$ENV_FILE"
		printf 'export %s=%q\n' \
			ARIZUKO_TESTHOST_DIR "$TESTHOST_DIR" \
			ARIZUKO_TEST_PODMAN4 "unix://$P4_SOCK" \
			ARIZUKO_TEST_PODMAN4_GVISOR "unix://$PG_SOCK" \
			ARIZUKO_TEST_PODMAN5 "unix://$P5_SOCK" \
			ARIZUKO_TEST_DOCKER "unix://$DK_SOCK" \
			ARIZUKO_TEST_PODMAN_ROOTLESS "unix://$(rootless_sock "$uid")" \
			ARIZUKO_TEST_ROOTLESS_USER "$TESTHOST_USER" \
			ARIZUKO_TEST_ROOTLESS_UID "$uid" \
			ARIZUKO_TEST_ROOTLESS_GID "$(id -g "$TESTHOST_USER")" \
			ARIZUKO_TEST_ROOTLESS_HOME "$home" \
			ARIZUKO_TEST_ROOTLESS_RUNTIME_DIR "/run/user/$uid" \
			ARIZUKO_TEST_PODMAN5_CHROOT "$CHROOT" \
			ARIZUKO_TEST_PODMAN5_SHARED_PATHS "$TESTHOST_SHARED_PATHS" \
			ARIZUKO_TESTHOST_TESTS_TMP "$TESTHOST_TESTS_TMP" \
			ARIZUKO_TEST_PODMAN5_QUADLET "$CHROOT/usr/libexec/podman/quadlet" \
			ARIZUKO_TEST_SYSTEMD_USER 1 \
			ARIZUKO_TEST_SYSTEMD_RUNTIME_DIR "$SYSTEMD_RUNTIME_DIR" \
			ARIZUKO_TEST_JOURNALD 1
		grep '^export ' "$TESTHOST_DIR/kube/env"
	} >"$tmp"
	chmod 0644 "$tmp"
	sync "$tmp"
	mv -f "$tmp" "$ENV_FILE"
}

main() {
	no_arguments "$@"
	require_root
	check_layout
	local t0=$SECONDS uid
	install_packages
	# The cluster's binaries take 15 to 30 minutes to build on a bare machine: the build
	# starts now, beside the chroot and the engines; hack/kube/up.sh waits for it (it holds
	# a lock) and returns at once when they are cached.
	mkdir -p "$LOGDIR"
	bash "$HERE/../kube/build.sh" >"$LOGDIR/kube-build.log" 2>&1 &
	mkdir -p "$TESTHOST_DIR" "$PIDDIR" "$LOGDIR" "$STATEDIR"
	chmod 0755 "$TESTHOST_DIR"
	rm -f "$ENV_FILE"
	mount_rundir
	write_configs
	ensure_user
	ensure_chroot
	install_runsc_wrappers
	uid=$(rootless_uid)

	# Paths the engines use whatever their configuration says: dockerd's plugin
	# folder, the containerd shims' sockets (/run/containerd/s/<hash of our
	# address>) and podman 4.3's rootful blob-info cache.
	mark_if_absent /run/docker created-run-docker
	mark_if_absent /run/containerd created-run-containerd
	mark_if_absent /var/lib/containers created-var-lib-containers

	start_journald
	start_podman4
	start_podman4_gvisor
	start_containerd
	start_podman5
	start_rootless
	wait_for journald journald_ready
	start_user_manager
	wait_for containerd test -S "$CTRD_SOCK"
	start_dockerd

	wait_for podman4 ping_ok "$P4_SOCK"
	wait_for podman4-gvisor ping_ok "$PG_SOCK"
	wait_for podman5 ping_ok "$P5_SOCK"
	wait_for podman-rootless ping_ok "$(rootless_sock "$uid")"
	wait_for dockerd ping_ok "$DK_SOCK"
	wait_for systemd-user user_manager_ready
	verify_systemd_run
	bash "$HERE/../kube/up.sh"
	write_env

	printf '%-16s %-34s %s\n' ENGINE VERSION SOCKET
	printf '%-16s %-34s %s\n' podman4 "$(engine_version "$P4_SOCK")" "unix://$P4_SOCK"
	printf '%-16s %-34s %s\n' podman4-gvisor "$(engine_version "$PG_SOCK")" "unix://$PG_SOCK"
	printf '%-16s %-34s %s\n' podman5 "$(engine_version "$P5_SOCK")" "unix://$P5_SOCK"
	printf '%-16s %-34s %s\n' docker "$(engine_version "$DK_SOCK")" "unix://$DK_SOCK"
	printf '%-16s %-34s %s\n' podman-rootless "$(engine_version "$(rootless_sock "$uid")")" "unix://$(rootless_sock "$uid")"
	printf '%-16s %-34s %s\n' systemd-user "$(user_manager_state)" "XDG_RUNTIME_DIR=$SYSTEMD_RUNTIME_DIR"
	printf '%-16s %-34s %s\n' journald running "$JOURNAL_DIR/socket"
	printf '%-16s %-34s %s\n' kubernetes "$(kube_version)" "$TESTHOST_DIR/kube/config/admin.kubeconfig"
	say "up in $((SECONDS - t0))s; env: . $ENV_FILE"
}

main "$@"
