"""What a user sees when printing or displaying dycl's objects (issue 31, point 4)."""

from __future__ import annotations

import torch
import torch.nn as nn

import dycl


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            if x.sum() > 0:
                x = layer(x)
        return x


def test_print_rewrite_shows_the_rewritten_forward_source():
    rewritten = dycl.rewrite(Gate().eval())
    text = str(rewritten)
    assert text.startswith("def forward(self, x)") and "self.layers[1](x)" in text
    assert "RewrittenFunction(" not in text
    assert rewritten._repr_html_().startswith("<pre>def forward(self, x)")


def test_print_compiled_summarises_model_backend_counts_and_symbolic_inputs(tmp_path):
    compiled = dycl.compile(Gate().eval(), torch.randn(1, 4))
    text = repr(compiled)
    assert text.startswith("CompiledModel(") and "Gate.forward" in text and "onnxruntime" in text
    assert "2 conditions" in text and "sub-DNNs" in text
    assert any(line.split() == ["input", "x", "float32", "[batch,", "4]"] for line in text.splitlines())
    assert str(compiled) == text
    html = compiled._repr_html_()
    assert html.startswith("<table>") and "[batch, 4]" in html
    loaded = dycl.load(compiled.save(tmp_path / "gate"))
    assert "[batch, 4]" in repr(loaded) and "Gate.forward" in repr(loaded)


def test_compiled_draw_writes_the_picture_where_asked(tmp_path):
    compiled = dycl.compile(Gate().eval(), torch.randn(1, 4))
    target = tmp_path / "gate.svg"
    assert compiled.draw(target) == str(target)
    assert target.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_dycl_logs_its_stages_on_its_own_logger_and_prints_nothing_by_default(caplog, capsys):
    import logging

    with caplog.at_level(logging.DEBUG, logger="dycl"):
        dycl.compile(Gate().eval(), torch.randn(1, 4))
    names = {record.name for record in caplog.records if record.name.startswith("dycl")}
    assert {"dycl.compile", "dycl.export"} <= names
    messages = [r.getMessage() for r in caplog.records if r.name == "dycl.compile"]
    assert any(m.startswith("stage rewrite: ") for m in messages)
    assert any(m.startswith("compiled Gate: ") and "2 conditions" in m for m in messages)
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("dycl").handlers)
    capsys.readouterr()
    dycl.compile(Gate().eval(), torch.randn(1, 4))
    assert capsys.readouterr() == ("", "")  # no handler configured by dycl: nothing printed
