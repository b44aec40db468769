# Session 30, call 5: verify and the GPU tests on main's file (sha256 618a3f3a0f4e93b9, the file issue 4 closes on;
# byte-identical to session 29's verified file), on this session's tree (bench's in-run floor).
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 220 python3 -m generator verify dist/submission.py > $OUT/verify.txt 2>&1
echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/verify.txt
timeout -s INT 200 python3 -m pytest -q tests/test_gpu.py > $OUT/test_gpu.txt 2>&1
echo "pytest rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/test_gpu.txt
