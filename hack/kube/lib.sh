# shellcheck shell=bash disable=SC2034
# lib.sh: paths and helpers shared by hack/kube/up.sh and down.sh (sourced, never run).
#
# The test host's Kubernetes cluster keeps everything under $ARIZUKO_TESTHOST_DIR/kube:
# certificates, configuration, containerd's image store and the kubelet's root stay
# between starts; run/ is a tmpfs (etcd's data, containerd's state, the pods' network
# namespaces and IP leases), so every start is a fresh cluster on cached images.

# shellcheck source=hack/testhost/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testhost/lib.sh"

KUBE_DIR=$TESTHOST_DIR/kube
PIDDIR=$KUBE_DIR/pids
LOGDIR=$KUBE_DIR/logs
KUBE_STATE=$KUBE_DIR/state
KUBE_RUN=$KUBE_DIR/run
KUBE_PKI=$KUBE_DIR/pki
KUBE_CONF=$KUBE_DIR/config
KUBE_ENV=$KUBE_DIR/env
KUBE_ETCD_DATA=$KUBE_RUN/etcd
KUBE_CTRD_ROOT=$KUBE_DIR/containerd
KUBE_CTRD_STATE=$KUBE_RUN/containerd
KUBE_CTRD_SOCK=$KUBE_CTRD_STATE/containerd.sock
KUBE_KUBELET_ROOT=$KUBE_DIR/kubelet
KUBE_POD_LOGS=$KUBE_DIR/pod-logs
KUBE_CNI=$KUBE_DIR/cni
KUBE_ADMIN=$KUBE_CONF/admin.kubeconfig
# The cluster's binaries (hack/kube/build.sh): up.sh sets it and records it in $KUBE_STATE/bin.
KUBE_BIN=${KUBE_BIN:-}

KUBE_NODE=localhost
KUBE_NAMESPACE=arizuko
KUBE_NONET_CLASS=arizuko-nonet
KUBE_NONET_HANDLER=runc-nonet
KUBE_CGROUP=/arizuko-kube
KUBE_BRIDGE=arizk0
KUBE_NONET_BRIDGE=ariznonet0
KUBE_POD_SUBNET=10.244.0.0/24
KUBE_NONET_SUBNET=10.245.0.0/24
KUBE_SERVICE_RANGE=10.96.0.0/24
# The ClusterIP of the API's own Service "kubernetes", which the kubelet gives every pod
# as KUBERNETES_SERVICE_HOST/PORT. With no kube-proxy, the host holds that address on an
# empty bridge of its own and relays its port 443 to the API server (kube-api-relay).
KUBE_API_SERVICE_IP=10.96.0.1
KUBE_API_HOLDER=arizk-api
KUBE_API_PORT=6443
KUBE_ETCD_PORT=2379
KUBE_ETCD_PEER_PORT=2380
KUBE_KCM_PORT=10257
KUBE_SCHEDULER_PORT=10259
KUBE_KUBELET_PORT=10250
KUBE_KUBELET_HEALTHZ_PORT=10248
KUBE_KWOK_NODES=${ARIZUKO_KUBE_KWOK_NODES:-100}
KUBE_WAIT=${ARIZUKO_KUBE_WAIT:-180}
# The CNI networks' names: libcni caches each attachment under /var/lib/cni/results as
# <network>-<container>-<interface>, which down.sh removes.
KUBE_NET=arizuko-kube
KUBE_NONET_NET=arizuko-nonet
CNI_CACHE=/var/lib/cni
CONTAINER_LOGS=/var/log/containers
# The kubelet's device-plugin socket is at a fixed path, whatever its --root-dir.
KUBELET_FIXED=/var/lib/kubelet

ksay() { printf 'kube: %s\n' "$*" >&2; }

# kctl runs the cluster's kubectl as the admin.
kctl() {
	"$KUBE_BIN/kubectl" --kubeconfig "$KUBE_ADMIN" --request-timeout=30s "$@"
}

kctr() {
	ctr --address "$KUBE_CTRD_SOCK" --namespace k8s.io "$@"
}

# kmark MARKER PATH records that PATH, outside the kube directory, did not exist before
# up.sh made it, so down.sh removes it again.
kmark() {
	mkdir -p "$KUBE_STATE"
	[[ -e $2 ]] || touch "$KUBE_STATE/$1"
}

# https_ok PORT PATH: the component on 127.0.0.1:PORT answers ok on PATH (its health
# endpoints are open to anonymous callers).
https_ok() {
	[[ $(curl -sSk --max-time 3 "https://127.0.0.1:$1$2" 2>/dev/null) == ok ]]
}
