#!/usr/bin/env bash
# The A/B pairs of limits.fast_p384 (on: the default; off: appended to the
# dev log's config.yaml), production mix, as fast as possible and at
# 1,000/s, alternating which goes first. Usage: ab.sh OUTROOT PAIRS RATES
set -euo pipefail
out=$1; pairs=${2:-3}; rates=${3:-0}
bin=/tmp/mosaic-ab
(cd "$(dirname "$0")/../../.." && go build -o $bin ./cmd/mosaic && go build -o /tmp/benchrun-ab ./bench/benchrun)
mkdir -p $out
for i in $(seq 1 $pairs); do
  for v in on off; do
    [[ $((i % 2)) == 0 ]] && v=$([[ $v == on ]] && echo off || echo on)
    d=$(mktemp -d /tmp/ab384.XXXX)
    $bin serve -dev -data $d -listen 127.0.0.1:0 > $d/first.log 2>&1 & p=$!
    for _ in $(seq 100); do [[ -f $d/dev.json ]] && break; sleep 0.1; done
    kill $p; wait $p || true
    if [[ $v == off ]]; then printf 'limits:\n    fast_p384: false\n' >> $d/config.yaml; fi
    $bin serve -dev -data $d > $d/serve.log 2>&1 & p=$!
    sleep 2
    /tmp/benchrun-ab -mosaic $bin -pid $p -rates $rates -step 25s -issuers production -workers 3000 -dup 0.1 -readers 0 -dev $d \
      -hammer-flag -monitoring=file://$d/data -out $out/$i-$v > $out/$i-$v.log 2>&1 || echo "benchrun $i $v failed"
    kill $p; wait $p || true
    rm -rf $d
  done
done
