"""Per-sample batched execution (``dycl.compile(..., per_sample=True)``), as an execution mode.

- ``semantics``: what per-sample means (one sample's example, the batch of samples at call
  time, how outputs are joined) and the checks of a request;
- ``mode``: ``PerSampleMode``, the hooks every compiler stage calls (``dycl.execution_mode``);
- ``group_onnx``: one sub-DNN's single-sample ONNX graph run over a group of samples;
- ``row_independence``: the proof, node by node, that a graph keeps samples apart;
- ``testing``, ``fuzz``: eager's per-sample reference for tests, and the fuzzer's per-sample campaign.

Importing the package imports none of them (the modules import ONNX and the host emitter).
"""
