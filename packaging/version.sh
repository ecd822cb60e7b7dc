#!/usr/bin/env bash
# version.sh: the package version (without a Debian revision or RPM release), printed.
#
# $PKG_VERSION wins. Otherwise a tag vX.Y.Z gives X.Y.Z (X.Y.Z+gitN.HASH for N commits
# after it); without a tag it is 0.0~gitYYYYMMDDhhmmss.HASH from HEAD's commit time, so
# every commit sorts after the one before in dpkg and rpm alike.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n ${PKG_VERSION:-} ]]; then
	v=$PKG_VERSION
elif desc=$(git describe --tags --match 'v[0-9]*' --long 2>/dev/null); then
	# vX.Y.Z-N-gHASH
	base=${desc%-*-g*}
	base=${base#v}
	rest=${desc#"v$base"-}
	n=${rest%%-*}
	hash=${rest#*-g}
	v=$base
	[[ $n == 0 ]] || v="$base+git$n.$hash"
else
	hash=$(git rev-parse --short=7 HEAD)
	when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
	v="0.0~git$when.$hash"
fi
# Both dpkg and rpm accept these characters in an upstream version; '-' is for the revision.
[[ $v =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || {
	echo "version.sh: $v: a package version starts with a digit and holds only letters, digits, '.', '+', '~'" >&2
	exit 1
}
printf '%s\n' "$v"
