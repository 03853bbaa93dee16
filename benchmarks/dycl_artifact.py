"""Compile the DyCL authors' own networks (the paper's public artifact) with dycl.

    git --git-dir=<fetched ISSTA23_DyCL git dir> archive HEAD adNN | tar -x -C /tmp/issta
    python benchmarks/dycl_artifact.py /tmp/issta [--inputs 12] [--only resnet56,blockdrop110] [--batch 1,2,4]

ARTIFACT_DIR is a checkout holding the authors' ``adNN/`` folder; nothing of it
is copied into this repository. Their classes are imported unmodified and built
with seeded random weights (no downloads), the eight networks of the authors'
``utils.load_model``: the ShallowDeep SDNs (VGG-16, ResNet-56, WRN-32-4,
MobileNet; CIFAR-10 sizes) through their own ``early_exit`` inference method,
BlockDrop's ResNet-110 (``FlatResNet32``) through its ``forward(x, policy,
device)``, RANet (CIFAR-10 configuration of ``loadRaNet``) through
``adaptive_forward(x, threshold)`` with a Python list of thresholds held by
the wrapper, SkipNet-38 with feed-forward gates (``ResNetFeedForwardSP``)
through its ``forward``, and the image captioner (``CaptionModel``, the
flickr8k ResNeXt-LSTM configuration, ``max_length=10``) through its
``forward``. Each is compiled with ``dycl.compile(model, example)`` (defaults:
ONNX Runtime, symbolic batch) and checked against eager PyTorch on
``--inputs`` inputs, in process and through the torch-free host
(``compiled.save(dir)`` then ``dycl.load(dir)``). One row per network:
compile seconds, rewritten lines, distinct eager paths over the inputs,
inputs that agree in process and through the host — or the
``UnsupportedError`` with its file:line, or the crash. ``--batch 1,2,4`` checks each
network, compiled once on a batch-1 example, at each batch size (a batch of B joins
B of the inputs along dim 0): one row per network and batch size; a size the
compiled model refuses by name (its graph specialised to batch 1) is an error there.

Importing: the authors' package ``__init__`` files pull in data loaders and
torchvision; the script loads only the model folders, as packages of their own
(``sys.modules`` entries named ``_dycl_artifact_*``), and where torchvision is
not installed, gives ``resnet.py`` an empty ``torchvision.models`` (it is only
used to download pretrained weights, which this script never does); SkipNet's
``models.py`` imports ``torchvision.datasets``/``transforms`` and the
captioner's package ``h5py`` for their data loaders only, and get empty
modules likewise. The captioner's ``Encoder`` asks torchvision for a
pretrained ResNeXt-50 backbone; the script hands ``model.py`` a
``torchvision.models`` whose ``resnext50_32x4d`` builds torchvision's own
network without weights where torchvision is installed and otherwise a small
stand-in CNN with the same output (1024 channels at 1/16 of the image size);
the authors' ``Encoder``, ``Attention``, decoder and ``CaptionModel`` are
theirs, unmodified. Its word map is a synthetic 100-word vocabulary (the
authors' ``Dataset/`` folder is not part of ``adNN/``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4


def load_package(alias: str, folder: Path) -> str:
    """Make ``folder`` importable as package ``alias`` without running its ``__init__``."""
    if alias not in sys.modules:
        package = types.ModuleType(alias)
        package.__path__ = [str(folder)]
        sys.modules[alias] = package
    return alias


def load_package_init(alias: str, folder: Path) -> types.ModuleType:
    """Import ``folder`` as package ``alias``, running its ``__init__`` (unlike ``load_package``)."""
    if alias not in sys.modules:
        spec = importlib.util.spec_from_file_location(alias, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module
        spec.loader.exec_module(module)
    return sys.modules[alias]


def ensure_modules(*names: str) -> None:
    """Give each of ``names`` that cannot be imported an empty module (with its parents):
    the authors import them for data loading and pretrained weights only."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
            for i in range(1, len(parts)):
                setattr(sys.modules[".".join(parts[:i])], parts[i], sys.modules[".".join(parts[:i + 1])])


def ensure_torchvision_models() -> None:
    ensure_modules("torchvision.models")


class StandInBackbone(nn.Sequential):
    """Where torchvision is not installed: ResNeXt-50's output for the captioner's ``Encoder``
    (which keeps all children but the last three): 1024 channels at 1/16 of the image size."""

    def __init__(self) -> None:
        super().__init__(nn.Conv2d(3, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.Conv2d(64, 256, 3, stride=4, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
                         nn.Conv2d(256, 1024, 3, stride=2, padding=1), nn.BatchNorm2d(1024), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 10))


def backbones() -> types.SimpleNamespace:
    """A ``torchvision`` for the captioner's ``model.py``: ``resnext50_32x4d`` without weights."""
    try:
        import torchvision.models as vision_models  # noqa: PLC0415 - optional
    except ImportError:
        vision_models = None
    real = getattr(vision_models, "resnext50_32x4d", None)  # None: absent, or the empty stand-in module

    def resnext50_32x4d(pretrained: bool = False) -> nn.Module:
        return real(weights=None) if real is not None else StandInBackbone()

    return types.SimpleNamespace(models=types.SimpleNamespace(resnext50_32x4d=resnext50_32x4d))


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


class AdaptiveForward(nn.Module):
    """RANet's ``adaptive_forward(x, threshold)`` with the thresholds a Python list on the wrapper."""

    def __init__(self, ranet: nn.Module, thresholds: list[float]) -> None:
        super().__init__()
        self.ranet = ranet
        self.thresholds = thresholds

    def forward(self, x):
        return self.ranet.adaptive_forward(x, self.thresholds)


def ranet_args() -> types.SimpleNamespace:
    """The CIFAR-10 defaults of the authors' ``loadRaNet`` (its argparse reads ``sys.argv``)."""
    return types.SimpleNamespace(
        task=None, resume=None, evaluate_from="", seed=0, arch="RANet", reduction=0.5, nBlocks=2,
        nChannels=16, growthRate=6, grFactor=[4, 2, 1, 1], bnFactor=[4, 2, 1, 1], block_step=2,
        scale_list=[1, 2, 3, 3], compress_factor=0.25, step=4, stepmode="even", bnAfter=True,
        data="cifar10", config=None, nScales=4)


def word_map(size: int = 100, end: int = 52) -> dict[str, int]:
    """A synthetic vocabulary; ``<end>`` is word ``end``, one the seeded random decoder emits
    after two or three words for some images and never for others, so captions end at
    different steps (with ``<end>`` where no image reaches it, every input takes one path)."""
    words = [f"w{i}" for i in range(size)]
    words[0], words[1], words[end], words[3] = "<unk>", "<start>", "<end>", "<pad>"
    return {word: i for i, word in enumerate(words)}


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


#: the SDNs' confidence_threshold: random weights give confidences near 0.1, MobileNet's within 0.003 of it
SDN_THRESHOLDS = {"vgg16": 0.2, "resnet56": 0.2, "wrn32_4": 0.2, "mobilenet": 0.102}


def build_networks(root: Path, threshold: float | None, count: int,
                   ranet_threshold: float = 0.2) -> dict[str, Callable[[], tuple]]:
    """name -> a function giving (model, inputs)."""
    sdns = load_package("_dycl_artifact_sdns", root / "adNN" / "ShallowDeep" / "architectures" / "SDNs")
    classes = {"vgg16": ("VGG_SDN", "VGG_SDN"), "resnet56": ("ResNet_SDN", "ResNet_SDN"),
               "wrn32_4": ("WideResNet_SDN", "WideResNet_SDN"), "mobilenet": ("MobileNet_SDN", "MobileNet_SDN")}
    generator = torch.Generator().manual_seed(1)
    images = [torch.randn(1, 3, 32, 32, generator=generator) * (0.5 + i % 4) for i in range(count)]
    # ResNet-56's end_layers (AvgPool2d(8), then a Linear of 16*64 inputs) assume a 4x4 map: 128x128
    # images with the CIFAR-10 configuration (the authors ran 256x256 with input_size 256)
    large = [torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(i)) * (0.5 + i % 4)
             for i in range(count)]

    def sdn(name: str) -> Callable[[], tuple]:
        def make():
            module_name, class_name = classes[name]
            cls = getattr(importlib.import_module(f"{sdns}.{module_name}"), class_name)
            torch.manual_seed(0)
            chosen = SDN_THRESHOLDS[name] if threshold is None else threshold
            return EarlyExit(cls(sdn_params(name, chosen)).eval()).eval(), large if name == "resnet56" else images
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

    def ranet():
        package = load_package("_dycl_artifact_ranet", root / "adNN" / "RANet" / "models")
        module = importlib.import_module(f"{package}.RANet")
        torch.manual_seed(0)
        net = module.RANet(ranet_args()).eval()
        thresholds = [ranet_threshold] * (len(net.classifier) - 1) + [-1e8]  # the last exit always taken
        return AdaptiveForward(net, thresholds).eval(), images

    def skipnet():
        ensure_modules("torchvision.datasets", "torchvision.transforms")
        package = load_package("_dycl_artifact_skipnet", root / "adNN" / "skipnet" / "cifar")
        models = importlib.import_module(f"{package}.models")
        torch.manual_seed(0)
        net = models.ResNetFeedForwardSP(models.BasicBlock, [6, 6, 6], gate_type="ffgate1")  # cifar10_feedforward_38
        return net.eval(), images

    def captioner():
        ensure_modules("h5py", "torchvision")
        package = load_package_init("_dycl_artifact_imgcaption", root / "adNN" / "ImgCaption")
        model_py = sys.modules[f"{package.__name__}.model"]
        model_py.torchvision = backbones()  # no pretrained download (module docstring)
        config = json.loads((root / "adNN" / "ImgCaption" / "config" / "flickr8k_resnext_lstm.json").read_text())
        words = word_map()
        torch.manual_seed(0)
        c = config["model"]
        decoder = model_py.get_decoder(c["decoder"], c["attention_dim"], c["emb_dim"], c["decoder_dim"], len(words),
                                       "cpu", c["encoder_dim"], c["dropout"])
        net = package.CaptionModel(model_py.Encoder(c["encoder"]), decoder, words, max_length=10).eval()
        pictures = [torch.randn(1, 3, 64, 64, generator=generator) * (0.5 + i % 4) for i in range(count)]
        return net, pictures

    networks = {name: sdn(name) for name in classes}
    networks["blockdrop110"] = blockdrop
    networks["ranet"] = ranet
    networks["skipnet38"] = skipnet
    networks["captioner"] = captioner
    return networks


def batched(inputs: list, batch: int) -> list:
    """``inputs`` joined ``batch`` at a time along dim 0 (cyclically: as many inputs as given)."""
    if batch == 1:
        return list(inputs)
    out = []
    for start in range(len(inputs)):
        group = [inputs[(start + k) % len(inputs)] for k in range(batch)]
        if isinstance(group[0], tuple):
            out.append(tuple(torch.cat(parts) for parts in zip(*group, strict=True)))
        else:
            out.append(torch.cat(group))
    return out


def check_inputs(name: str, model: nn.Module, compiled, inputs: list) -> dict:
    """Agreement with eager on ``inputs``, in process and through the torch-free host."""
    row: dict = {}
    first = inputs[0] if isinstance(inputs[0], tuple) else (inputs[0],)
    try:
        with torch.no_grad():
            model(*first)
    except Exception as exc:  # noqa: BLE001 - the authors' model itself fails on this batch size
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        row["error"] = f"eager fails: {type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})"
        return row
    files = model_source_files(model)
    paths, agree, scale, refused = set(), 0, 1.0, None
    for item in inputs:
        args = item if isinstance(item, tuple) else (item,)
        with torch.no_grad():
            expected, path = record_path(model, *args, files=files)
            try:
                actual = compiled(*args)
            except ValueError as exc:  # ShapeGuardError: a size the compiled model refuses by name
                refused = refused or f"refused: {' '.join(str(exc).split())}"
                continue
        paths.add(path)
        # relative to the output's size: with random weights BlockDrop's logits reach 1e8,
        # where float32 rounding alone differs by more than an absolute ATOL
        size = max([1.0] + [float(t.abs().max()) for t in torch.utils._pytree.tree_leaves(expected)
                            if isinstance(t, torch.Tensor) and t.numel() and t.is_floating_point()])
        agree += outputs_match(expected, actual, ATOL * size) is None
        scale = max(scale, size)
    row.update(paths=len(paths), agree=f"{agree}/{len(inputs)}")
    with tempfile.TemporaryDirectory() as scratch:
        compiled.save(Path(scratch) / name)
        try:
            report = run_host_without_torch(Path(scratch) / name, model, list(inputs), ATOL * scale)
        except AssertionError as exc:  # the host process stopped: a size it refuses by name (ShapeGuardError)
            last = [line for line in str(exc).splitlines() if line.strip()][-1]
            row.update(host=f"0/{len(inputs)}", error=refused or f"host: {last.strip()}")
            return row
    row["host"] = f"{report['checked'] - len({p.split(':')[0] for p in report['problems']})}/{report['checked']}"
    if refused or report["problems"]:
        row["error"] = refused or "host: " + report["problems"][0]
    return row


def evaluate(name: str, make: Callable[[], tuple], batches: tuple[int, ...] = (1,)) -> list[dict]:
    """One row per batch size: the network compiled once, on its first input (batch 1)."""
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
            return [row]
        start = time.perf_counter()
        compiled = dycl.compile(model, inputs[0], progress=False)
        row["compile_s"] = time.perf_counter() - start
        row["lines"] = compiled._result.rewritten.plain_source.count("\n") if compiled._result else None
        rows = []
        for batch in batches:
            rows.append({**row, "batch": batch, **check_inputs(name, model, compiled, batched(inputs, batch))})
        return rows
    except dycl.UnsupportedError as exc:
        row["error"] = "UnsupportedError: " + " ".join(str(exc).split())
    except Exception as exc:  # noqa: BLE001 - a crash is a result of this benchmark
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        row["error"] = f"crash {type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})"
    return [row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact", type=Path, help="a checkout holding the authors' adNN/ folder")
    parser.add_argument("--inputs", type=int, default=12)
    parser.add_argument("--threshold", type=float, default=None,
                        help="the SDNs' confidence_threshold (default: SDN_THRESHOLDS, chosen so that inputs exit "
                             "at different classifiers with random weights)")
    parser.add_argument("--ranet-threshold", type=float, default=0.2,
                        help="RANet's exit thresholds but the last (random weights: confidences near 0.1)")
    parser.add_argument("--only", default="", help="comma-separated network names")
    parser.add_argument("--batch", default="1", help="comma-separated batch sizes to check each network at "
                        "(compiled once on a batch-1 example; a batch of B joins B of the inputs)")
    args = parser.parse_args()
    batches = tuple(int(b) for b in args.batch.split(","))
    networks = build_networks(args.artifact.resolve(), args.threshold, args.inputs, args.ranet_threshold)
    chosen = [n for n in networks if not args.only or n in args.only.split(",")]
    print("| network | compile s | rewritten lines | batch | paths | agree in process | agree through host | error |")
    print("|---|---|---|---|---|---|---|---|")
    passed = 0
    for name in chosen:
        for row in evaluate(name, networks[name], batches):
            everything = f"{args.inputs}/{args.inputs}"
            passed += row.get("agree") == everything and row.get("host") == everything and "error" not in row
            compile_s = f"{row['compile_s']:.1f}" if "compile_s" in row else ""
            print(f"| {name} | {compile_s} | {row.get('lines', '')} | {row.get('batch', '')} | "
                  f"{row.get('paths', '')} | "
                  f"{row.get('agree', '')} | {row.get('host', '')} | {row.get('error', '')[:400]} |", flush=True)
    print(f"\n{passed} of {len(chosen) * len(batches)} (network, batch size) pairs compile and agree with eager on "
          f"all {args.inputs} inputs, in process and through the torch-free host")


if __name__ == "__main__":
    main()
