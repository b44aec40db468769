# Session 24, call 1 (branch z-probe, timing only, no carry). The ostream probe (session 23's, run first this
# session) streamed o's 12.6 MB in the compressed GEMV's grid (512 x 256, 6 loads, 2 trips, with the GEMVs' end)
# in 7.58-7.68 us against 8.51-8.67 for 16.8 MB; the compressed GEMV takes ~9.3 on o. Which of its parts costs
# the ~1.7 us? OKC_Z_PROBE bits: 1 no exception staging, 2 no exception pass, 4 no decode / mma, 8 no x loads.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/ostream notes/session23/next/ostream.cu \
  && timeout -s INT 100 /tmp/ostream > $OUT/ostream.txt 2>&1
timeout -s INT 400 python3 -m generator ab --rounds 6 --time-wrong --env OKC_Z_PROBE=0,2,3,6,7,15 \
  o:1:z:8,1,1,0,1,0 o:8:z:8,1,1,0,1,0 o:16:z:8,1,1,0,1,0 o:1:z:4,1,4,0,1,0 o:1:gemv:8,1,2,1,2,0 \
  o:8:gemv:8,1,4,0,2,0 > $OUT/ab_zprobe.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -45 $OUT/ab_zprobe.txt; tail -16 $OUT/ostream.txt
