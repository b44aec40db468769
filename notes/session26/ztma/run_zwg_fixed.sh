# Session 26, call 8: the ztma probe again, `zwg` cases only, after the probe's data was fixed (slots under a patch
# decode to +0.0); nvcc only. (Run inline as this one command line.)
set -e; nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels_src -o /tmp/ztma notes/session26/ztma/ztma.cu 2>/dev/null; timeout -s INT 100 /tmp/ztma zwg > $OUT/zwg_fixed.txt 2>&1 || echo "exit $?" >> $OUT/zwg_fixed.txt; grep -E "check|WRONG|checks|zwg|entry|launch floor" $OUT/zwg_fixed.txt | tail -45
