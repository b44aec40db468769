# Session 24: gstream's gemv_parts with the CTA's end varied (END = 0..4), as shipped (ld.global.nc), run twice.
# Run on branch z-tail (gstream.cu's compressed-GEMV cases use its x tile): git checkout z-tail first.
set -e
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels_src -o /tmp/gstream_nc notes/session24/gstream/gstream.cu
for i in 1 2; do timeout -s INT 100 /tmp/gstream_nc; done > $OUT/gstream_end.txt 2>&1
grep -E "launch floor|parts|entry" $OUT/gstream_end.txt
