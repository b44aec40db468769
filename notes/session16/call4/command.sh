# Session 16, call 4 (carry [".whl"]): the GPU test that call 3 found stale (it assumed prepare() packs every
# layer with a CTABLE entry; pooler is now all ZTABLE / TTABLE), after its fix; the rest of tests/test_gpu.py again.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py
timeout -s INT 300 python3 -m pytest -q tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-S ))"; tail -4 $OUT/gpu_tests.txt
