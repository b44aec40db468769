# Session 16, call 1 (carry [".whl"]): branch session15-ring-unroll at eee6cdc, running that branch's
# notes/session15/verify_branch.sh unchanged (tma sweep on all five layers, build, verify, bench, GPU TMA test).
bash notes/session15/verify_branch.sh
