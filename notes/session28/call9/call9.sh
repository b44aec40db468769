# Session 28, call 9: the GPU tests on main itself (call 1 ran them on branch xres, whose tma_gemv.cuh differs).
export PYTHONPATH=. PYTHONUNBUFFERED=1
git log --oneline -1 2>/dev/null; sha256sum dist/submission.py | cut -c1-16
timeout -s INT 300 python3 -m pytest -q tests/test_gpu.py > $OUT/test_gpu.txt 2>&1
echo "gpu tests rc=$?"; tail -5 $OUT/test_gpu.txt
