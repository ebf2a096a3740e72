#!/usr/bin/env python3
"""Writes the ONNX inputs of tests/error/import_*.cmd (in inputs/) (checked in; CI does not run this).

Needs the onnx package (Debian: python3-onnx). The weights are initializers with dims and no
data, as scripts/export_torch.py writes them: ucplan import never reads weights.
Usage: /usr/bin/python3 tests/error/make_onnx_inputs.py
"""
import os

import onnx
from onnx import TensorProto, helper

here = os.path.dirname(os.path.abspath(__file__))


def stripped(name, dims):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    return t


def save(name, nodes, initializers):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, name, [x], [y], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_onnx_inputs.py")
    onnx.save(model, os.path.join(here, "inputs", name + ".onnx"))


# conv -> relu -> Einsum: the third node (index 2) is not a ucplan layer.
save("unsupported_op",
     [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
      helper.make_node("Relu", ["c"], ["r"], name="relu"),
      helper.make_node("Einsum", ["r"], ["y"], name="transpose", equation="nchw->nhwc")],
     [stripped("w", [16, 3, 3, 3])])
