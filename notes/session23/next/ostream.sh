# Prepared in session 23 (not yet run): o's bytes streamed the register GEMVs' way, nvcc only (~10 s to build).
# On the device, no carry:  bash notes/session23/next/ostream.sh   (~60-90 s with the machine's start)
set -e
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/ostream notes/session23/next/ostream.cu \
  > $OUT/ostream_build.txt 2>&1
timeout -s INT 200 /tmp/ostream > $OUT/ostream.txt 2>&1
cat $OUT/ostream.txt
