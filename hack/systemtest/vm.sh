#!/usr/bin/env bash
# vm.sh [DEB]: the package on a real kernel with cgroups v2, as a Debian 12 host runs it.
#
# hack/systemtest.sh boots Debian in systemd-nspawn, which on this machine means cgroups v1,
# runc and no session keyring. This test boots the same tree as a QEMU virtual machine
# (TCG: no nested KVM here) with its own kernel in the unified cgroup hierarchy, with the
# package's defaults untouched (crun, no drop-in), and checks what only such a host shows:
# each agent container gets its memory, CPU and pids limits (a scope of the arizuko user's
# manager), the scopes do not pile up, and removing the package stops everything.
#
# Needs the tree hack/systemtest.sh caches (run it first), root, and qemu-system-x86
# (installed with apt-get when missing). DEB defaults to the newest dist/arizukod_*.deb.
#   ARIZUKO_SYSTEMTEST_DIR         as for systemtest.sh (/var/tmp/arizuko-systemtest)
#   ARIZUKO_SYSTEMTEST_VM_TIMEOUT  seconds the machine may run (600)
set -euo pipefail
cd "$(dirname "$0")/../.."

ST_DIR=${ARIZUKO_SYSTEMTEST_DIR:-/var/tmp/arizuko-systemtest}
BASE=$ST_DIR/bookworm
APT_CACHE=$ST_DIR/apt-archives
VM=$ST_DIR/vm
ROOT=$VM/root
VM_TIMEOUT=${ARIZUKO_SYSTEMTEST_VM_TIMEOUT:-600}
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf 'vm: %s\n' "$*" >&2; }
die() {
	printf 'vm: FAIL: %s\n' "$*" >&2
	exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[[ $(id -u) -eq 0 ]] || die "must run as root"
[[ -f $BASE/.arizuko-systemtest-ready ]] || die "no cached tree in $BASE: run hack/systemtest.sh first"
[[ $ST_DIR =~ ^/[A-Za-z0-9._/-]+$ && $ST_DIR != */ && $ST_DIR != *..* ]] || die "ARIZUKO_SYSTEMTEST_DIR=$ST_DIR: must be an absolute, normalized path"
if ! command -v qemu-system-x86_64 >/dev/null; then
	say "installing qemu-system-x86"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
fi
DEB=${1:-$(find dist -maxdepth 1 -name 'arizukod_*.deb' | head -n 1)}
[[ -f $DEB ]] || die "no package: make deb, or pass its path"

exec 9>"$ST_DIR/lock"
flock -n 9 || die "another systemtest holds $ST_DIR/lock"

mounted_under() { awk -v r="$1" '$5 == r || index($5, r "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; }
unmount_root() {
	local m
	for m in var/cache/apt/archives dev sys proc; do
		if mounted_under "$ROOT/$m"; then
			mount --make-rprivate "$ROOT/$m"
			umount -R "$ROOT/$m"
		fi
	done
}
QEMU_PID=
cleanup() {
	local rc=$?
	[[ -z $QEMU_PID ]] || kill "$QEMU_PID" 2>/dev/null || true
	unmount_root
	if [[ -d $ROOT ]] && ! mounted_under "$ROOT"; then
		rm -rf --one-file-system "$ROOT" "$VM/disk.raw"
	fi
	exit "$rc"
}
trap cleanup EXIT

# ---- the machine's disk: the cached tree, a kernel, the package -------------------------------

t0=$(now)
mounted_under "$VM" && die "something is mounted under $VM"
rm -rf --one-file-system "$VM"
mkdir -p "$VM"
cp -a --reflink=auto "$BASE" "$ROOT"
rm -f "$ROOT/.arizuko-systemtest-ready"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "$DEB" "$ROOT/root/"
mount --bind /proc "$ROOT/proc"
mount --bind /sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind "$APT_CACHE" "$ROOT/var/cache/apt/archives"
chroot "$ROOT" env -i PATH="$CLEAN_PATH" HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
	sh -c "apt-get update -q && apt-get install -y -q -o APT::Keep-Downloaded-Packages=true linux-image-amd64 /root/$(basename "$DEB")" \
	>"$VM/install.log" 2>&1 || die "install in the chroot failed: $(tail -n 20 "$VM/install.log")"
unmount_root
kernel=$(find "$ROOT/boot" -name 'vmlinuz-*' | sort | tail -n 1)
initrd=$(find "$ROOT/boot" -name 'initrd.img-*' | sort | tail -n 1)
[[ -n $kernel && -n $initrd ]] || die "no kernel in $ROOT/boot"
say "installed $(basename "$DEB") and $(basename "$kernel") in $(since "$t0")s (crun: $(chroot "$ROOT" dpkg-query -W -f "\${Version}" crun 2>/dev/null || echo none))"

install -m 0755 hack/systemtest/vm-check.sh "$ROOT/usr/local/sbin/arizuko-vm-check"
cat >"$ROOT/etc/systemd/system/arizuko-vm-check.service" <<'EOF'
[Unit]
Description=hack/systemtest/vm.sh: the checks inside the machine
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/arizuko-vm-check
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/arizuko-vm-check.service "$ROOT/etc/systemd/system/multi-user.target.wants/arizuko-vm-check.service"
echo arizuko-vm >"$ROOT/etc/hostname"
echo '/dev/vda / ext4 rw 0 1' >"$ROOT/etc/fstab"
mkfs.ext4 -q -F -L root -d "$ROOT" "$VM/disk.raw" 3G

# ---- boot ---------------------------------------------------------------------------------------

t=$(now)
timeout "$VM_TIMEOUT" qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -cpu max -smp 2 -m 3072 \
	-kernel "$kernel" -initrd "$initrd" \
	-append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet" \
	-drive "file=$VM/disk.raw,format=raw,if=virtio" -nic none -display none \
	-serial "file:$VM/console.log" -no-reboot >"$VM/qemu.log" 2>&1 &
QEMU_PID=$!
wait "$QEMU_PID" || true
QEMU_PID=
grep -a 'VMCHECK' "$VM/console.log" | sed 's/^.*VMCHECK /  /' >&2 || true
grep -aq 'VMCHECK PASS' "$VM/console.log" ||
	die "the checks inside the machine did not pass (after $(since "$t")s); console: $VM/console.log"
say "all checks passed: boot and checks $(since "$t")s, total $(since "$t0")s"
cp "$VM/console.log" "$ST_DIR/logs/vm-console.log"
