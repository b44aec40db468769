# Session 25 call 2b (branch z-ew): what the exception warp costs, by parts: built with 4 resident CTAs a SM asked
# of ptxas, OKC_ZGEMV_EW_PROBE = 0 (the warp as written), 1 (it writes a zero tile, nothing else), 2 (it stages
# the entries, then writes zeros); nvcc only.
set -e
F="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DOKC_ZGEMV_MIN_BLOCKS=4"
for p in 0 1 2; do nvcc $F -DOKC_ZGEMV_EW_PROBE=$p -Ikernels_src -o /tmp/zflow_ew$p notes/session25/zflow/zflow.cu & done
wait
for p in 0 1 2; do echo "=== EW probe $p"; timeout -s INT 120 /tmp/zflow_ew$p | grep -v "^check"; done > $OUT/zew_parts.txt 2>&1 || echo "exit $?" >> $OUT/zew_parts.txt
cat $OUT/zew_parts.txt
