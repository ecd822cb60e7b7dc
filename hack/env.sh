# shellcheck shell=bash
# env.sh: the Go toolchain and build flags every script of the project uses (sourced).

# shellcheck source=hack/pkg.sh
. "$(dirname "${BASH_SOURCE[0]}")/pkg.sh"

# go build and go vet need no tag. These add runtime/podman's test that decodes the create
# request through the bindings' specgen package, which builds only without gpgme (and,
# with cgo, without the btrfs driver's C headers); every script of the project uses them.
export GOFLAGS="-tags=remote,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper,containers_image_openpgp ${GOFLAGS:-}"
export CGO_ENABLED=${CGO_ENABLED:-0}

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	export PATH=/usr/local/go/bin:$PATH
fi
if ! command -v go >/dev/null 2>&1; then
	pkg_say "no Go toolchain: installing the distribution's Go (about a minute)"
	if command -v apt-get >/dev/null 2>&1; then
		pkg_install golang-go >/dev/null
	else
		pkg_install golang >/dev/null
	fi
fi
# A distro Go older than go.mod asks for fetches the right toolchain through the module proxy.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
command -v go >/dev/null 2>&1 || {
	echo "arizukod: no Go toolchain found; install Go 1.21 or newer (it fetches the version go.mod needs)" >&2
	exit 1
}
