# extracts CUDA_SRC from dist/submission.py into okc_src.cuh
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'^CUDA_SRC = r"""(.*?)"""', text, re.S | re.M)
open("okc_src.cuh", "w").write(m.group(1))
