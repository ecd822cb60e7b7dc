#!/usr/bin/env bash
# build.sh: dist/arizukod-VERSION-1.ARCH.rpm with rpmbuild, from the binaries of
# `make build`; then systemd-analyze verify on its units, rpmlint on the package (failing
# on errors), and its file list and scripts (rpm -qlp, rpm -qp --scripts) printed to
# dist/rpm/. rpmbuild and rpmlint are installed with apt-get or dnf when missing (as root).
#
#   PKG_VERSION  the version (default: packaging/version.sh)
#   RPMLINT=0    skip rpmlint
set -euo pipefail
cd "$(dirname "$0")/../.."

missing=()
command -v rpmbuild >/dev/null || missing+=(rpmbuild)
command -v rpmlint >/dev/null || missing+=(rpmlint)
command -v systemd-analyze >/dev/null || missing+=(systemd)
if [[ ${#missing[@]} -gt 0 ]]; then
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "rpm: installing ${missing[*]/rpmbuild/rpm}"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]/rpmbuild/rpm}" >/dev/null
	elif [[ $(id -u) -eq 0 ]] && command -v dnf >/dev/null; then
		dnf install -y -q "${missing[@]/rpmbuild/rpm-build}" >/dev/null
	else
		echo "rpm: missing ${missing[*]} (Debian: apt-get install rpm rpmlint; Fedora: dnf install rpm-build rpmlint)" >&2
		exit 1
	fi
fi
version=$(packaging/version.sh)
work=$PWD/dist/rpm
rm -rf "$work"
mkdir -p "$work"/{stage,topdir}
bash packaging/stage.sh rpm "$work/stage"
bash packaging/check-units.sh "$work/stage"

macros=()
if [[ -z $(rpm --eval '%{?_unitdir}') ]]; then
	macros=(--load "$PWD/packaging/rpm/macros.systemd-fallback")
	echo "rpm: no systemd rpm macros here: using packaging/rpm/macros.systemd-fallback"
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
when=$(LC_ALL=C git log -1 --format=%cd --date=format:'%a %b %d %Y' HEAD 2>/dev/null || LC_ALL=C date +'%a %b %d %Y')

rpmbuild -bb "${macros[@]}" \
	--define "_topdir $work/topdir" \
	--define "pkg_version $version" \
	--define "pkg_commit $commit" \
	--define "pkg_changelog_date $when" \
	--define "stagedir $work/stage" \
	packaging/rpm/arizukod.spec >"$work/build.log" 2>&1 || {
	tail -n 40 "$work/build.log" >&2
	echo "rpm: rpmbuild failed; the whole log is $work/build.log" >&2
	exit 1
}
rpmfile=$(find "$work/topdir/RPMS" -name "arizukod-$version-1*.rpm" | head -n 1)
[[ -n $rpmfile ]] || {
	echo "rpm: rpmbuild made no package; see $work/build.log" >&2
	exit 1
}
rm -f dist/arizukod-*.rpm
mv "$rpmfile" dist/
rpmfile=dist/$(basename "$rpmfile")
echo "rpm: $rpmfile"

rpm -qlpv "$rpmfile" >"$work/files.txt"
rpm -qp --scripts "$rpmfile" >"$work/scripts.txt"
rpm -qp --requires "$rpmfile" >"$work/requires.txt"
echo "rpm: $(wc -l <"$work/files.txt") files (dist/rpm/files.txt), scripts in dist/rpm/scripts.txt"

if [[ ${RPMLINT:-1} != 0 ]]; then
	rpmlint -c packaging/rpm/rpmlint.toml "$rpmfile" | tee "$work/rpmlint.txt" || true
	if grep -qE '^[0-9]+ packages and [0-9]+ specfiles checked; [1-9][0-9]* errors' "$work/rpmlint.txt" ||
		grep -qE ': E: ' "$work/rpmlint.txt"; then
		echo "rpm: rpmlint reports errors" >&2
		exit 1
	fi
	echo "rpm: rpmlint: no errors"
fi
