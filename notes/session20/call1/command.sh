# For session 20's first call, on branch two-producers (no carry needed): two producer warps, each issuing the
# copies of every other ring slot (OKC_TMA_PRODUCERS=2), and one producer that polls its barrier with test_wait
# instead of try_wait's suspending wait (s), against main's one (1), per shape, with `generator ab --env` (each
# launch checked against float64 first); then the TMA GPU test on the two-producer form. About 330 s (the CUDA
# build has 336 kernels).
# Why (notes/README.md, session 19): on qkv_gate's half tiles (72 CTAs, ~147 ns a slot) every ns of producer
# work added per slot came back about one for one in the slot time, and on pooler's (128 CTAs) not at all.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 300 python3 -m generator ab --rounds 4 --env OKC_TMA_PRODUCERS=1,2,s,1 \
  qkv_gate:32:tma:1,14,3 qkv_gate:32:tma:1,12,3 qkv_gate:16:tma:1,16,3 qkv_gate:8:tma:1,16,3 qkv_gate:1:tma:1,16,3 \
  pooler:32:tma:1,12,3 pooler:16:tma:1,12,3 pooler:1:tma:1,16,3 unpooler:32:tma:1,12,0 o:16:tma:1,8,0 \
  o:8:tma:1,16,0 unpooler:8:tma:1,16,3 router:32:tma:16,4,2 > $OUT/producers.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; grep -v Warning $OUT/producers.txt | tail -60
OKC_TMA_PRODUCERS=2 timeout -s INT 160 python3 -m pytest -q -x tests/test_gpu.py -k tma > $OUT/gpu_tests_two.txt 2>&1
echo "gpu tests (two producers) rc=$? t=$(( $(date +%s)-S ))"; tail -3 $OUT/gpu_tests_two.txt
