#!/usr/bin/env python3
"""Generates the network zoo (ucplan-network/1 files) from the reference definitions.

  python3 networks/generate.py            rewrite every zoo file (byte-identical when nothing changed)
  python3 networks/generate.py --check    exit 1 when any zoo file is missing, differs or is stale
  python3 networks/generate.py deep-resnet --n1 6 --n2 32 --n3 N --n4 6 -o FILE
                                          a deep bottleneck ResNet (SuperNeurons Table 4:
                                          depth = 3 (n1 + n2 + n3 + n4) + 2) written to FILE

Standard library only. The text is laid out as ucplan's own writer (dump_json in
planner/model/json_util.cpp) lays it out: top-level keys one per line with 1-space indentation,
one line per layer, keys in the order network_to_json writes them, every parameter written
(defaults included), shortest round-trip floats, a final newline. tests/test_zoo.cpp checks that
reading a zoo file and writing it back gives the same JSON document.

The parameter counts and output shapes of these networks are checked against the reference
implementations (torchvision, the Caffe model zoo, the CIFAR papers) in tests/test_zoo.cpp.
"""

import argparse
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEEPBENCH_CSV = os.path.join(ROOT, "..", "shared", "data", "deepbench-conv-training.csv")
# The CSV is kept next to the zoo as well, so that the zoo regenerates without ../shared.
DEEPBENCH_CSV_LOCAL = os.path.join(HERE, "deepbench", "deepbench-conv-training.csv")

TORCHVISION = "torchvision 0.29.2"


def pair(v):
    """A spatial parameter as the C++ writer writes it: one integer when h == w, else [h, w]."""
    if isinstance(v, (tuple, list)):
        h, w = v
        return h if h == w else [h, w]
    return v


class Net:
    """Builds a ucplan-network/1 document; each method appends one layer and returns its name."""

    def __init__(self, name, description, source, shape, labels, input_name="data"):
        self.name = name
        self.description = description
        self.source = source
        self.input_name = input_name
        self.shape = list(shape)
        self.labels = labels
        self.layers = []
        self.names = {input_name}

    def _add(self, layer):
        assert layer["name"] not in self.names, "duplicate layer name " + layer["name"]
        self.names.add(layer["name"])
        self.layers.append(layer)
        return layer["name"]

    @staticmethod
    def _inputs(x):
        return list(x) if isinstance(x, (list, tuple)) else [x]

    def conv(self, name, x, out, kernel, stride=1, pad=0, groups=1, bias=True, dilation=1):
        layer = {"name": name, "type": "conv", "inputs": self._inputs(x), "out_channels": out,
                 "kernel": pair(kernel), "stride": pair(stride), "pad": pair(pad)}
        if pair(dilation) != 1:
            layer["dilation"] = pair(dilation)
        if groups != 1:
            layer["groups"] = groups
        layer["bias"] = bias
        return self._add(layer)

    def pool(self, name, x, mode, kernel=None, stride=None, pad=0, ceil_mode=False,
             count_include_pad=True, global_pool=False):
        layer = {"name": name, "type": "pool", "inputs": self._inputs(x), "mode": mode}
        if global_pool:
            layer["global"] = True
        else:
            layer["kernel"] = pair(kernel)
            layer["stride"] = pair(kernel if stride is None else stride)
            layer["pad"] = pair(pad)
        if ceil_mode:
            layer["ceil_mode"] = True
        if not count_include_pad:
            layer["count_include_pad"] = False
        return self._add(layer)

    def bn(self, name, x, eps=1e-5):
        return self._add({"name": name, "type": "bn", "inputs": self._inputs(x), "eps": float(eps)})

    def relu(self, name, x):
        return self._add({"name": name, "type": "relu", "inputs": self._inputs(x)})

    def lrn(self, name, x, size, alpha, beta, k):
        return self._add({"name": name, "type": "lrn", "inputs": self._inputs(x), "size": size,
                          "alpha": float(alpha), "beta": float(beta), "k": float(k)})

    def fc(self, name, x, out, bias=True):
        return self._add({"name": name, "type": "fc", "inputs": self._inputs(x),
                          "out_features": out, "bias": bias})

    def dropout(self, name, x, ratio=0.5):
        return self._add({"name": name, "type": "dropout", "inputs": self._inputs(x),
                          "ratio": float(ratio)})

    def add(self, name, xs):
        return self._add({"name": name, "type": "add", "inputs": list(xs)})

    def concat(self, name, xs):
        return self._add({"name": name, "type": "concat", "inputs": list(xs)})

    def loss(self, name, x):
        return self._add({"name": name, "type": "softmax_loss", "inputs": self._inputs(x)})

    def document(self):
        doc = {"format": "ucplan-network/1", "name": self.name}
        if self.description:
            doc["description"] = self.description
        if self.source:
            doc["source"] = self.source
        doc["input"] = {"name": self.input_name, "shape": self.shape}
        doc["labels"] = self.labels
        doc["dtype"] = "float32"
        doc["layers"] = self.layers
        return doc

    def text(self):
        return dump_json(self.document())


def _compact(value):
    # nlohmann's dump() without indentation: no spaces; floats in the shortest form that reads
    # back (Python's repr: 1e-05, 0.0001, 0.75, 1.0), which is also nlohmann's choice of notation.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _holds_object_array(value):
    if isinstance(value, list):
        return any(isinstance(e, dict) for e in value)
    if isinstance(value, dict):
        return any(_holds_object_array(v) for v in value.values())
    return False


def _emit(value, indent, out):
    """The layout of ucplan's dump_json (planner/model/json_util.cpp): objects one key per line,
    an array of objects one element per line, each element on one line unless it holds arrays of
    objects itself; so a network file has one line per layer."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(value, dict) and value and _holds_object_array(value):
        out.append("{\n")
        items = list(value.items())
        for i, (k, v) in enumerate(items):
            out.append(inner + _compact(k) + ": ")
            _emit(v, indent + 1, out)
            out.append(",\n" if i + 1 < len(items) else "\n")
        out.append(pad + "}")
    elif isinstance(value, dict) and value and indent == 0:
        out.append(json.dumps(value, indent=1, ensure_ascii=False))
    elif isinstance(value, list) and _holds_object_array(value):
        out.append("[\n")
        for i, e in enumerate(value):
            out.append(inner)
            if _holds_object_array(e):
                _emit(e, indent + 1, out)
            else:
                out.append(_compact(e))
            out.append(",\n" if i + 1 < len(value) else "\n")
        out.append(pad + "]")
    else:
        out.append(_compact(value))


def dump_json(value):
    out = []
    _emit(value, 0, out)
    return "".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# AlexNet as in the Caffe model zoo (models/bvlc_alexnet/train_val.prototxt).

def alexnet():
    n = Net("alexnet",
            "AlexNet as trained in the Caffe model zoo (bvlc_alexnet): 227x227 crops, LRN after "
            "relu1 and relu2, grouped conv2/conv4/conv5 (group 2), max pools 3x3 stride 2 in "
            "Caffe's ceil mode (same sizes as floor mode here: 55->27->13->6), fc6/fc7 with "
            "dropout 0.5. 60,965,224 parameters.",
            "Caffe model zoo models/bvlc_alexnet/train_val.prototxt (BVLC Caffe 1.0)",
            [3, 227, 227], 1000)
    x = n.conv("conv1", "data", 96, 11, stride=4)
    x = n.relu("relu1", x)
    x = n.lrn("norm1", x, 5, 1e-4, 0.75, 1.0)
    x = n.pool("pool1", x, "max", 3, 2, ceil_mode=True)
    x = n.conv("conv2", x, 256, 5, pad=2, groups=2)
    x = n.relu("relu2", x)
    x = n.lrn("norm2", x, 5, 1e-4, 0.75, 1.0)
    x = n.pool("pool2", x, "max", 3, 2, ceil_mode=True)
    x = n.conv("conv3", x, 384, 3, pad=1)
    x = n.relu("relu3", x)
    x = n.conv("conv4", x, 384, 3, pad=1, groups=2)
    x = n.relu("relu4", x)
    x = n.conv("conv5", x, 256, 3, pad=1, groups=2)
    x = n.relu("relu5", x)
    x = n.pool("pool5", x, "max", 3, 2, ceil_mode=True)
    x = n.fc("fc6", x, 4096)
    x = n.relu("relu6", x)
    x = n.dropout("drop6", x, 0.5)
    x = n.fc("fc7", x, 4096)
    x = n.relu("relu7", x)
    x = n.dropout("drop7", x, 0.5)
    x = n.fc("fc8", x, 1000)
    n.loss("loss", x)
    return n


# ---------------------------------------------------------------------------------------------
# torchvision VGG (models.vgg16 / models.vgg19, no batch norm). Layer names are torchvision's
# module names (features.N, classifier.N).

VGG_CFG = {
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
              512, 512, 512, 512, "M"],
}


def vgg(name):
    cfg = VGG_CFG[name]
    convs = sum(1 for v in cfg if v != "M")
    n = Net(name,
            f"VGG-{convs + 3} (configuration {'D' if name == 'vgg16' else 'E'}) as torchvision "
            f"models.{name} without batch norm, 224x224 input. torchvision's "
            "AdaptiveAvgPool2d((7, 7)) before the classifier is omitted: at 224x224 its input is "
            "already 7x7, so it is the identity. Classifier: fc 4096, relu, dropout 0.5, fc 4096, "
            "relu, dropout 0.5, fc 1000.",
            f"{TORCHVISION} torchvision.models.{name}",
            [3, 224, 224], 1000)
    x = "data"
    i = 0
    for v in cfg:
        if v == "M":
            x = n.pool(f"features.{i}", x, "max", 2, 2)
            i += 1
        else:
            x = n.conv(f"features.{i}", x, v, 3, pad=1)
            x = n.relu(f"features.{i + 1}", x)
            i += 2
    x = n.fc("classifier.0", x, 4096)
    x = n.relu("classifier.1", x)
    x = n.dropout("classifier.2", x, 0.5)
    x = n.fc("classifier.3", x, 4096)
    x = n.relu("classifier.4", x)
    x = n.dropout("classifier.5", x, 0.5)
    x = n.fc("classifier.6", x, 1000)
    n.loss("loss", x)
    return n


# ---------------------------------------------------------------------------------------------
# torchvision ResNet (models.resnet): BasicBlock / Bottleneck (v1.5: stride on the 3x3 conv),
# conv bias=False, BatchNorm2d eps 1e-5, downsample = 1x1 conv + bn when the shape changes.
# Layer names follow torchvision's modules; the ReLU module torchvision reuses inside a block is
# split into relu1, relu2 (and relu3) here because every layer of ours has one output.

def basic_block(n, p, x, cin, planes, stride):
    y = n.conv(f"{p}.conv1", x, planes, 3, stride=stride, pad=1, bias=False)
    y = n.bn(f"{p}.bn1", y)
    y = n.relu(f"{p}.relu1", y)
    y = n.conv(f"{p}.conv2", y, planes, 3, pad=1, bias=False)
    y = n.bn(f"{p}.bn2", y)
    if stride != 1 or cin != planes:
        s = n.conv(f"{p}.downsample.0", x, planes, 1, stride=stride, bias=False)
        s = n.bn(f"{p}.downsample.1", s)
    else:
        s = x
    y = n.add(f"{p}.add", [y, s])
    return n.relu(f"{p}.relu2", y), planes


def bottleneck(n, p, x, cin, planes, stride):
    out = planes * 4
    y = n.conv(f"{p}.conv1", x, planes, 1, bias=False)
    y = n.bn(f"{p}.bn1", y)
    y = n.relu(f"{p}.relu1", y)
    y = n.conv(f"{p}.conv2", y, planes, 3, stride=stride, pad=1, bias=False)
    y = n.bn(f"{p}.bn2", y)
    y = n.relu(f"{p}.relu2", y)
    y = n.conv(f"{p}.conv3", y, out, 1, bias=False)
    y = n.bn(f"{p}.bn3", y)
    if stride != 1 or cin != out:
        s = n.conv(f"{p}.downsample.0", x, out, 1, stride=stride, bias=False)
        s = n.bn(f"{p}.downsample.1", s)
    else:
        s = x
    y = n.add(f"{p}.add", [y, s])
    return n.relu(f"{p}.relu3", y), out


def imagenet_resnet(name, description, source, block, counts):
    n = Net(name, description, source, [3, 224, 224], 1000)
    x = n.conv("conv1", "data", 64, 7, stride=2, pad=3, bias=False)
    x = n.bn("bn1", x)
    x = n.relu("relu", x)
    x = n.pool("maxpool", x, "max", 3, 2, pad=1)
    c = 64
    for stage, (planes, count) in enumerate(zip((64, 128, 256, 512), counts), start=1):
        for i in range(count):
            stride = 2 if stage > 1 and i == 0 else 1
            x, c = block(n, f"layer{stage}.{i}", x, c, planes, stride)
    x = n.pool("avgpool", x, "avg", global_pool=True)
    x = n.fc("fc", x, 1000)
    n.loss("loss", x)
    return n


RESNETS = {
    "resnet18": (basic_block, (2, 2, 2, 2)),
    "resnet34": (basic_block, (3, 4, 6, 3)),
    "resnet50": (bottleneck, (3, 4, 6, 3)),
    "resnet101": (bottleneck, (3, 4, 23, 3)),
    "resnet152": (bottleneck, (3, 8, 36, 3)),
}


def resnet(name):
    block, counts = RESNETS[name]
    kind = "basic blocks" if block is basic_block else "bottleneck blocks (v1.5: stride on the 3x3 conv)"
    description = (f"ResNet-{name[6:]} as torchvision models.{name}: 224x224 input, {kind} "
                   f"{counts[0]}/{counts[1]}/{counts[2]}/{counts[3]}, conv without bias + batch norm, "
                   "1x1 conv + bn downsample where the shape changes, global average pool "
                   "(torchvision's AdaptiveAvgPool2d((1, 1))), fc 1000.")
    return imagenet_resnet(name, description, f"{TORCHVISION} torchvision.models.{name}", block, counts)


def deep_resnet(n1, n2, n3, n4, name=None):
    depth = 3 * (n1 + n2 + n3 + n4) + 2
    name = name or f"resnet-deep-{n1}-{n2}-{n3}-{n4}"
    description = (f"ResNet-{depth} for SuperNeurons' going-deeper experiment (Table 4: depth = "
                   f"3(n1+n2+n3+n4)+2 with n1={n1}, n2={n2}, n3={n3}, n4={n4}): torchvision's "
                   "bottleneck ResNet (v1.5) with those block counts, ImageNet stem, 224x224 input.")
    source = (f"{TORCHVISION} torchvision.models.resnet.ResNet(Bottleneck, [{n1}, {n2}, {n3}, {n4}]); "
              "SuperNeurons (PPoPP 2018) Table 4")
    return imagenet_resnet(name, description, source, bottleneck, (n1, n2, n3, n4))


# ---------------------------------------------------------------------------------------------
# torchvision DenseNet-121 (models.densenet121): growth 32, bn_size 4, blocks (6, 12, 24, 16),
# 64 initial features, compression 0.5, no dropout (drop_rate 0). Each dense layer reads the
# concatenation of every earlier feature map of its block, as torchvision's torch.cat(inputs, 1).

def densenet121():
    growth, bn_size, blocks = 32, 4, (6, 12, 24, 16)
    n = Net("densenet121",
            "DenseNet-121 as torchvision models.densenet121: 224x224 input, growth rate 32, "
            "bottleneck width 4x32, dense blocks 6/12/24/16, transitions bn-relu-conv1x1 "
            "(compression 0.5)-avgpool 2x2, final bn, relu, global average pool, fc 1000. Every "
            "dense layer reads a concat of all earlier feature maps of its block (torch.cat in "
            "torchvision's _DenseLayer); the block output is the concat of all of them.",
            f"{TORCHVISION} torchvision.models.densenet121",
            [3, 224, 224], 1000)
    x = n.conv("features.conv0", "data", 64, 7, stride=2, pad=3, bias=False)
    x = n.bn("features.norm0", x)
    x = n.relu("features.relu0", x)
    x = n.pool("features.pool0", x, "max", 3, 2, pad=1)
    c = 64
    for b, count in enumerate(blocks, start=1):
        feats = [x]
        for i in range(1, count + 1):
            p = f"features.denseblock{b}.denselayer{i}"
            y = n.concat(f"{p}.cat", feats) if len(feats) > 1 else feats[0]
            y = n.bn(f"{p}.norm1", y)
            y = n.relu(f"{p}.relu1", y)
            y = n.conv(f"{p}.conv1", y, bn_size * growth, 1, bias=False)
            y = n.bn(f"{p}.norm2", y)
            y = n.relu(f"{p}.relu2", y)
            y = n.conv(f"{p}.conv2", y, growth, 3, pad=1, bias=False)
            feats.append(y)
        x = n.concat(f"features.denseblock{b}", feats)
        c += count * growth
        if b != len(blocks):
            p = f"features.transition{b}"
            x = n.bn(f"{p}.norm", x)
            x = n.relu(f"{p}.relu", x)
            c //= 2
            x = n.conv(f"{p}.conv", x, c, 1, bias=False)
            x = n.pool(f"{p}.pool", x, "avg", 2, 2)
    x = n.bn("features.norm5", x)
    x = n.relu("relu", x)
    x = n.pool("avgpool", x, "avg", global_pool=True)
    x = n.fc("classifier", x, 1000)
    n.loss("loss", x)
    return n


# ---------------------------------------------------------------------------------------------
# torchvision Inception v3 (models.inception_v3, aux_logits=False, transform_input=False).
# BasicConv2d = conv (bias=False) + bn (eps 0.001) + relu. The nested torch.cat of the 3x3
# branches in InceptionE is kept as its own concat, as torchvision computes it.

class Inception:
    def __init__(self, n):
        self.n = n

    def basic(self, name, x, out, kernel, stride=1, pad=0):
        y = self.n.conv(f"{name}.conv", x, out, kernel, stride=stride, pad=pad, bias=False)
        y = self.n.bn(f"{name}.bn", y, eps=0.001)
        return self.n.relu(f"{name}.relu", y)

    def avg3(self, name, x):
        return self.n.pool(name, x, "avg", 3, 1, pad=1)  # F.avg_pool2d(k 3, s 1, p 1), count_include_pad

    def block_a(self, p, x, pool_features):
        b1 = self.basic(f"{p}.branch1x1", x, 64, 1)
        b5 = self.basic(f"{p}.branch5x5_1", x, 48, 1)
        b5 = self.basic(f"{p}.branch5x5_2", b5, 64, 5, pad=2)
        b3 = self.basic(f"{p}.branch3x3dbl_1", x, 64, 1)
        b3 = self.basic(f"{p}.branch3x3dbl_2", b3, 96, 3, pad=1)
        b3 = self.basic(f"{p}.branch3x3dbl_3", b3, 96, 3, pad=1)
        bp = self.avg3(f"{p}.branch_pool_avg", x)
        bp = self.basic(f"{p}.branch_pool", bp, pool_features, 1)
        return self.n.concat(p, [b1, b5, b3, bp])

    def block_b(self, p, x):
        b3 = self.basic(f"{p}.branch3x3", x, 384, 3, stride=2)
        bd = self.basic(f"{p}.branch3x3dbl_1", x, 64, 1)
        bd = self.basic(f"{p}.branch3x3dbl_2", bd, 96, 3, pad=1)
        bd = self.basic(f"{p}.branch3x3dbl_3", bd, 96, 3, stride=2)
        bp = self.n.pool(f"{p}.branch_pool", x, "max", 3, 2)
        return self.n.concat(p, [b3, bd, bp])

    def block_c(self, p, x, c7):
        b1 = self.basic(f"{p}.branch1x1", x, 192, 1)
        b7 = self.basic(f"{p}.branch7x7_1", x, c7, 1)
        b7 = self.basic(f"{p}.branch7x7_2", b7, c7, (1, 7), pad=(0, 3))
        b7 = self.basic(f"{p}.branch7x7_3", b7, 192, (7, 1), pad=(3, 0))
        bd = self.basic(f"{p}.branch7x7dbl_1", x, c7, 1)
        bd = self.basic(f"{p}.branch7x7dbl_2", bd, c7, (7, 1), pad=(3, 0))
        bd = self.basic(f"{p}.branch7x7dbl_3", bd, c7, (1, 7), pad=(0, 3))
        bd = self.basic(f"{p}.branch7x7dbl_4", bd, c7, (7, 1), pad=(3, 0))
        bd = self.basic(f"{p}.branch7x7dbl_5", bd, 192, (1, 7), pad=(0, 3))
        bp = self.avg3(f"{p}.branch_pool_avg", x)
        bp = self.basic(f"{p}.branch_pool", bp, 192, 1)
        return self.n.concat(p, [b1, b7, bd, bp])

    def block_d(self, p, x):
        b3 = self.basic(f"{p}.branch3x3_1", x, 192, 1)
        b3 = self.basic(f"{p}.branch3x3_2", b3, 320, 3, stride=2)
        b7 = self.basic(f"{p}.branch7x7x3_1", x, 192, 1)
        b7 = self.basic(f"{p}.branch7x7x3_2", b7, 192, (1, 7), pad=(0, 3))
        b7 = self.basic(f"{p}.branch7x7x3_3", b7, 192, (7, 1), pad=(3, 0))
        b7 = self.basic(f"{p}.branch7x7x3_4", b7, 192, 3, stride=2)
        bp = self.n.pool(f"{p}.branch_pool", x, "max", 3, 2)
        return self.n.concat(p, [b3, b7, bp])

    def block_e(self, p, x):
        b1 = self.basic(f"{p}.branch1x1", x, 320, 1)
        b3 = self.basic(f"{p}.branch3x3_1", x, 384, 1)
        b3a = self.basic(f"{p}.branch3x3_2a", b3, 384, (1, 3), pad=(0, 1))
        b3b = self.basic(f"{p}.branch3x3_2b", b3, 384, (3, 1), pad=(1, 0))
        b3 = self.n.concat(f"{p}.branch3x3", [b3a, b3b])
        bd = self.basic(f"{p}.branch3x3dbl_1", x, 448, 1)
        bd = self.basic(f"{p}.branch3x3dbl_2", bd, 384, 3, pad=1)
        bda = self.basic(f"{p}.branch3x3dbl_3a", bd, 384, (1, 3), pad=(0, 1))
        bdb = self.basic(f"{p}.branch3x3dbl_3b", bd, 384, (3, 1), pad=(1, 0))
        bd = self.n.concat(f"{p}.branch3x3dbl", [bda, bdb])
        bp = self.avg3(f"{p}.branch_pool_avg", x)
        bp = self.basic(f"{p}.branch_pool", bp, 192, 1)
        return self.n.concat(p, [b1, b3, bd, bp])


def inception_v3():
    n = Net("inception_v3",
            "Inception v3 as torchvision models.inception_v3(aux_logits=False, "
            "transform_input=False, init_weights=True): 299x299 input; BasicConv2d = conv without "
            "bias + bn (eps 0.001) + relu; the avg pools of the A/C/E blocks are 3x3 stride 1 pad 1 "
            "counting the padding; the 1x3/3x1 branch pairs of Mixed_7b/7c are concatenated first and "
            "then joined, as torchvision's nested torch.cat; global average pool, dropout 0.5, fc "
            "1000 (23,834,568 parameters). Not included: the "
            "auxiliary classifier (aux_logits=False) and transform_input's per-channel "
            "re-normalisation of the input (off by default; an elementwise affine with no "
            "parameters).",
            f"{TORCHVISION} torchvision.models.inception_v3(aux_logits=False)",
            [3, 299, 299], 1000)
    m = Inception(n)
    x = m.basic("Conv2d_1a_3x3", "data", 32, 3, stride=2)
    x = m.basic("Conv2d_2a_3x3", x, 32, 3)
    x = m.basic("Conv2d_2b_3x3", x, 64, 3, pad=1)
    x = n.pool("maxpool1", x, "max", 3, 2)
    x = m.basic("Conv2d_3b_1x1", x, 80, 1)
    x = m.basic("Conv2d_4a_3x3", x, 192, 3)
    x = n.pool("maxpool2", x, "max", 3, 2)
    x = m.block_a("Mixed_5b", x, 32)
    x = m.block_a("Mixed_5c", x, 64)
    x = m.block_a("Mixed_5d", x, 64)
    x = m.block_b("Mixed_6a", x)
    x = m.block_c("Mixed_6b", x, 128)
    x = m.block_c("Mixed_6c", x, 160)
    x = m.block_c("Mixed_6d", x, 160)
    x = m.block_c("Mixed_6e", x, 192)
    x = m.block_d("Mixed_7a", x)
    x = m.block_e("Mixed_7b", x)
    x = m.block_e("Mixed_7c", x)
    x = n.pool("avgpool", x, "avg", global_pool=True)
    x = n.dropout("dropout", x, 0.5)
    x = n.fc("fc", x, 1000)
    n.loss("loss", x)
    return n


# ---------------------------------------------------------------------------------------------
# CIFAR-10 networks.

def resnet20():
    n = Net("resnet20",
            "ResNet-20 for CIFAR-10 (He et al. 2016, section 4.2): 32x32 input, conv3x3 16, then 3 "
            "stages of 3 basic blocks with 16/32/64 channels (stride 2 at the start of stages 2 "
            "and 3), global average pool, fc 10; conv without bias + batch norm. The paper's "
            "zero-padding identity shortcuts (option A) cannot be written with ucplan's layer "
            "types, so the two shortcuts that change shape are 1x1 conv + bn projections "
            "(option B): 272,474 parameters instead of option A's 269,722 (0.27M).",
            "He, Zhang, Ren, Sun: Deep Residual Learning for Image Recognition (CVPR 2016), "
            "section 4.2, n = 3, shortcut option B",
            [3, 32, 32], 10)
    x = n.conv("conv1", "data", 16, 3, pad=1, bias=False)
    x = n.bn("bn1", x)
    x = n.relu("relu", x)
    c = 16
    for stage, planes in enumerate((16, 32, 64), start=1):
        for i in range(3):
            stride = 2 if stage > 1 and i == 0 else 1
            x, c = basic_block(n, f"layer{stage}.{i}", x, c, planes, stride)
    x = n.pool("avgpool", x, "avg", global_pool=True)
    x = n.fc("fc", x, 10)
    n.loss("loss", x)
    return n


def densenet40():
    growth, per_block = 12, 12
    n = Net("densenet40",
            "DenseNet (L=40, k=12) for CIFAR-10 (Huang et al. 2017, section 3-4): 32x32 input, "
            "conv3x3 to 16 channels, 3 dense blocks of 12 bn-relu-conv3x3 (12 channels) layers "
            "without bottleneck or compression, each reading the concat of all earlier maps of "
            "its block; transitions bn-relu-conv1x1 (same width)-avgpool 2x2; final bn, relu, "
            "global average pool, fc 10. Convolutions have no bias. No dropout (the paper uses "
            "dropout 0.2 only without data augmentation).",
            "Huang, Liu, van der Maaten, Weinberger: Densely Connected Convolutional Networks "
            "(CVPR 2017), DenseNet L=40 k=12 (1.0M parameters); github.com/liuzhuang13/DenseNet",
            [3, 32, 32], 10)
    x = n.conv("conv0", "data", 16, 3, pad=1, bias=False)
    c = 16
    for b in range(1, 4):
        feats = [x]
        for i in range(1, per_block + 1):
            p = f"block{b}.layer{i}"
            y = n.concat(f"{p}.cat", feats) if len(feats) > 1 else feats[0]
            y = n.bn(f"{p}.norm", y)
            y = n.relu(f"{p}.relu", y)
            y = n.conv(f"{p}.conv", y, growth, 3, pad=1, bias=False)
            feats.append(y)
        x = n.concat(f"block{b}", feats)
        c += per_block * growth
        if b != 3:
            p = f"transition{b}"
            x = n.bn(f"{p}.norm", x)
            x = n.relu(f"{p}.relu", x)
            x = n.conv(f"{p}.conv", x, c, 1, bias=False)
            x = n.pool(f"{p}.pool", x, "avg", 2, 2)
    x = n.bn("norm", x)
    x = n.relu("relu", x)
    x = n.pool("avgpool", x, "avg", global_pool=True)
    x = n.fc("fc", x, 10)
    n.loss("loss", x)
    return n


# ---------------------------------------------------------------------------------------------
# DeepBench training convolutions (the 94 rows mu-cuDNN evaluates).

DEEPBENCH_FIELDS = ["w", "h", "c", "n", "k", "filter_w", "filter_h", "pad_w", "pad_h", "stride_w", "stride_h"]


def deepbench_csv_text():
    """shared/data's CSV when the shared folder is beside the repository, else the zoo's copy."""
    path = DEEPBENCH_CSV if os.path.isfile(DEEPBENCH_CSV) else DEEPBENCH_CSV_LOCAL
    with open(path, newline="") as f:
        return path, f.read()


def deepbench_rows():
    path, text = deepbench_csv_text()
    reader = csv.DictReader(text.splitlines())
    assert reader.fieldnames == DEEPBENCH_FIELDS, f"unexpected columns in {path}: {reader.fieldnames}"
    return [{k: int(v) for k, v in row.items()} for row in reader]


def conv_out(size, kernel, pad, stride):
    return (size + 2 * pad - kernel) // stride + 1


def deepbench_conv(i, r):
    ho = conv_out(r["h"], r["filter_h"], r["pad_h"], r["stride_h"])
    wo = conv_out(r["w"], r["filter_w"], r["pad_w"], r["stride_w"])
    n = Net(f"deepbench-conv{i:02d}",
            f"DeepBench training conv #{i:02d}: N={r['n']} (mu-cuDNN used {4 * r['n']}), input "
            f"C={r['c']} H={r['h']} W={r['w']}, K={r['k']} filters {r['filter_h']}x{r['filter_w']} "
            f"(HxW), pad {r['pad_h']}x{r['pad_w']}, stride {r['stride_h']}x{r['stride_w']} -> "
            f"output {r['k']}x{ho}x{wo}. One conv layer without bias and no loss (labels unused: "
            "the sink receives an external gradient).",
            "Baidu DeepBench code/kernels/conv_problems.h training_set, row "
            f"{i} of shared/data/deepbench-conv-training.csv",
            [r["c"], r["h"], r["w"]], 1)
    n.conv("conv", "data", r["k"], (r["filter_h"], r["filter_w"]),
           stride=(r["stride_h"], r["stride_w"]), pad=(r["pad_h"], r["pad_w"]), bias=False)
    return n


def deepbench_readme(rows):
    lines = [
        "# DeepBench training convolutions",
        "",
        "The 94 convolution configurations of Baidu's DeepBench training set, as used by mu-cuDNN",
        "(shared/data/deepbench-conv-training.csv, in CSV order). Each `convNN.json` is one conv",
        "layer without bias on the input C x H x W; there is no loss layer, so the conv's output is",
        "a sink that receives an external gradient (`labels` is unused). N is DeepBench's batch;",
        "mu-cuDNN (section V-A) multiplied it by 4. Generated by `networks/generate.py`; do not edit.",
        "",
        "| file | N | C | H | W | K | filter HxW | pad HxW | stride HxW | output KxHxW |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(rows, start=1):
        ho = conv_out(r["h"], r["filter_h"], r["pad_h"], r["stride_h"])
        wo = conv_out(r["w"], r["filter_w"], r["pad_w"], r["stride_w"])
        lines.append(f"| conv{i:02d}.json | {r['n']} | {r['c']} | {r['h']} | {r['w']} | {r['k']} | "
                     f"{r['filter_h']}x{r['filter_w']} | {r['pad_h']}x{r['pad_w']} | "
                     f"{r['stride_h']}x{r['stride_w']} | {r['k']}x{ho}x{wo} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------

# The checked-in member of the deep ResNet family: depth 3 (6 + 32 + 32 + 6) + 2 = 230.
DEEP_CHECKED_IN = (6, 32, 32, 6)


def zoo_files():
    """Every generated file: relative path -> text."""
    files = {}

    def put(net, rel=None):
        files[rel or net.name + ".json"] = net.text()

    put(alexnet())
    put(vgg("vgg16"))
    put(vgg("vgg19"))
    for name in RESNETS:
        put(resnet(name))
    put(densenet121())
    put(inception_v3())
    put(resnet20())
    put(densenet40())
    put(deep_resnet(*DEEP_CHECKED_IN, name="resnet230"))
    rows = deepbench_rows()
    assert len(rows) == 94, f"expected 94 DeepBench rows, got {len(rows)}"
    for i, r in enumerate(rows, start=1):
        put(deepbench_conv(i, r), f"deepbench/conv{i:02d}.json")
    files["deepbench/README.md"] = deepbench_readme(rows)
    files["deepbench/deepbench-conv-training.csv"] = deepbench_csv_text()[1]
    return files


def existing_generated_files():
    """Files under networks/ that generate.py owns (everything but this script)."""
    found = set()
    for dirpath, _, filenames in os.walk(HERE):
        for fn in filenames:
            rel = os.path.relpath(os.path.join(dirpath, fn), HERE)
            if rel == "generate.py" or "__pycache__" in rel:
                continue
            found.add(rel)
    return found


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def main_zoo(check):
    files = zoo_files()
    problems = []
    for rel, text in sorted(files.items()):
        path = os.path.join(HERE, rel)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        problems.append(f"{rel}: differs from what generate.py writes")
            except FileNotFoundError:
                problems.append(f"{rel}: missing")
        elif write_if_changed(path, text):
            print(f"wrote networks/{rel}")
    for rel in sorted(existing_generated_files() - set(files)):
        problems.append(f"{rel}: not produced by generate.py (stale? remove it or add it to generate.py)")
    for p in problems:
        print(f"networks/{p}", file=sys.stderr)
    if check:
        if problems:
            print(f"{len(problems)} zoo file(s) out of date: run python3 networks/generate.py", file=sys.stderr)
            return 1
        print(f"{len(files)} zoo files up to date")
    return 1 if problems and check else 0


def main():
    argv = sys.argv[1:]
    if argv and argv[0] == "deep-resnet":
        p = argparse.ArgumentParser(prog="generate.py deep-resnet",
                                    description="Write a deep bottleneck ResNet (SuperNeurons Table 4).")
        p.add_argument("--n1", type=int, default=6)
        p.add_argument("--n2", type=int, default=32)
        p.add_argument("--n3", type=int, required=True)
        p.add_argument("--n4", type=int, default=6)
        p.add_argument("--name", help="network name (default resnet-deep-N1-N2-N3-N4)")
        p.add_argument("-o", "--output", required=True, help="file to write")
        a = p.parse_args(argv[1:])
        for k in ("n1", "n2", "n3", "n4"):
            if getattr(a, k) < 1:
                p.error(f"--{k} must be at least 1")
        net = deep_resnet(a.n1, a.n2, a.n3, a.n4, a.name)
        write_if_changed(a.output, net.text())
        print(f"wrote {a.output}: {len(net.layers)} layers, depth {3 * (a.n1 + a.n2 + a.n3 + a.n4) + 2}")
        return 0
    p = argparse.ArgumentParser(description="Generate the ucplan network zoo (networks/*.json).")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when any file is missing, differs or is not generated")
    a = p.parse_args(argv)
    return main_zoo(a.check)


if __name__ == "__main__":
    sys.exit(main())
