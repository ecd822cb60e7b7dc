#!/usr/bin/env bash
# build.sh: dist/arizukod_VERSION-REV_ARCH.deb with debhelper, from the binaries of
# `make build`; then systemd-analyze verify on its units and lintian on the package,
# failing on any error. dpkg-dev, debhelper and lintian are installed with apt-get when
# missing (as root).
#
#   PKG_VERSION   the upstream version (default: packaging/version.sh)
#   DEB_REVISION  the Debian revision (default 1)
#   LINTIAN=0     skip lintian
set -euo pipefail
cd "$(dirname "$0")/../.."

missing=()
for tool in dpkg-buildpackage:dpkg-dev dh:debhelper lintian:lintian systemd-analyze:systemd file:file; do
	command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "deb: installing ${missing[*]}"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	else
		echo "deb: missing ${missing[*]}: apt-get install ${missing[*]}" >&2
		exit 1
	fi
fi

version=$(packaging/version.sh)
revision=${DEB_REVISION:-1}
arch=$(dpkg --print-architecture)
goarch=$(file -b bin/arizukod 2>/dev/null | sed -n 's/.*ELF 64-bit LSB [a-z ]*executable, \([^,]*\),.*/\1/p')
case "$arch:$goarch" in
amd64:x86-64 | arm64:ARM\ aarch64 | *:) ;;
*)
	echo "deb: bin/arizukod is built for $goarch, not for $arch" >&2
	exit 1
	;;
esac

work=dist/deb
src=$work/arizukod-$version
rm -rf "$work"
mkdir -p "$src"
cp -a packaging/deb/debian "$src/debian"
bash packaging/stage.sh deb "$src/stage"
bash packaging/check-units.sh "$src/stage"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
when=$(git log -1 --format=%cD HEAD 2>/dev/null || date -R)
maintainer=$(sed -n 's/^Maintainer: //p' packaging/deb/debian/control)
cat >"$src/debian/changelog" <<EOF
arizukod ($version-$revision) unstable; urgency=medium

  * Package of commit $commit, built by packaging/deb/build.sh.

 -- $maintainer  $when
EOF

(cd "$src" && dpkg-buildpackage --build=binary --no-sign --no-check-builddeps >../build.log 2>&1) || {
	tail -n 40 "$work/build.log" >&2
	echo "deb: dpkg-buildpackage failed; the whole log is $work/build.log" >&2
	exit 1
}
deb=arizukod_${version}-${revision}_${arch}.deb
rm -f dist/arizukod_*.deb
mv "$work/$deb" dist/
echo "deb: dist/$deb"

if [[ ${LINTIAN:-1} != 0 ]]; then
	# Errors fail the build; warnings and the rest are printed.
	lintian --fail-on error --info --display-level '>=pedantic' "dist/$deb" || {
		echo "deb: lintian reports errors" >&2
		exit 1
	}
	echo "deb: lintian: no errors"
fi
