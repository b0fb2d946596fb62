#!/usr/bin/env bash
# Issue 41 on a GPU machine (PyTorch with CUDA, Triton, a C++ compiler): installs this
# checkout, runs the torch-context tests (GPU and CPU), then profiles 10 training steps of the
# compiled transformer (nn.TransformerEncoder, 6 layers, bf16, torch.compile) under
# context="python,torch" and prints its tree to depth 6 and the share of GPU time under the
# user's step function (and under context="shadow", under its scope).
#
#   bash scripts/gpu_torch_check.sh            # PYTHON=python3.12 to pick an interpreter
#
# Set SKIP_INSTALL=1 when Proton is installed already (scripts/gpu_build.sh, say).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/proton_torch_check}
mkdir -p "$OUT"

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  echo "== install proton from this checkout"
  "$PY" -m pip install -q --no-build-isolation --no-deps . || bash scripts/gpu_build.sh
fi
"$PY" -c "import torch, triton, proton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"

echo "== tests (GPU, then CPU)"
(cd tests && "$PY" -m pytest gpu/test_gpu_torch_context.py python/test_torch_context.py \
  python/test_context_sources.py python/test_inductor_frames.py -q -p no:cacheprovider -rs) || status=$?

echo "== the compiled transformer under context=python,torch"
"$PY" - "$OUT" <<'PYEOF'
import json, os, sys, time
sys.path.insert(0, os.path.join("tests", "gpu"))
import torch
import proton
from torch_models import make_compiled_transformer, time_share

out = sys.argv[1]
for context in ("python,torch", "shadow", "python"):
    train_step = make_compiled_transformer()
    for _ in range(3):
        train_step()
    torch.cuda.synchronize()
    name = os.path.join(out, "transformer_" + context.replace(",", "_"))
    proton.start(name, context=context, hook="triton")
    for _ in range(10):
        with proton.scope("train"):
            train_step()
    torch.cuda.synchronize()
    proton.finalize()
    root = json.load(open(name + ".hatchet"))[0]
    if context == "shadow":
        share, total = time_share(root, lambda n: n == "train")
        where = "scope 'train'"
    else:
        share, total = time_share(root, lambda n: n.endswith("@train_step"))
        where = "train_step()'s frame"
    size = os.path.getsize(name + ".hatchet")
    print(f"context={context}: {share:.1%} of {total / 1e6:.1f} ms GPU time under {where}; "
          f"profile {size / 1024:.0f} KiB ({name}.hatchet)")
PYEOF

echo "== proton-viewer -d 6 (context=python,torch)"
"$PY" -m proton.viewer.main -d 6 "$OUT/transformer_python_torch.hatchet" 2>/dev/null ||
  proton-viewer -d 6 "$OUT/transformer_python_torch.hatchet"
exit "${status:-0}"
