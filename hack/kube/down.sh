#!/usr/bin/env bash
# down.sh: stop the test host's Kubernetes cluster (run as root; safe when nothing is up).
#
# Deletes every pod while the node still runs (the kubelet stops their sandboxes and
# tears down their networks), removes whatever containers are left in the node's
# containerd, stops every service by pidfile, ends leftover shims and pod processes,
# unmounts everything under the kube directory, and removes the bridges, the cgroup
# root, the CNI cache entries and the /var/log/containers links it made. Certificates,
# configuration and containerd's image store stay as a cache.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

usage() {
	cat <<EOF
usage: $0
Stops the test host's Kubernetes cluster under $KUBE_DIR.
EOF
}

# delete_pods asks the API to delete every pod and waits (up to 60 s) until the node's
# containerd runs no task: the kubelet kills each pod's containers and stops its sandbox,
# which releases the pod's network.
delete_pods() {
	service_pid kube-apiserver >/dev/null && service_pid kube-kubelet >/dev/null || return 0
	[[ -n ${KUBE_BIN:-} && -x $KUBE_BIN/kubectl ]] || return 0
	kctl delete pods --all --all-namespaces --grace-period=1 --wait=false >/dev/null 2>&1 ||
		ksay "warning: cannot delete the pods"
	local i
	for ((i = 0; i < 300; i++)); do
		[[ -z $(kctr tasks ls -q 2>/dev/null) ]] && return 0
		sleep 0.2
	done
	ksay "warning: the node still runs pods after 60s; removing them from containerd"
}

# remove_containers kills and removes every container left in the node's containerd.
remove_containers() {
	containerd_up || return 0
	local id
	for id in $(kctr tasks ls -q 2>/dev/null); do
		kctr tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $(kctr containers ls -q 2>/dev/null); do
		kctr tasks delete --force "$id" >/dev/null 2>&1 || true
		kctr containers delete "$id" >/dev/null 2>&1 || ksay "warning: cannot remove container $id"
	done
}

containerd_up() {
	[[ -S $KUBE_CTRD_SOCK ]] && ctr --address "$KUBE_CTRD_SOCK" version >/dev/null 2>&1
}

# leftover_pids prints what outlived the services: the shims of our containerd (their
# command line names its socket) and every process in the pods' cgroup root.
leftover_pids() {
	local pid comm
	{
		grep -lF "$KUBE_DIR/" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | while read -r pid; do
			read -r comm 2>/dev/null <"/proc/$pid/comm" || continue
			[[ $comm == containerd-shim* || $comm == runc ]] && printf '%s\n' "$pid"
		done
		find /sys/fs/cgroup/pids"$KUBE_CGROUP" /sys/fs/cgroup"$KUBE_CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null
	} | sort -un | while read -r pid; do
		if [[ $pid != "$$" ]] && proc_alive "$pid"; then printf '%s\n' "$pid"; fi
	done
}

sweep_leftovers() {
	local -a pids
	mapfile -t pids < <(leftover_pids)
	[[ ${#pids[@]} -gt 0 ]] || return 0
	ksay "stopping leftover processes: ${pids[*]}"
	kill -KILL "${pids[@]}" 2>/dev/null || true
	wait_gone 10 "${pids[@]}" || ksay "warning: still running: ${pids[*]}"
}

# remove_links removes what the node left outside the kube directory: the kubelet's
# links in /var/log/containers to our pod logs, libcni's cache of our networks'
# attachments, the kubelet's device-plugin socket, the bridges; each folder only when
# up.sh made it and it is empty.
remove_links() {
	local f
	for f in "$CONTAINER_LOGS"/*.log; do
		[[ -L $f && $(readlink "$f") == "$KUBE_POD_LOGS"/* ]] && rm -f "$f"
	done
	if [[ -f $KUBE_STATE/created-container-logs ]]; then
		rmdir "$CONTAINER_LOGS" 2>/dev/null || true
		[[ -e $CONTAINER_LOGS ]] || rm -f "$KUBE_STATE/created-container-logs"
	fi
	# A stopped sandbox leaves nothing there; one whose containerd died leaves its
	# networks' entries and its loopback's (cni-loopback-<sandbox>-lo).
	local id
	for f in "$CNI_CACHE/results/$KUBE_NET-"* "$CNI_CACHE/results/$KUBE_NONET_NET-"*; do
		[[ -f $f ]] || continue
		id=${f#"$CNI_CACHE/results/"}
		id=${id#"$KUBE_NET-"}
		id=${id#"$KUBE_NONET_NET-"}
		id=${id%-eth0}
		rm -f "$f" "$CNI_CACHE/results/cni-loopback-$id-lo"
	done
	if [[ -f $KUBE_STATE/created-cni-cache ]]; then
		rmdir "$CNI_CACHE/results" "$CNI_CACHE" 2>/dev/null || true
		[[ -e $CNI_CACHE ]] || rm -f "$KUBE_STATE/created-cni-cache"
	fi
	rm -f "$KUBELET_FIXED/device-plugins/kubelet.sock"
	if [[ -f $KUBE_STATE/created-var-lib-kubelet ]]; then
		rmdir "$KUBELET_FIXED/device-plugins" "$KUBELET_FIXED" 2>/dev/null || true
		[[ -e $KUBELET_FIXED ]] || rm -f "$KUBE_STATE/created-var-lib-kubelet"
	fi
	local br
	for br in "$KUBE_BRIDGE" "$KUBE_NONET_BRIDGE" "$KUBE_API_HOLDER"; do
		[[ -e /sys/class/net/$br ]] || continue
		ip link delete "$br" type bridge || ksay "warning: cannot delete bridge $br"
	done
	# The bridge plugin turns IP forwarding on for a gateway bridge: put back what it was.
	if [[ -f $KUBE_STATE/ip_forward ]]; then
		cat "$KUBE_STATE/ip_forward" >/proc/sys/net/ipv4/ip_forward || ksay "warning: cannot restore net.ipv4.ip_forward"
		rm -f "$KUBE_STATE/ip_forward"
	fi
}

main() {
	no_arguments "$@"
	require_root
	check_layout
	if [[ ! -d $KUBE_DIR ]]; then
		ksay "nothing to stop: $KUBE_DIR does not exist"
		return 0
	fi
	rm -f "$KUBE_ENV"
	KUBE_BIN=
	[[ ! -f $KUBE_STATE/bin ]] || read -r KUBE_BIN <"$KUBE_STATE/bin"

	delete_pods
	local s
	for s in kube-kwok kube-kubelet; do stop_service "$s"; done
	remove_containers
	for s in kube-scheduler kube-controller-manager kube-api-relay kube-apiserver kube-etcd kube-containerd; do
		stop_service "$s"
	done
	sweep_leftovers
	unmount_tree "$KUBE_DIR"
	assert_no_mounts_under "$KUBE_DIR"
	# The next start is a fresh cluster: nothing of these pods is kept.
	rm -rf --one-file-system "$KUBE_RUN" "$KUBE_KUBELET_ROOT" "$KUBE_POD_LOGS"
	remove_links
	remove_cgroups "${KUBE_CGROUP#/}"
	if [[ -d /sys/fs/cgroup$KUBE_CGROUP && -f /sys/fs/cgroup/cgroup.controllers ]]; then
		find "/sys/fs/cgroup$KUBE_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null || true
	fi
	ksay "down"
}

main "$@"
