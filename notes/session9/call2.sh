# Session 9, call 2: (a) branch ring-w's styles 6, 7 (rings of three / four weight register sets, one x set):
# `sweep --styles 6 --styles 7` on the layers at the bar's edge, run from the branch's tree (ringw.tar = `git
# archive ring-w`), every candidate checked against float64 on a NaN-poisoned output, entries kept unless beaten
# by 2 %; (b) while it runs, the four tprobe variants build (CPU); then each is timed in a process of its own.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
S=$(date +%s)
for v in base nowg notail both; do PYTHONPATH=. timeout -s INT 300 python3 notes/session9/tprobe.py build $v > $OUT/build_$v.txt 2>&1 & done
mkdir -p /tmp/rw && tar -xf notes/session9/ringw.tar -C /tmp/rw
( cd /tmp/rw && PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 timeout -s INT 330 python3 -m generator sweep --styles 6 \
    --styles 7 --reps 20 --layers qkv_gate --layers o --layers router --json $OUT/sweep_ring.json \
    > $OUT/sweep_ring.txt 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-S ))"; cp tables/ctable.yaml $OUT/ctable_ring.yaml )
grep -v "^\s*$" $OUT/sweep_ring.txt | tail -13
wait; echo "builds t=$(( $(date +%s)-S ))"; tail -qn1 $OUT/build_*.txt
for v in base nowg notail both; do
  PYTHONPATH=. PYTHONUNBUFFERED=1 timeout -s INT $(( (590 - ($(date +%s) - S)) / 2 )) python3 notes/session9/tprobe.py \
      time $OUT/tprobe_$v.json $v > $OUT/tprobe_$v.txt 2>&1; echo "tprobe $v rc=$? t=$(( $(date +%s)-S ))"
done
cat $OUT/tprobe_*.txt | grep -v "^\s*$" | tail -60
