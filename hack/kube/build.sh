#!/usr/bin/env bash
# build.sh: build the Kubernetes binaries the test cluster needs, once per version.
#
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl from
# k8s.io/kubernetes, and kwok, all through the Go module proxy (no internet beyond it).
# k8s.io/kubernetes replaces its staging modules with ./staging/..., which a dependency
# ignores, so a consumer module maps each to its published v0.<minor>.<patch>.
# The binaries are cached by Kubernetes and Go version under ARIZUKO_KUBE_CACHE
# (default /var/tmp/arizuko-k8s), never in the clone: about 1,500 CPU-seconds cold,
# nothing when present. Prints the bin directory on its last line.
set -euo pipefail

usage() {
	cat <<USAGE
usage: $0
Builds (or finds cached) Kubernetes v\$ARIZUKO_KUBE_VERSION and kwok v\$ARIZUKO_KWOK_VERSION binaries.
Environment: ARIZUKO_KUBE_CACHE (default /var/tmp/arizuko-k8s), ARIZUKO_KUBE_VERSION
(default 1.37.2), ARIZUKO_KWOK_VERSION (default 0.8.0).
USAGE
}
case ${1:-} in -h | --help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

V=${ARIZUKO_KUBE_VERSION:-1.37.2}
KWOK=${ARIZUKO_KWOK_VERSION:-0.8.0}
CACHE=${ARIZUKO_KUBE_CACHE:-/var/tmp/arizuko-k8s}
GOV=$(go env GOVERSION)
BIN=$CACHE/v$V-kwok$KWOK-$GOV/bin
WANT=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kwok)

have_all() {
	local b
	for b in "${WANT[@]}"; do [[ -x $BIN/$b ]] || return 1; done
}
if have_all; then
	echo "$BIN"
	exit 0
fi

WORK=$CACHE/build-v$V
mkdir -p "$WORK" "$BIN"
exec 9>"$CACHE/build.lock"
flock 9
if have_all; then
	echo "$BIN"
	exit 0
fi

export GOMODCACHE=$WORK/gomod GOCACHE=$WORK/gocache GOFLAGS=-mod=mod CGO_ENABLED=0
export GOTOOLCHAIN=local
SV=0.${V#1.}
MINOR=${V#1.}
MINOR=${MINOR%%.*}
start=$(date +%s)
echo "building Kubernetes v$V and kwok v$KWOK into $BIN (about 1,500 CPU-seconds once)" >&2

mod=$WORK/mod
mkdir -p "$mod"
cd "$mod"
go list -m -json "k8s.io/kubernetes@v$V" >/dev/null
{
	printf 'module example.com/arizukok8sbuild\n\ngo %s\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' \
		"$(sed -n 's/^go //p' "$GOMODCACHE/cache/download/k8s.io/kubernetes/@v/v$V.mod")" "$V"
	grep '=> ./staging' "$GOMODCACHE/cache/download/k8s.io/kubernetes/@v/v$V.mod" |
		awk -v sv="$SV" '{print "\t"$1" => "$1" v"sv}'
	printf ')\n'
} >go.mod
printf '//go:build tools\n\npackage tools\n\nimport (\n' >tools.go
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >>tools.go
done
printf ')\n' >>tools.go
go mod tidy >&2
LD="-s -w -X k8s.io/component-base/version.gitVersion=v$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$MINOR"
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	[[ -x $BIN/$c ]] && continue
	echo "building $c" >&2
	go build -trimpath -ldflags "$LD" -o "$BIN/$c.new" "k8s.io/kubernetes/cmd/$c" >&2
	mv "$BIN/$c.new" "$BIN/$c"
done
if [[ ! -x $BIN/kwok ]]; then
	echo "building kwok" >&2
	(cd "$WORK" && GOBIN=$WORK/gobin go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@v$KWOK" >&2)
	mv "$WORK/gobin/kwok" "$BIN/kwok"
	# kwok needs its stage files; they come with its module.
	kdir=$GOMODCACHE/sigs.k8s.io/kwok@v$KWOK/kustomize/stage
	rm -rf "$BIN/../kwok-stages"
	mkdir -p "$BIN/../kwok-stages"
	cp -r "$kdir/node/fast/node-initialize.yaml" "$kdir/node/heartbeat-with-lease" "$kdir/pod/general" "$BIN/../kwok-stages/"
	chmod -R u+w "$BIN/../kwok-stages"
fi
# The build cache is 4 GB and the module cache 0.7 GB: the binaries are what is kept.
chmod -R u+w "$WORK" && rm -rf "$WORK"
echo "built in $(($(date +%s) - start)) s" >&2
echo "$BIN"
