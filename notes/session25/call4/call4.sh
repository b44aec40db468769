# Session 25, call 4 (main, no carry): call 3's patches applied inside the decode (a shuffle and a branch per
# fragment) made the compressed GEMV 18-36 % slower; now they are a correction after the group's mmas, behind one
# warp-uniform branch a group. ab (float64-checked first) on o against the tables' engines, and the z entries of
# pooler / unpooler against their register GEMV alternatives.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator ab --rounds 6 \
  o:1:z:8,1,1,0,1,0 o:1:gemv:8,1,2,1,2,0 o:8:z:8,1,1,0,1,0 o:8:gemv:8,1,4,0,2,0 \
  o:16:z:8,1,1,0,1,0 o:16:z:8,1,1,0,2,0 o:16:tma:1,8,0 pooler:1:z:8,1,4,0,1,0 pooler:1:gemv:8,1,4,1,1,0 \
  unpooler:16:z:8,1,2,0,2,0 > $OUT/ab_patches2.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; tail -14 $OUT/ab_patches2.txt
