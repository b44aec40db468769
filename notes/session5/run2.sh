set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
S=$(date +%s)
left() { echo $(( 585 - ($(date +%s) - S) )); }
timeout 330 python3 probe/g2_probe.py dist/submission.py $OUT/g2_probe.json > $OUT/g2_probe.txt 2>&1; rc=$?
echo "probe rc=$rc t=$(( $(date +%s)-S ))"; grep -v " launch$" $OUT/g2_probe.txt | tail -12; grep " launch$" $OUT/g2_probe.txt | tail -2
[ $rc -ne 0 ] && exit 0
timeout $(( $(left) - 250 )) python3 -m generator sweep --engine tma --m 16 --m 32 --json $OUT/sweep_tma.json > $OUT/sweep_tma.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; tail -14 $OUT/sweep_tma.txt
cp tables/ttable.yaml $OUT/ttable.yaml
timeout 60 python3 -m generator build > /dev/null 2>&1; echo "build rc=$?"; cp dist/submission.py $OUT/
timeout 100 python3 -m generator verify > $OUT/verify.txt 2>&1; echo "verify rc=$? t=$(( $(date +%s)-S ))"; tail -2 $OUT/verify.txt
timeout $(( $(left) - 5 )) python3 -m generator bench --json $OUT/bench.json --compare notes/session4/final_bench.json > $OUT/bench.txt 2>&1; echo "bench rc=$? t=$(( $(date +%s)-S ))"
grep -v "^\s*$" $OUT/bench.txt | head -40
