# Session 27, call 3 (branch zwalk, timing only): where the walk's 1.1-1.6 us over zgemv on o go (calls 1-2).
# OKC_WALK_PROBE bit 0: interleaved walk order (CTA c takes blocks c, c + grid, ...; a real variant), bit 1: no
# per-block reduction (park, barrier, sum, writes skipped: wrong). zgemv's launches ignore it (reference rows).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 400 python3 -m generator ab --rounds 6 --time-wrong --env OKC_WALK_PROBE=0,1,2,3 \
  o:1:z:16,1,1,2,4,0 o:16:z:16,1,1,2,4,0 o:16:z:8,1,2,2,2,0 o:16:z:16,1,1,4,4,0 \
  o:1:z:8,1,1,0,1,0 o:16:z:8,1,1,0,1,0 > $OUT/ab_probe.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -30 $OUT/ab_probe.txt
