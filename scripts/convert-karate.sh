#!/usr/bin/env bash
# Converts Zachary's karate club network (34 members, 78 friendships; W. W.
# Zachary, "An Information Flow Model for Conflict and Fission in Small
# Groups", Journal of Anthropological Research 33, 452-473, 1977), as
# shipped in Debian's python3-networkx 2.8.8-1 (networkx/generators/social.py,
# BSD-3-Clause), into data/karate-edges.csv (columns u,v, one row per edge,
# u < v, members numbered 0-33 as networkx numbers them) and
# data/karate-known.csv (the two members whose number of ties is public in
# the example: 0, the instructor, and 33, the administrator). Run once; the
# outputs are committed. Needs apt-get and dpkg-deb (no Python): the package
# is downloaded into a temporary directory, checked against its SHA-256 and
# unpacked there; nothing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

version=2.8.8-1
sha256=69888603d1b54696f5c3d02d05527628d2d18661d845109a62fe24aff241aa7b
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "python3-networkx=$version" 2>/dev/null)
deb="$tmp/python3-networkx_${version}_all.deb"
echo "$sha256  $deb" | sha256sum --check --quiet
dpkg-deb -x "$deb" "$tmp/x"
social="$tmp/x/usr/lib/python3/dist-packages/networkx/generators/social.py"

# The adjacency matrix is the text between 'zacharydat = """\' and the
# closing '"""': row i, column j holds the number of contexts in which i
# and j interacted (0: no tie). networkx adds an edge of its undirected
# graph wherever an entry is >= 1, so a pair is an edge if either of its two
# entries is (the matrix is not symmetric at 22-33: 0 one way, 3 the other).
awk '
	/zacharydat = """\\/ { on = 1; next }
	on && /"""/ { sub(/""".*/, ""); if (length($0)) rows[n++] = $0; on = 0; next }
	on { rows[n++] = $0 }
	END {
		if (n != 34) { print "expected 34 rows, found " n > "/dev/stderr"; exit 1 }
		print "u,v"
		for (i = 0; i < n; i++) {
			m = split(rows[i], w, " ")
			if (m != 34) { print "row " i ": " m " columns" > "/dev/stderr"; exit 1 }
			for (j = 0; j < 34; j++) a[i, j] = w[j + 1]
		}
		for (i = 0; i < n; i++)
			for (j = i + 1; j < 34; j++)
				if (a[i, j] >= 1 || a[j, i] >= 1) print i "," j
	}' "$social" > data/karate-edges.csv.tmp
mv data/karate-edges.csv.tmp data/karate-edges.csv
printf 'vertex\n0\n33\n' > data/karate-known.csv
echo "wrote data/karate-edges.csv: $(($(wc -l < data/karate-edges.csv) - 1)) edges; md5 $(md5sum < data/karate-edges.csv | cut -c1-32)"
