# Session 30, call 1: the hybrid probe (hybrid_probe.py): o split into a bf16 half-tile TMA part and a 12-bit
# zgemv part, run concurrently on two streams of one graph, against the shipped o entry, 7 rounds.
export PYTHONPATH=. PYTHONUNBUFFERED=1
S=$(date +%s)
sha256sum dist/submission.py | cut -c1-16
timeout -s INT 400 python3 notes/session30/call1/hybrid_probe.py 7 > $OUT/hybrid.txt 2>&1
echo "probe rc=$? t=$(( $(date +%s)-S ))"; cat $OUT/hybrid.txt | tail -60
