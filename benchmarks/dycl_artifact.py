"""Compile the DyCL authors' own networks (the paper's public artifact) with dycl.

    git --git-dir=<fetched ISSTA23_DyCL git dir> archive HEAD adNN | tar -x -C /tmp/issta
    python benchmarks/dycl_artifact.py /tmp/issta [--inputs 12] [--only resnet56,blockdrop110]

ARTIFACT_DIR is a checkout holding the authors' ``adNN/`` folder; nothing of it
is copied into this repository. Their classes are imported unmodified and built
with seeded random weights (no downloads): the ShallowDeep SDNs (VGG-16,
ResNet-56, WRN-32-4, MobileNet; CIFAR-10 sizes) run through their own
``early_exit`` inference method, and BlockDrop's ResNet-110 (``FlatResNet32``)
through its ``forward(x, policy, device)``. Each is compiled with ONNX Runtime
and checked against eager PyTorch on ``--inputs`` inputs. One row per network:
compile seconds, rewritten lines, distinct eager paths over the inputs,
inputs that agree — or the ``UnsupportedError`` with its file:line, or the
crash.

Importing: the authors' package ``__init__`` files pull in data loaders and
torchvision; the script loads only the model folders, as packages of their own
(``sys.modules`` entries named ``_dycl_artifact_*``), and where torchvision is
not installed, gives ``resnet.py`` an empty ``torchvision.models`` (it is only
used to download pretrained weights, which this script never does).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import dycl
from dycl.paths import model_source_files, record_path
from dycl.testing import outputs_match

ATOL = 1e-4


def load_package(alias: str, folder: Path) -> str:
    """Make ``folder`` importable as package ``alias`` without running its ``__init__``."""
    if alias not in sys.modules:
        package = types.ModuleType(alias)
        package.__path__ = [str(folder)]
        sys.modules[alias] = package
    return alias


def ensure_torchvision_models() -> None:
    try:
        importlib.import_module("torchvision.models")
    except ImportError:
        stub = types.ModuleType("torchvision")
        stub.models = types.ModuleType("torchvision.models")
        sys.modules.setdefault("torchvision", stub)
        sys.modules.setdefault("torchvision.models", stub.models)


class EarlyExit(nn.Module):
    """Calls an SDN's own ``early_exit`` (dycl compiles ``forward``; the SDN is untouched)."""

    def __init__(self, sdn: nn.Module) -> None:
        super().__init__()
        self.sdn = sdn

    def forward(self, x):
        return self.sdn.early_exit(x)


class PolicyForward(nn.Module):
    """BlockDrop's ``forward(x, policy, device)`` with the policy as an input."""

    def __init__(self, resnet: nn.Module) -> None:
        super().__init__()
        self.resnet = resnet

    def forward(self, x, policy):
        return self.resnet(x, policy, "cpu")


def sdn_params(network: str, threshold: float) -> dict:
    """The CIFAR-10 configurations of the authors' ``network_architectures.py``."""
    params = {"task": "cifar10", "input_size": 32, "num_classes": 10, "augment_training": True,
              "init_weights": True, "confidence_threshold": threshold}
    if network == "vgg16":
        params.update(fc_layers=[512, 512], max_pool_sizes=[1, 2, 1, 2, 1, 1, 2, 1, 1, 2, 1, 1, 2],
                      conv_channels=[64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512],
                      conv_batch_norm=True, add_ic=[0, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0])
    elif network == "resnet56":
        params.update(block_type="basic", num_blocks=[9, 9, 9],
                      add_ic=[[0, 0, 0, 1, 0, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 1, 0, 0, 0]])
    elif network == "wrn32_4":
        params.update(num_blocks=[5, 5, 5], widen_factor=4, dropout_rate=0.3,
                      add_ic=[[0, 0, 1, 0, 1], [0, 1, 0, 1, 0], [1, 0, 1, 0, 0]])
    elif network == "mobilenet":
        params.update(cfg=[64, (128, 2), 128, (256, 2), 256, (512, 2), 512, 512, 512, 512, 512, (1024, 2), 1024],
                      add_ic=[0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0], in_channels=32)
    return params


def build_networks(root: Path, threshold: float, count: int) -> dict[str, Callable[[], tuple]]:
    """name -> a function giving (model, inputs)."""
    sdns = load_package("_dycl_artifact_sdns", root / "adNN" / "ShallowDeep" / "architectures" / "SDNs")
    classes = {"vgg16": ("VGG_SDN", "VGG_SDN"), "resnet56": ("ResNet_SDN", "ResNet_SDN"),
               "wrn32_4": ("WideResNet_SDN", "WideResNet_SDN"), "mobilenet": ("MobileNet_SDN", "MobileNet_SDN")}
    generator = torch.Generator().manual_seed(1)
    images = [torch.randn(1, 3, 32, 32, generator=generator) * (0.5 + i % 4) for i in range(count)]

    def sdn(name: str) -> Callable[[], tuple]:
        def make():
            module_name, class_name = classes[name]
            cls = getattr(importlib.import_module(f"{sdns}.{module_name}"), class_name)
            torch.manual_seed(0)
            return EarlyExit(cls(sdn_params(name, threshold)).eval()).eval(), images
        return make

    def blockdrop():
        ensure_torchvision_models()
        package = load_package("_dycl_artifact_blockdrop", root / "adNN" / "blockdrop")
        resnet = importlib.import_module(f"{package}.resnet")
        base = importlib.import_module(f"{package}.base")
        torch.manual_seed(0)
        net = resnet.FlatResNet32(base.BasicBlock, [18, 18, 18], num_classes=10).eval()
        policies = [(torch.rand(1, 54, generator=generator) > 0.5).float() for _ in range(count)]
        policies[0][:, :] = 1.0  # the example runs every block
        return PolicyForward(net).eval(), list(zip(images, policies, strict=True))

    networks = {name: sdn(name) for name in classes}
    networks["blockdrop110"] = blockdrop
    return networks


def evaluate(name: str, make: Callable[[], tuple]) -> dict:
    row: dict = {"network": name}
    try:
        model, inputs = make()
        first = inputs[0] if isinstance(inputs[0], tuple) else (inputs[0],)
        try:
            with torch.no_grad():
                model(*first)
        except Exception as exc:  # noqa: BLE001 - the authors' model itself fails on this configuration
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            row["error"] = f"eager fails: {type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})"
            return row
        start = time.perf_counter()
        compiled = dycl.compile(model, inputs[0], progress=False)
        row["compile_s"] = time.perf_counter() - start
        row["lines"] = compiled._result.rewritten.plain_source.count("\n") if compiled._result else None
        files = model_source_files(model)
        paths, agree = set(), 0
        for item in inputs:
            args = item if isinstance(item, tuple) else (item,)
            with torch.no_grad():
                expected, path = record_path(model, *args, files=files)
                actual = compiled(*args)
            paths.add(path)
            # relative to the output's size: with random weights BlockDrop's logits reach 1e8,
            # where float32 rounding alone differs by more than an absolute ATOL
            scale = max([1.0] + [float(t.abs().max()) for t in torch.utils._pytree.tree_leaves(expected)
                                 if isinstance(t, torch.Tensor) and t.numel()])
            agree += outputs_match(expected, actual, ATOL * scale) is None
        row.update(paths=len(paths), agree=f"{agree}/{len(inputs)}")
    except dycl.UnsupportedError as exc:
        row["error"] = "UnsupportedError: " + " ".join(str(exc).split())
    except Exception as exc:  # noqa: BLE001 - a crash is a result of this benchmark
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        row["error"] = f"crash {type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact", type=Path, help="a checkout holding the authors' adNN/ folder")
    parser.add_argument("--inputs", type=int, default=12)
    parser.add_argument("--threshold", type=float, default=0.2,
                        help="the SDNs' confidence_threshold (random weights give confidences near 0.1)")
    parser.add_argument("--only", default="", help="comma-separated network names")
    args = parser.parse_args()
    networks = build_networks(args.artifact.resolve(), args.threshold, args.inputs)
    chosen = [n for n in networks if not args.only or n in args.only.split(",")]
    print("| network | compile s | rewritten lines | paths | agree with eager | error |")
    print("|---|---|---|---|---|---|")
    for name in chosen:
        row = evaluate(name, networks[name])
        compile_s = f"{row['compile_s']:.1f}" if "compile_s" in row else ""
        print(f"| {name} | {compile_s} | {row.get('lines', '')} | {row.get('paths', '')} | "
              f"{row.get('agree', '')} | {row.get('error', '')[:400]} |", flush=True)


if __name__ == "__main__":
    main()
