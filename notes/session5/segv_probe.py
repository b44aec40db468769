"""Where does a refused launch crash? Each step in its own subprocess; ctypes reads the launchers' returns directly."""
import ctypes, subprocess, sys
import torch
from generator.judge.loader import load_submission
if len(sys.argv) > 2:  # child: one step
    mod = load_submission(sys.argv[1]); ext = mod._extension(); step = sys.argv[2]; dev = "cuda"
    x = torch.randn(1, 8192, device=dev).to(torch.bfloat16); w = torch.randn(256 * 8192, device=dev).to(torch.bfloat16)
    out = torch.empty(1, 256, device=dev, dtype=torch.float32); ws = torch.empty(1 << 20, device=dev)
    sem = torch.zeros(4096, dtype=torch.int32, device=dev); st = torch.cuda.current_stream().cuda_stream
    so = ext.__file__
    syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout
    lib = ctypes.CDLL(so)
    def sym(name):
        return getattr(lib, next(l.split()[-1] for l in syms.splitlines() if name in l))
    if step == "ctypes_tma_config":
        f = sym("okc_tma_config_error"); f.restype = ctypes.c_char_p
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_bool, ctypes.c_int, ctypes.c_bool]
        print("okc_tma_config_error ->", f(1, 3, 1, False, 1, False), flush=True)
    elif step == "ctypes_launch_gemv_u3":
        f = sym("okc_launch_gemv"); f.restype = ctypes.c_char_p
        f.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 9 + [ctypes.c_bool, ctypes.c_bool, ctypes.c_longlong]
        print("okc_launch_gemv U=3 ->", f(x.data_ptr(), w.data_ptr(), w.data_ptr(), out.data_ptr(), ws.data_ptr(), sem.data_ptr(), 1, 256, 8192, 4, 1, 3, 1, 1, 0, False, True, st), flush=True)
    elif step == "binding_tma_stages3":
        print("tma STAGES=3 ->", repr(ext.tma_gemv(x, w, w, out, ws, sem, 256, 8192, 1, 1, 3, 1, False, True, st)), flush=True)
    elif step == "binding_gemv_u3":
        print("gemv U=3 ->", repr(ext.gemv(x, w, w, out, ws, sem, 256, 8192, 4, 1, 3, 1, 1, False, True, 0, st)), flush=True)
    elif step == "binding_gemv_nw0":
        print("gemv NW=0 ->", repr(ext.gemv(x, w, w, out, ws, sem, 256, 8192, 0, 1, 1, 1, 1, False, True, 0, st)), flush=True)
    sys.exit(0)
subprocess.run([sys.executable, "-c", f"import sys; sys.argv=['x','{sys.argv[1]}']; from generator.judge.loader import load_submission; load_submission(sys.argv[1])._extension()"])
for step in ("binding_gemv_nw0", "ctypes_tma_config", "ctypes_launch_gemv_u3", "binding_tma_stages3", "binding_gemv_u3"):
    r = subprocess.run([sys.executable, "-X", "faulthandler", __file__, sys.argv[1], step], capture_output=True, text=True)
    print(f"{step}: rc={r.returncode} | {r.stdout.strip()[-300:]} | {r.stderr.strip().splitlines()[:2] if r.returncode else ''}", flush=True)
