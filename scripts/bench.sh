#!/usr/bin/env bash
# The project's performance figures, measured in one run on this machine:
# the exact noise against the generator, consistency against the memory
# floor (and a numpy sweep where numpy is installed), a full release, the
# CSV reader, a workload, integer rounding and the server's durable ledger.
# Run it on an otherwise idle machine; it prints a table and keeps the raw
# `go test -bench` output in bench-out/ for benchstat.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-out
mkdir -p "$out"
count=${BENCH_COUNT:-3}

bench() { # package, pattern, benchtime, file
	go test -run '^$' -bench "$2" -benchtime "$3" -count "$count" "$1" | tee "$out/$4.txt" >/dev/null
}

echo "measuring on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
bench ./noise 'BenchmarkUint64$|BenchmarkDiscreteLaplace|BenchmarkDiscreteGaussian|BenchmarkLaplaceAddTo' 200ms noise
bench ./cube 'BenchmarkMemoryFloor/cells=1e8|BenchmarkConsistent/cells=1e8' 5x consistency
bench ./cube 'BenchmarkRelease/cells=1e8' 3x release
bench ./cube 'BenchmarkFromCSV$' 10x csv
bench ./cube 'BenchmarkWorkload' 3x workload
bench ./cube 'BenchmarkRoundInteger' 5x integer
bench ./server 'BenchmarkServe' 3000x serve

# best (smallest) ns/op of a benchmark across the runs
# (benchmark names lose their -GOMAXPROCS suffix first)
best() { awk -v b="$2" '{sub(/-[0-9]+$/, "", $1)} $1 ~ b {v=$3; if (min=="" || v<min) min=v} END {print min}' "$out/$1.txt"; }
metric() { awk -v b="$2" -v m="$3" '{sub(/-[0-9]+$/, "", $1)} $1 ~ b {for (i=4;i<=NF;i++) if ($(i+1)==m) {v=$i; if (max=="" || v>max) max=v}} END {print max}' "$out/$1.txt"; }
calc() { awk "BEGIN {print $1}"; }

word=$(best noise 'BenchmarkUint64')
printf '\n%-58s %s\n' "benchmark (best of $count)" "result"
printf '%-58s %.1f ns\n' "ChaCha8, one 64-bit word" "$word"
for s in 'scale=1$' 'scale=1000$' 'scale=2\^20$' 'scale=2\^40$'; do
	v=$(best noise "BenchmarkDiscreteLaplace/$s")
	[[ -n $v ]] && printf '%-58s %.1f ns (%.2fx a word, %.0f M/s)\n' "exact discrete Laplace, ${s%\$}" "$v" "$(calc "$v/$word")" "$(calc "1000/$v")"
done
for s in 'sigma=1$' 'sigma=2\^20$'; do
	v=$(best noise "BenchmarkDiscreteGaussian/$s")
	[[ -n $v ]] && printf '%-58s %.1f ns (%.0f M/s)\n' "exact discrete Gaussian, ${s%\$}" "$v" "$(calc "1000/$v")"
done
floor=$(best consistency 'BenchmarkMemoryFloor/cells=1e8')
printf '%-58s %.3f s\n' "memory floor, 10^8 cells (one read + one read-write pass)" "$(calc "$floor/1e9")"
for k in 1 2 4; do
	v=$(best consistency "BenchmarkConsistent/cells=1e8/exact=$k\$")
	[[ -n $v ]] && printf '%-58s %.3f s (%.2fx the floor)\n' "consistency, 10^8 cells, $k invariant(s)" "$(calc "$v/1e9")" "$(calc "$v/$floor")"
done
v=$(best release 'BenchmarkRelease/cells=1e8')
[[ -n $v ]] && printf '%-58s %.3f s\n' "full release (noise + consistency), 10^8 cells, 4 inv." "$(calc "$v/1e9")"
printf '%-58s %s MB/s\n' "building a cube from CSV" "$(metric csv 'BenchmarkFromCSV' 'MB/s')"
grep -h '^Benchmark' "$out/workload.txt" "$out/integer.txt" | awk '{printf "%-58s %.3f s\n", $1, $3/1e9}' | sort -u -k1,1
grep -h '^BenchmarkServe' "$out/serve.txt" | awk '{line=$1; for (i=3;i<NF;i+=2) line=line sprintf(" %s %s", $i, $(i+1)); print line}'

py=
for p in python3 /usr/bin/python3; do
	if "$p" -c 'import numpy' 2>/dev/null; then
		py=$p
		break
	fi
done
if [[ -n $py ]]; then
	echo
	"$py" scripts/numpy_consistency.py --repeat "$count" | while read -r line; do
		k=$(sed -E 's/.*exact=([0-9]+).*/\1/' <<<"$line")
		np=$(awk '{print $(NF-1)}' <<<"$line")
		kd=$(best consistency "BenchmarkConsistent/cells=1e8/exact=$k\$")
		printf '%-58s %s s (knowdp %.3f s: %.1fx faster)\n' "${line%%:*}" "$np" "$(calc "$kd/1e9")" "$(calc "$np*1e9/$kd")"
	done
else
	echo "(numpy is not installed: the numpy sweep is skipped)"
fi
