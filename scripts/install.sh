#!/usr/bin/env bash
# Install vhmine from this checkout, with the torch build that fits the machine:
#   - no CUDA GPU (a laptop): CPU-only torch and torchvision from PyTorch's CPU index, installed together
#     (about 1.8 GB installed instead of 6.3 GB of CUDA wheels);
#   - a CUDA GPU (nvidia-smi lists one): PyPI's default torch, a CUDA build.
# Either way torch and torchvision are one known pair (scripts/torch_pair.py), kept by a constraint while
# vhmine installs, and checked once installed (torchvision.ops.nms runs): a torchvision built for another
# torch fails with "operator torchvision::nms does not exist". The CPU index is checked first (it answers
# and holds the pair), so an unreachable one stops the script before anything is installed.
#
#   bash scripts/install.sh              # vhmine alone (embed, mine, demo)
#   bash scripts/install.sh all          # with extras: all, app, models, export, test, ...
#   bash scripts/install.sh --cpu all    # force the CPU build (--cuda: force PyPI's default)
#   bash scripts/install.sh --dry-run    # check the index, print the pip commands, install nothing
# Environment: PYTHON (default python3), VHMINE_TORCH_INDEX (the CPU wheels' index; a mirror of
# https://download.pytorch.org/whl/cpu).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CPU_INDEX=${VHMINE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
pair=$("$PYTHON" scripts/torch_pair.py versions)  # the one known pair, "2.14.1 0.29.1"
TORCH=${pair% *} TORCHVISION=${pair#* }
build="" dry="" extras=""
for arg in "$@"; do
    case "$arg" in
        --cpu) build=cpu ;;
        --cuda) build=cuda ;;
        --dry-run) dry=1 ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "install.sh: unknown option $arg (--cpu, --cuda, --dry-run)" >&2; exit 2 ;;
        *) extras=$arg ;;
    esac
done

has_cuda_gpu() {
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        return 0
    fi
    compgen -G "/proc/driver/nvidia/gpus/*" >/dev/null 2>&1
}

if [ -z "$build" ]; then
    if has_cuda_gpu; then build=cuda; else build=cpu; fi
fi
target="."
[ -n "$extras" ] && target=".[$extras]"

run() {
    echo "+ $*"
    [ -n "$dry" ] || "$@"
}

pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
if [ "$build" = cuda ]; then
    echo "install.sh: a CUDA GPU is present (or --cuda): PyPI's default torch (a CUDA build), torch $TORCH with torchvision $TORCHVISION"
    printf 'torch==%s\ntorchvision==%s\n' "$TORCH" "$TORCHVISION" > "$pins"
    run "$PYTHON" -m pip install -e "$target" -c "$pins"
    [ -n "$dry" ] || "$PYTHON" scripts/torch_pair.py installed cuda
    exit 0
fi

# the CPU builds by their label, so an installed CUDA torch of the same version is replaced, not kept
cpu="+cpu"
[ "$(uname -s)" = Darwin ] && cpu=""  # macOS wheels carry no label (and are CPU builds)
echo "install.sh: no CUDA GPU found (or --cpu): CPU-only torch $TORCH and torchvision $TORCHVISION from $CPU_INDEX"
"$PYTHON" scripts/torch_pair.py index "$CPU_INDEX" "$cpu"
run "$PYTHON" -m pip install "torch==$TORCH$cpu" "torchvision==$TORCHVISION$cpu" --index-url "$CPU_INDEX"
if [ -n "$dry" ]; then
    printf 'torch==%s\ntorchvision==%s\n' "$TORCH$cpu" "$TORCHVISION$cpu" > "$pins"
else  # keep exactly these builds while vhmine's own dependencies install
    "$PYTHON" -c 'import importlib.metadata as m; print("torch==" + m.version("torch")); print("torchvision==" + m.version("torchvision"))' > "$pins"
fi
echo "install.sh: keeping $(tr '\n' ' ' < "$pins")"
run "$PYTHON" -m pip install -e "$target" -c "$pins"
[ -n "$dry" ] || "$PYTHON" scripts/torch_pair.py installed cpu
