# Session 9, call 1: main's dist/ (session 8's shared-skeleton mend, so far only PTX/SASS-argued) checked on the
# H200 (GPU tests, verify), while the four tprobe variants build; then tprobe's timings (the TMA GEMV taken apart).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
for v in base nowg notail both; do timeout -s INT 300 python3 notes/session8/tprobe.py build $v > $OUT/build_$v.txt 2>&1 & done
timeout -s INT 240 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/gpu_tests.txt
timeout -s INT 200 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"
tail -2 $OUT/verify.txt; grep -m1 "inputs sha256" dist/submission.py
wait; echo "builds t=$(( $(date +%s)-S ))"; tail -n1 $OUT/build_*.txt
timeout -s INT $(( 585 - ($(date +%s) - S) )) python3 notes/session8/tprobe.py time $OUT/tprobe.json base nowg notail both 2>&1 | tee $OUT/tprobe.txt
echo "time t=$(( $(date +%s)-S ))"
