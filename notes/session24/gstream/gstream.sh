# Session 24: o's shipped GEMV kernels in the probes' harness, as shipped and with coherent weight loads, beside
# session 23's ostream streams; nvcc only (no carry), ~1 min. Run from the repository root.
# Run on branch z-tail (gstream.cu's compressed-GEMV cases use its x tile): git checkout z-tail first.
set -e
D=notes/session24/gstream
mkdir -p /tmp/coh
cp kernels_src/*.cuh /tmp/coh/
sed -i 's/ld\.global\.nc\.L1::no_allocate/ld.global.L1::no_allocate/g' /tmp/coh/common.cuh
grep -c "ld.global.L1::no_allocate" /tmp/coh/common.cuh
F="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
nvcc $F -Ikernels_src -o /tmp/gstream_nc $D/gstream.cu &
nvcc $F -I/tmp/coh -o /tmp/gstream_coh $D/gstream.cu &
nvcc $F -o /tmp/ostream notes/session23/next/ostream.cu &
wait
for b in ostream gstream_nc gstream_coh; do
  echo "=== $b"; timeout -s INT 100 /tmp/$b
done > $OUT/gstream.txt 2>&1
cat $OUT/gstream.txt
