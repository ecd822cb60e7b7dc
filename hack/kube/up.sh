#!/usr/bin/env bash
# up.sh: start the test host's Kubernetes cluster (idempotent, run as root).
#
# One real node, localhost: etcd (Debian's etcd-server, fresh data each start),
# kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet built by
# hack/kube/build.sh (cached by version), over a private containerd (Debian 12's
# 1.6, its own config, root, state and socket) with runc and the bridge CNI. Pods of
# RuntimeClass arizuko-nonet get loopback and an interface on a bridge with no route
# out: network "none". No kube-proxy: only the API's own ClusterIP answers in pods (a
# relay on the host). kwok adds fake nodes kwok-node-0... (label type=kwok, taint
# kwok.x-k8s.io/node=fake:NoSchedule) for placement at scale; a pod it runs that nothing
# owns finishes after a short delay (Succeeded, exit 0).
# Needs the test host's podman4 (hack/testhost/up.sh) to build the pause image. Fails
# when the cluster does not come up; services that already answer are left alone.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

usage() {
	cat <<EOF
usage: $0
Starts the test host's Kubernetes cluster under $KUBE_DIR and writes $KUBE_ENV.
Environment: ARIZUKO_TESTHOST_DIR (default /var/tmp/arizuko-testhost),
ARIZUKO_KUBE_KWOK_NODES (fake nodes, default 100), ARIZUKO_KUBE_WAIT (seconds to
wait for the node, default 180), and those of hack/kube/build.sh.
EOF
}

# binaries builds or finds the cluster's binaries, saying how far a cold build is.
binaries() {
	local log=$LOGDIR/build.log out t0=$SECONDS pid
	mkdir -p "$LOGDIR"
	bash "$HERE/build.sh" >"$log.out" 2>"$log" &
	pid=$!
	local said=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 0.2
		if ((SECONDS - t0 >= said + 60)); then
			said=$((SECONDS - t0))
			ksay "building the Kubernetes binaries, $((said / 60)) min so far (15 to 30 min on a bare machine; log $log): $(grep -v '^go: downloading' "$log" | tail -n 1)"
		fi
	done
	if ! wait "$pid"; then
		tail -n 30 "$log" >&2
		die "hack/kube/build.sh failed (log $log)"
	fi
	out=$(tail -n 1 "$log.out")
	[[ -x $out/kube-apiserver ]] || die "hack/kube/build.sh printed $out, which holds no kube-apiserver"
	! grep -q '^built in' "$log" || ksay "binaries built in $((SECONDS - t0))s"
	KUBE_BIN=$out
	mkdir -p "$KUBE_STATE"
	printf '%s\n' "$KUBE_BIN" >"$KUBE_STATE/bin"
}

# cert NAME SUBJECT USAGE [SAN]: a key and a certificate signed by the cluster's CA.
cert() {
	local name=$1 subj=$2 usage=$3 san=${4:-}
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
	{
		printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$usage"
		[[ -z $san ]] || printf 'subjectAltName=%s\n' "$san"
	} >"$name.ext"
	openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
		-extfile "$name.ext" -out "$name.crt" 2>/dev/null
	rm -f "$name.csr" "$name.ext"
}

# pki makes the CA, the serving and client certificates and the service-account key once.
pki() {
	[[ -f $KUBE_PKI/complete ]] && return 0
	ksay "making the cluster's certificates"
	rm -rf "$KUBE_PKI"
	mkdir -m 0700 "$KUBE_PKI"
	(
		cd "$KUBE_PKI"
		openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
			-keyout ca.key -out ca.crt -subj "/CN=arizuko-testhost-kube-ca" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
		cert apiserver "/CN=kube-apiserver" serverAuth \
			"IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:$KUBE_API_SERVICE_IP"
		cert kubelet-serving "/CN=$KUBE_NODE" serverAuth "DNS:$KUBE_NODE,IP:127.0.0.1"
		cert admin "/O=system:masters/CN=arizuko-testhost-admin" clientAuth
		cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
		cert controller-manager "/CN=system:kube-controller-manager" clientAuth
		cert scheduler "/CN=system:kube-scheduler" clientAuth
		cert node "/O=system:nodes/CN=system:node:$KUBE_NODE" clientAuth
		openssl ecparam -name prime256v1 -genkey -noout -out sa.key.ec
		openssl pkcs8 -topk8 -nocrypt -in sa.key.ec -out sa.key
		openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
		rm -f sa.key.ec ca.srl
		chmod 0600 ./*.key
		touch complete
	)
}

# kubeconfig NAME CERT: a kubeconfig for the client certificate CERT.
kubeconfig() {
	local f=$KUBE_CONF/$1.kubeconfig
	cat >"$f.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: arizuko-testhost
  cluster:
    server: https://127.0.0.1:$KUBE_API_PORT
    certificate-authority-data: $(base64 -w0 "$KUBE_PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$KUBE_PKI/$2.crt")
    client-key-data: $(base64 -w0 "$KUBE_PKI/$2.key")
contexts:
- name: arizuko-testhost
  context:
    cluster: arizuko-testhost
    user: $2
    namespace: $KUBE_NAMESPACE
current-context: arizuko-testhost
EOF
	chmod 0600 "$f.tmp"
	mv -f "$f.tmp" "$f"
}

# pause_image builds the sandbox image (hack/kube/pause) with the test host's podman4
# and imports it into the node's containerd, tagged by a digest of its source.
PAUSE_IMAGE=
pause_tag() {
	local sum
	sum=$(sha256sum <"$HERE/pause/main.go")
	PAUSE_IMAGE=localhost/arizuko-pause:${sum:0:12}
}

pause_import() {
	if kctr images ls -q "name==$PAUSE_IMAGE" | grep -q .; then return 0; fi
	ping_ok "$P4_SOCK" || die "the test host's podman4 does not answer on $P4_SOCK: run hack/testhost/up.sh"
	ksay "building the pause image $PAUSE_IMAGE"
	local ctx
	ctx=$(mktemp -d "$KUBE_DIR/pause-build.XXXXXX")
	(cd "$HERE/pause" && env CGO_ENABLED=0 GOFLAGS= go build -trimpath -ldflags '-s -w' -o "$ctx/pause" .) ||
		die "cannot build hack/kube/pause"
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
	podman --url "unix://$P4_SOCK" build -q -t "$PAUSE_IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null ||
		die "podman4 cannot build $PAUSE_IMAGE"
	podman --url "unix://$P4_SOCK" save --format oci-archive -o "$ctx/pause.tar" "$PAUSE_IMAGE" ||
		die "podman4 cannot save $PAUSE_IMAGE"
	kctr images import --base-name "${PAUSE_IMAGE%:*}" "$ctx/pause.tar" >/dev/null ||
		die "cannot import $PAUSE_IMAGE into the node's containerd"
	rm -rf "$ctx"
	kctr images ls -q "name==$PAUSE_IMAGE" | grep -q . || die "$PAUSE_IMAGE is not in the node's containerd after its import"
}

write_configs() {
	mkdir -p "$KUBE_CONF" "$KUBE_CNI/net.d" "$KUBE_CNI/nonet.d" "$KUBE_CTRD_ROOT" "$KUBE_KUBELET_ROOT" "$KUBE_POD_LOGS"
	cat >"$KUBE_CONF/containerd.toml" <<EOF
# Written by hack/kube/up.sh: the private containerd of the test host's Kubernetes node.
version = 2
root = "$KUBE_CTRD_ROOT"
state = "$KUBE_CTRD_STATE"

[grpc]
  address = "$KUBE_CTRD_SOCK"

[ttrpc]
  address = "$KUBE_CTRD_SOCK.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$KUBE_CTRD_ROOT/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: the pause container's oom_score_adj of -998
  # would fail every sandbox in runc.
  restrict_oom_score_adj = true
  # The pods' network namespaces under the state directory (a tmpfs of ours), not
  # /var/run/netns: down.sh unmounts whatever is left there.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$KUBE_CNI/net.d"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$KUBE_RUN/runc"
        SystemdCgroup = false

    # RuntimeClass $KUBE_NONET_CLASS: the same runc, its pods on a network of their own
    # with no route out.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$KUBE_NONET_HANDLER]
      runtime_type = "io.containerd.runc.v2"
      cni_conf_dir = "$KUBE_CNI/nonet.d"
      cni_max_conf_num = 1
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$KUBE_NONET_HANDLER.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$KUBE_RUN/runc"
        SystemdCgroup = false
EOF
	cat >"$KUBE_CNI/net.d/10-$KUBE_NET.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$KUBE_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$KUBE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$KUBE_RUN/cni-ipam",
        "ranges": [[{"subnet": "$KUBE_POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
	# Network "none": containerd wants an eth0 with an address (a loopback-only list is
	# refused), so the pod gets one on a bridge that has no address on the host side,
	# is no gateway and masquerades nothing, and no route beyond its own subnet.
	cat >"$KUBE_CNI/nonet.d/10-$KUBE_NONET_NET.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$KUBE_NONET_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$KUBE_NONET_BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$KUBE_RUN/cni-ipam",
        "ranges": [[{"subnet": "$KUBE_NONET_SUBNET"}]]
      }
    }
  ]
}
EOF
	cat >"$KUBE_CONF/kubelet.yaml" <<EOF
# Written by hack/kube/up.sh.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBE_KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBE_KUBELET_HEALTHZ_PORT
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $KUBE_PKI/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $KUBE_PKI/kubelet-serving.crt
tlsPrivateKeyFile: $KUBE_PKI/kubelet-serving.key
rotateCertificates: false
serverTLSBootstrap: false
containerRuntimeEndpoint: unix://$KUBE_CTRD_SOCK
# cgroups v1 hybrid, PID 1 not systemd.
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupRoot: $KUBE_CGROUP
failSwapOn: false
podPidsLimit: 1024
maxPods: 110
podLogsDir: $KUBE_POD_LOGS
# No KUBE-FIREWALL and canary chains in the host's iptables: nothing here needs them.
makeIPTablesUtilChains: false
# A shared test machine: no image garbage collection and no evictions for its disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
EOF
	kubeconfig admin admin
	kubeconfig controller-manager controller-manager
	kubeconfig scheduler scheduler
	kubeconfig node node
}

# kwok_config joins kwok's own stages (from its module, copied by build.sh) and ours.
kwok_config() {
	local stages=$KUBE_BIN/../kwok-stages f
	[[ -d $stages ]] || die "kwok's stage files are missing in $stages: remove $KUBE_BIN/kwok and run hack/kube/build.sh again"
	{
		while IFS= read -r f; do
			printf -- '---\n'
			if [[ $f == */general/* ]]; then
				# A pod's stages wait 1 s plus up to 5 s each in kwok's files: a scale test
				# of many turns wants the scheduler's cost, not kwok's pauses.
				sed -e 's/^\(    durationMilliseconds:\) [0-9]*$/\1 100/' \
					-e 's/^\(    jitterDurationMilliseconds:\) [0-9]*$/\1 400/' "$f"
			else
				cat "$f"
			fi
		done < <(find "$stages" -maxdepth 2 -name '*.yaml' ! -name kustomization.yaml | LC_ALL=C sort)
		printf -- '---\n'
		cat "$HERE/kwok-pod-finish.yaml"
	} >"$KUBE_CONF/kwok.yaml"
}

# kwok_nodes prints the fake nodes: kwok manages them (annotation), tests select them
# (label type=kwok) and only pods that tolerate the taint land there.
kwok_nodes() {
	local i
	printf 'apiVersion: v1\nkind: List\nitems:\n'
	for ((i = 0; i < KUBE_KWOK_NODES; i++)); do
		cat <<EOF
- apiVersion: v1
  kind: Node
  metadata:
    name: kwok-node-$i
    annotations:
      kwok.x-k8s.io/node: fake
      node.alpha.kubernetes.io/ttl: "0"
    labels:
      type: kwok
      kubernetes.io/hostname: kwok-node-$i
      kubernetes.io/os: linux
      kubernetes.io/arch: amd64
  spec:
    podCIDR: 10.$((128 + i / 256)).$((i % 256)).0/24
    taints:
    - key: kwok.x-k8s.io/node
      value: fake
      effect: NoSchedule
  status:
    allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
    capacity: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
	done
}

# kube_cgroup makes $KUBE_CGROUP (the kubelet wants its cgroup root to exist): in the
# unified hierarchy, or in every v1 hierarchy, cpuset with the cpus and memory nodes of
# the root.
kube_cgroup() {
	local top
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		mkdir -p "/sys/fs/cgroup$KUBE_CGROUP"
		return
	fi
	for top in /sys/fs/cgroup/*; do
		[[ -f $top/cgroup.procs && ! -L $top ]] || continue
		[[ -d $top$KUBE_CGROUP ]] && continue
		mkdir "$top$KUBE_CGROUP"
		if [[ $top == */cpuset ]]; then
			cat "$top/cpuset.cpus" >"$top$KUBE_CGROUP/cpuset.cpus"
			cat "$top/cpuset.mems" >"$top$KUBE_CGROUP/cpuset.mems"
		fi
	done
}

port_free_or_ours() {
	local port=$1 name=$2
	service_pid "$name" >/dev/null && return 0
	if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
		die "port $port, which $name needs, is taken by another process: $(ss -Hltnp "sport = :$port" | head -n 1)"
	fi
}

etcd_ok() {
	[[ $(curl -sS --max-time 3 "http://127.0.0.1:$KUBE_ETCD_PORT/health" 2>/dev/null) == *'"health":"true"'* ]]
}

apiserver_ok() {
	[[ $(curl -sS --max-time 3 --cacert "$KUBE_PKI/ca.crt" --cert "$KUBE_PKI/admin.crt" --key "$KUBE_PKI/admin.key" \
		"https://127.0.0.1:$KUBE_API_PORT/readyz" 2>/dev/null) == ok ]]
}

containerd_ok() {
	[[ -S $KUBE_CTRD_SOCK ]] && ctr --address "$KUBE_CTRD_SOCK" version >/dev/null 2>&1
}

kubelet_ok() {
	[[ $(curl -sS --max-time 3 "http://127.0.0.1:$KUBE_KUBELET_HEALTHZ_PORT/healthz" 2>/dev/null) == ok ]]
}

node_ready() {
	[[ $(kctl get node "$KUBE_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

# node_schedulable: the node controller took off the not-ready taint the kubelet
# registers with (up to a minute after Ready): until then no pod is scheduled there.
node_schedulable() {
	local taints
	taints=$(kctl get node "$KUBE_NODE" -o jsonpath='{.spec.taints}' 2>/dev/null) || return 1
	[[ $taints != *node.kubernetes.io/not-ready* ]]
}

default_sa() {
	kctl -n default get serviceaccount default >/dev/null 2>&1 &&
		kctl -n "$KUBE_NAMESPACE" get serviceaccount default >/dev/null 2>&1
}

kwok_ready() {
	local n
	n=$(kctl get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c '^True$') || true
	[[ $n -eq $KUBE_KWOK_NODES ]]
}

# stop_control_plane stops every service but containerd (whose containers down.sh
# removes): a fresh etcd needs a fresh control plane and a re-registered node.
stop_control_plane() {
	local s
	for s in kube-kwok kube-kubelet kube-scheduler kube-controller-manager kube-apiserver kube-etcd; do
		stop_service "$s"
	done
}

# start_etcd: its data lives in the tmpfs run/ (no fsync cost on a loaded disk; it takes
# RAM: 64 MB write-ahead log segments, at most three with these settings, and the
# database, at most 1 GiB).
start_etcd() {
	if service_pid kube-etcd >/dev/null; then return 0; fi
	stop_control_plane
	port_free_or_ours "$KUBE_ETCD_PORT" kube-etcd
	port_free_or_ours "$KUBE_ETCD_PEER_PORT" kube-etcd
	rm -rf "$KUBE_ETCD_DATA"
	start_service kube-etcd "$KUBE_ETCD_DATA" env -i PATH="$CLEAN_PATH" \
		etcd --name arizuko-testhost --data-dir "$KUBE_ETCD_DATA" \
		--listen-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
		--initial-cluster "arizuko-testhost=http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
		--listen-metrics-urls "" --log-level warn \
		--snapshot-count=10000 --max-wals=2 --quota-backend-bytes=1073741824
}

start_containerd() {
	if service_pid kube-containerd >/dev/null; then return 0; fi
	rm -f "$KUBE_CTRD_SOCK" "$KUBE_CTRD_SOCK.ttrpc"
	start_service kube-containerd "$KUBE_CONF/containerd.toml" env -i PATH="$CLEAN_PATH" HOME=/root \
		containerd --config "$KUBE_CONF/containerd.toml"
}

# start_apiserver: watch lists (WatchList) need etcd's RequestWatchProgress, which Debian's
# etcd 3.4 lacks; with them on, kwok's watches ended every few seconds (its fake pods
# moved 10 s late, its lease updates conflicted): off, clients list and watch as before.
start_apiserver() {
	port_free_or_ours "$KUBE_API_PORT" kube-apiserver
	start_service kube-apiserver "$KUBE_PKI/apiserver.crt" env -i PATH="$CLEAN_PATH" \
		"$KUBE_BIN/kube-apiserver" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
		--secure-port="$KUBE_API_PORT" --etcd-servers="http://127.0.0.1:$KUBE_ETCD_PORT" \
		--tls-cert-file="$KUBE_PKI/apiserver.crt" --tls-private-key-file="$KUBE_PKI/apiserver.key" \
		--client-ca-file="$KUBE_PKI/ca.crt" \
		--service-account-key-file="$KUBE_PKI/sa.pub" --service-account-signing-key-file="$KUBE_PKI/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range="$KUBE_SERVICE_RANGE" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--kubelet-client-certificate="$KUBE_PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$KUBE_PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$KUBE_PKI/ca.crt" \
		--endpoint-reconciler-type=none --allow-privileged=true --profiling=false \
		--feature-gates=WatchList=false
}

# start_api_relay makes the API server reachable from pods (of the default network) at
# the address in-cluster clients use, https://$KUBE_API_SERVICE_IP:443: the address on an
# empty bridge of the host (this kernel has no dummy interfaces), a socat relaying each
# connection to the API server on loopback. TLS goes through untouched.
start_api_relay() {
	if [[ ! -e /sys/class/net/$KUBE_API_HOLDER ]]; then
		ip link add "$KUBE_API_HOLDER" type bridge
	fi
	ip addr replace "$KUBE_API_SERVICE_IP/32" dev "$KUBE_API_HOLDER"
	ip link set "$KUBE_API_HOLDER" up
	start_service kube-api-relay "TCP-LISTEN:443,bind=$KUBE_API_SERVICE_IP" env -i PATH="$CLEAN_PATH" \
		socat "TCP-LISTEN:443,bind=$KUBE_API_SERVICE_IP,fork,reuseaddr" "TCP:127.0.0.1:$KUBE_API_PORT"
}

api_relay_ok() {
	[[ $(curl -sS --max-time 3 --cacert "$KUBE_PKI/ca.crt" "https://$KUBE_API_SERVICE_IP/livez" 2>/dev/null) == ok ]]
}

start_controllers() {
	port_free_or_ours "$KUBE_KCM_PORT" kube-controller-manager
	port_free_or_ours "$KUBE_SCHEDULER_PORT" kube-scheduler
	start_service kube-controller-manager "$KUBE_CONF/controller-manager.kubeconfig" env -i PATH="$CLEAN_PATH" \
		"$KUBE_BIN/kube-controller-manager" --kubeconfig="$KUBE_CONF/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$KUBE_CONF/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$KUBE_CONF/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$KUBE_KCM_PORT" --leader-elect=false \
		--use-service-account-credentials=true --controllers='*,-nodeipam' \
		--service-account-private-key-file="$KUBE_PKI/sa.key" --root-ca-file="$KUBE_PKI/ca.crt" \
		--cluster-signing-cert-file="$KUBE_PKI/ca.crt" --cluster-signing-key-file="$KUBE_PKI/ca.key" \
		--cluster-name=arizuko-testhost --profiling=false --kube-api-qps=200 --kube-api-burst=400
	start_service kube-scheduler "$KUBE_CONF/scheduler.kubeconfig" env -i PATH="$CLEAN_PATH" \
		"$KUBE_BIN/kube-scheduler" --kubeconfig="$KUBE_CONF/scheduler.kubeconfig" \
		--authentication-kubeconfig="$KUBE_CONF/scheduler.kubeconfig" \
		--authorization-kubeconfig="$KUBE_CONF/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$KUBE_SCHEDULER_PORT" --leader-elect=false --profiling=false \
		--kube-api-qps=200 --kube-api-burst=400
}

start_kubelet() {
	port_free_or_ours "$KUBE_KUBELET_PORT" kube-kubelet
	kube_cgroup
	kmark created-container-logs "$CONTAINER_LOGS"
	kmark created-var-lib-kubelet "$KUBELET_FIXED"
	start_service kube-kubelet "$KUBE_CONF/kubelet.yaml" env -i PATH="$CLEAN_PATH" HOME=/root \
		"$KUBE_BIN/kubelet" --config="$KUBE_CONF/kubelet.yaml" --kubeconfig="$KUBE_CONF/node.kubeconfig" \
		--root-dir="$KUBE_KUBELET_ROOT" --hostname-override="$KUBE_NODE"
}

start_kwok() {
	start_service kube-kwok "$KUBE_CONF/kwok.yaml" env -i PATH="$CLEAN_PATH" HOME=/root \
		"$KUBE_BIN/kwok" --kubeconfig="$KUBE_ADMIN" --config="$KUBE_CONF/kwok.yaml" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--cidr=10.128.0.0/16 --node-ip=10.127.0.1 --node-lease-duration-seconds=40
}

# objects applies what the tests rely on: their namespace, the RuntimeClass of network
# "none" and the fake nodes.
objects() {
	kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $KUBE_NAMESPACE
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: $KUBE_NONET_CLASS
handler: $KUBE_NONET_HANDLER
EOF
	if ((KUBE_KWOK_NODES > 0)); then
		kwok_nodes | kctl apply --server-side --force-conflicts -f - >/dev/null
	fi
}

write_env() {
	local tmp
	tmp=$(mktemp "$KUBE_ENV.XXXXXX")
	{
		printf '# Written by hack/kube/up.sh; source it: . %s\n' "$KUBE_ENV"
		printf 'export %s=%q\n' \
			ARIZUKO_TEST_KUBECONFIG "$KUBE_ADMIN" \
			ARIZUKO_TEST_KUBE_CONTAINERD "unix://$KUBE_CTRD_SOCK" \
			ARIZUKO_TEST_KUBE_BIN "$KUBE_BIN" \
			ARIZUKO_TEST_KUBE_NONET_CLASS "$KUBE_NONET_CLASS" \
			ARIZUKO_TEST_KUBE_NODE "$KUBE_NODE"
	} >"$tmp"
	chmod 0644 "$tmp"
	mv -f "$tmp" "$KUBE_ENV"
}

main() {
	no_arguments "$@"
	require_root
	check_layout
	local t0=$SECONDS
	command -v etcd >/dev/null || die "etcd is missing: install Debian's etcd-server (hack/testhost/up.sh does)"
	if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
		die "containerd is missing: install Debian's containerd (hack/testhost/up.sh does)"
	fi
	mkdir -p "$KUBE_DIR" "$PIDDIR" "$LOGDIR" "$KUBE_STATE"
	rm -f "$KUBE_ENV"
	binaries
	local tb=$SECONDS
	mkdir -p "$KUBE_RUN"
	is_mountpoint "$KUBE_RUN" || mount -t tmpfs -o mode=0755,nosuid,nodev,size=2g tmpfs "$KUBE_RUN"
	[[ -f $KUBE_STATE/ip_forward ]] || cat /proc/sys/net/ipv4/ip_forward >"$KUBE_STATE/ip_forward"
	kmark created-cni-cache "$CNI_CACHE"
	pki
	pause_tag
	write_configs
	kwok_config

	start_etcd
	start_containerd
	wait_for kube-etcd etcd_ok
	start_apiserver
	wait_for kube-containerd containerd_ok
	pause_import
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-apiserver apiserver_ok
	start_api_relay
	start_controllers
	start_kubelet
	objects
	start_kwok
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-controller-manager https_ok "$KUBE_KCM_PORT" /healthz
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-scheduler https_ok "$KUBE_SCHEDULER_PORT" /healthz
	wait_for kube-api-relay api_relay_ok
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-kubelet kubelet_ok
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-kubelet node_ready
	local tready=$SECONDS
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-controller-manager node_schedulable
	TESTHOST_WAIT=$KUBE_WAIT wait_for kube-controller-manager default_sa
	((KUBE_KWOK_NODES == 0)) || TESTHOST_WAIT=$KUBE_WAIT wait_for kube-kwok kwok_ready
	[[ $(kctl get node "$KUBE_NODE" -o jsonpath='{.status.nodeInfo.kubeletVersion}') == v* ]] ||
		die "node $KUBE_NODE reports no kubelet version"
	write_env
	ksay "cluster up in $((SECONDS - tb))s after the binaries ($((SECONDS - t0))s in all; node $KUBE_NODE Ready at $((tready - tb))s): $KUBE_KWOK_NODES kwok nodes; env: . $KUBE_ENV"
}

main "$@"
