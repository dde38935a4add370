#!/usr/bin/env bash
# Run idem's analyzers over public Go codebases that move money or send
# messages, at pinned commits, to judge findings by hand (docs/vet.md).
# Test-only: nothing it checks out is committed or vendored.
#
# Usage: idemvet/scripts/realworld.sh MIRROR_GIT_DIR [COMMIT] [OUT_DIR]
#   MIRROR_GIT_DIR  a bare clone (e.g. from a git mirror) of the codebase
#   COMMIT          the commit to check out; defaults to the pinned one below
#                   for the known codebases, else HEAD
#   OUT_DIR         where findings go (default /tmp/idemvet-realworld)
#   IDEMVET_FLAGS   (environment) extra idem-vet flags, e.g. -testfiles
#   MODULES         (environment) the module directories to run in, relative
#                   to the tree's root; default every go.mod in the tree, or
#                   the pinned list below for the known codebases
#
# It builds idem-vet, extracts the commit to a scratch directory, points
# each module's requirements on its sibling modules at the tree (in the
# scratch copy only), downloads the rest through the module proxy and runs
#   idem-vet ./...            (findings outside _test.go files)
# in each Go module of the tree, writing NAME.txt with the findings and the
# exit status. Exit 3 from idem-vet means findings, not failure.
set -euo pipefail
mirror=${1:?usage: realworld.sh MIRROR_GIT_DIR [COMMIT] [OUT_DIR]}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${3:-/tmp/idemvet-realworld}
name=$(basename "$(dirname "$mirror")")
modules=""
case "$name" in
formancehq+payments)
	pin=5fb996ac86113c04259bf38bf7b8d590f3caf251
	# The connectors that move money and set idempotency keys; the root
	# module (a Temporal worker) is left out for build time.
	modules="ce/plugins/stripe ce/plugins/column ce/plugins/bankingcircle"
	;;
frain-dev+convoy) pin=2b60cc652e1d4babc1857280d5911817960e83e7 ;;
knadh+listmonk) pin=911e0b774abad4fbf7b534be43a34a80fb6ace5b ;;
*) pin=HEAD ;;
esac
commit=${2:-$pin}
modules=${MODULES:-$modules}
mkdir -p "$out"
bin="$out/idem-vet"
(cd "$here" && GOWORK=off go build -o "$bin" ./cmd/idem-vet)
src=$(mktemp -d "${TMPDIR:-/tmp}/idemvet-src.XXXXXX")
trap 'rm -rf "$src"' EXIT
git --git-dir="$mirror" archive "$commit" | tar -x -C "$src"
report="$out/$name.txt"
{
	echo "# $name at $commit"
	echo "# idem-vet ${IDEMVET_FLAGS:-}./... in each module; $(date -u +%FT%TZ)"
} >"$report"
while IFS= read -r mod; do
	dir=$(dirname "$mod")
	echo "## module ${dir#"$src"}" >>"$report"
	(
		cd "$dir"
		# Modules of the same tree come from the tree (a plugin module
		# may require a version of a sibling the proxy does not serve).
		while IFS= read -r other; do
			odir=$(dirname "$other")
			[ "$odir" = "$dir" ] && continue
			opath=$(sed -n 's/^module[[:space:]]*//p' "$other" | head -1)
			[ -n "$opath" ] && go mod edit -replace "$opath=$(realpath --relative-to="$dir" "$odir")"
		done < <(find "$src" -name go.mod -not -path '*/vendor/*' -not -path '*/testdata/*' -not -path '*/template/*')
		GOWORK=off GOFLAGS=-mod=mod go mod download >/dev/null 2>&1 || true
		start=$(date +%s.%N)
		set +e
		GOWORK=off GOFLAGS=-mod=mod "$bin" ${IDEMVET_FLAGS:-} ./... >"$out/$name.raw" 2>&1
		rc=$?
		set -e
		end=$(date +%s.%N)
		sed "s|$src/||g" "$out/$name.raw" >>"$report"
		echo "## exit $rc in $(echo "$end - $start" | bc) s" >>"$report"
	)
done < <(if [ -n "$modules" ]; then
	for m in $modules; do echo "$src/$m/go.mod"; done
else
	find "$src" -name go.mod -not -path '*/vendor/*' -not -path '*/testdata/*' | sort
fi)
rm -f "$out/$name.raw"
echo "$report"
