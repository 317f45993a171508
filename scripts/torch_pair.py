"""The torch / torchvision pair scripts/install.sh installs, and its two checks.

Reads PyTorch's CPU index over HTTP (`index`) or the installed torch (`installed`); writes nothing. Standard
library only at the top: `index` runs before torch is installed. A torchvision built for another torch does
not load beside it ("operator torchvision::nms does not exist"), so the two are only ever installed as this
pair, and the pair is checked by running torchvision.ops.nms once installed.

  python scripts/torch_pair.py versions              # "2.14.1 0.29.1": what install.sh installs
  python scripts/torch_pair.py index URL [+cpu]      # the CPU index answers and lists both wheels (that build)
  python scripts/torch_pair.py installed cpu|cuda    # the installed torch and torchvision are the pair and work

Each check prints one line; a failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import re
import sys

TORCH, TORCHVISION = "2.14.1", "0.29.1"  # torchvision 0.29 is built for torch 2.14: change both together


def check_index(index: str, local: str = "") -> str:
    """`local`: the build label the wheels carry ("+cpu" on Linux and Windows; macOS wheels carry none)."""
    import urllib.request

    index = index.rstrip("/")
    label = re.escape(local).replace(r"\+", r"(?:\+|%2B)")  # "+" is "%2B" in the links' addresses
    pair = {"torch": TORCH, "torchvision": TORCHVISION}
    for name, version in pair.items():
        try:
            with urllib.request.urlopen(f"{index}/{name}/", timeout=20) as r:
                page = r.read().decode("utf-8", "replace")
        except Exception as err:
            why = re.sub(r"^\[Errno -?\d+\]\s*", "", str(getattr(err, "reason", None) or err))
            raise SystemExit(
                f"install.sh: PyTorch's CPU index {index} cannot be reached ({why}): nothing installed; "
                "set VHMINE_TORCH_INDEX to a mirror of it, or pass --cuda for PyPI's default torch "
                "(a CUDA build, 6.3 GB)"
            ) from None
        if not re.search(rf"{name}-{re.escape(version)}{label}-", page):  # torch-2.14.1+cpu-cp311-...whl
            raise SystemExit(
                f"install.sh: PyTorch's CPU index {index} has no {name} {version}{local} (install.sh installs "
                f"torch {TORCH} with torchvision {TORCHVISION} only): nothing installed; point "
                "VHMINE_TORCH_INDEX at an index that holds both"
            )
    return f"install.sh: PyTorch's CPU index {index} answers and holds torch {TORCH} with torchvision {TORCHVISION}"


def check_installed(build: str) -> str:
    fix = f"reinstall the pair: bash scripts/install.sh --{build} (torch {TORCH} with torchvision {TORCHVISION})"
    try:
        import torch
        import torchvision
        from torchvision.ops import nms

        nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise SystemExit(f"install.sh: torch and torchvision do not work together ({first[:160]}): {fix}") from None
    if (torch.__version__.split("+")[0], torchvision.__version__.split("+")[0]) != (TORCH, TORCHVISION):
        raise SystemExit(
            f"install.sh: torch {torch.__version__} with torchvision {torchvision.__version__} is not "
            f"the pair install.sh installs: {fix}"
        )
    if build == "cpu" and torch.version.cuda:
        raise SystemExit(f"install.sh: torch {torch.__version__} is a CUDA build where a CPU one was asked for: {fix}")
    return (
        f"install.sh: torch {torch.__version__} with torchvision {torchvision.__version__}: they work together "
        f"(torchvision.ops.nms ran){' (CPU only)' if build == 'cpu' else ''}"
    )


def main(argv: list[str]) -> None:
    if argv[:1] == ["versions"]:
        print(TORCH, TORCHVISION)
    elif argv[:1] == ["index"] and len(argv) in (2, 3):
        print(check_index(*argv[1:]))
    elif argv[:1] == ["installed"] and len(argv) == 2 and argv[1] in ("cpu", "cuda"):
        print(check_installed(argv[1]))
    else:
        raise SystemExit("usage: torch_pair.py versions | index URL [+cpu] | installed cpu|cuda")


if __name__ == "__main__":
    main(sys.argv[1:])
