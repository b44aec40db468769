# Session 17, call 2 (branch stagger-k): OKC_ROTATE A/B in one process, a TMA sweep with rotation on, and bench
# both ways on the same file.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
timeout -s INT 200 python3 notes/session17/rotate_ab.py > $OUT/rotate_ab.txt 2>&1
echo "ab rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/rotate_ab.txt | grep -v Warning
OKC_ROTATE=1 timeout -s INT 120 python3 -m generator sweep --engine tma --reps 20 --layers qkv_gate --layers o \
    --layers unpooler --m 8 --m 16 --m 32 --json $OUT/sweep_tma_rot.json > $OUT/sweep_tma_rot.txt 2>&1
echo "sweep rc=$? t=$(( $(date +%s)-S ))"; grep -v "^launch failed" $OUT/sweep_tma_rot.txt | tail -10; cp tables/ttable.yaml $OUT/ttable_rot.yaml
git checkout -q tables/ttable.yaml 2>/dev/null || true
for R in 1 0; do
  OKC_ROTATE=$R timeout -s INT 130 python3 -m generator bench --json $OUT/bench_rot$R.json > $OUT/bench_rot$R.txt 2>&1
  echo "bench rot=$R rc=$? t=$(( $(date +%s)-S ))"
  grep -E "^(qkv_gate|o |pooler|unpooler|router) +(1|8|16|32) " $OUT/bench_rot$R.txt; grep "launch floor\|geometric" $OUT/bench_rot$R.txt
done
