"""accelkit.torch.compile against eager PyTorch: torchvision classifiers (resnet18,
mobilenet_v2), a detection model (fasterrcnn_mobilenet_v3_large_320_fpn) that the
partitioner splits between accelkit and PyTorch, and a Hugging-Face-style BERT in plain
PyTorch (tests/infer/bert_torch.py), each with random weights (no downloads) and checked within 1e-4
of eager at two batch sizes; plus the refusals (dtype, rank, fixed dimensions, grad,
training mode), partition=False, and .refresh() after a weight change.
A missing torch or torchvision is a failure naming what to install."""
import os
import sys
import unittest

try:
    import torch
    import torchvision
except ImportError as e:
    sys.exit(f"FAIL: {e.name} is missing (Debian python3-torch / python3-torchvision; "
             "run scripts/setup)")

import accelkit.torch as akt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "infer"))
import bert_torch  # noqa: E402
from torch_init import randomize_batch_norms  # noqa: E402

TOL = 1e-4


def max_diff(got, want):
    """The largest absolute difference over tensors nested alike (structure checked)."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"got {type(got).__name__}, expected a tensor"
        assert got.shape == want.shape and got.dtype == want.dtype, \
            f"got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
        return (got.double() - want.double()).abs().max().item() if want.numel() else 0.0
    assert type(got) is type(want), f"got {type(got).__name__}, expected {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want)
        return max([max_diff(got[k], want[k]) for k in want] or [0.0])
    assert len(got) == len(want)
    return max([max_diff(g, w) for g, w in zip(got, want)] or [0.0])


def bert_inputs(batch, seq, g):
    ids = torch.randint(0, 100, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, seq - 2:] = 0  # padding in the first sequence
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2:] = 1
    return ids, mask, types


class DataDependent(torch.nn.Module):
    """A branch on a tensor's value in Python: the trace would freeze it. The forward
    also reads a parameter of a submodule that the partitioner replaces."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.gate(x)
        if h.sum() > 0:
            h = torch.relu(h)
        else:
            h = -h
        return self.head(h) + self.gate.bias.sum()


class Mystery(torch.autograd.Function):
    """x * 2 + 1, exported as an operator of a domain accelkit does not know."""

    @staticmethod
    def forward(ctx, x):
        return x * 2 + 1

    @staticmethod
    def symbolic(g, x):
        return g.op("accelkit.test::Mystery", x)


class MysteryModule(torch.nn.Module):
    def forward(self, x):
        return Mystery.apply(x)


class SharedConv(torch.nn.Module):
    """One convolution over two resolutions (as detection heads run one head over every
    feature level), next to an operator accelkit refuses, which forces partitioning."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.pool = torch.nn.AvgPool2d(2)
        self.mystery = MysteryModule()

    def forward(self, x):
        return self.conv(x), self.conv(self.pool(x)), self.mystery(x)


class TestTorchCompile(unittest.TestCase):
    def check_close(self, got, want, what):
        d = max_diff(got, want)
        self.assertLessEqual(d, TOL, f"{what}: differs from eager by {d}")

    def classifier(self, ctor, seed):
        torch.manual_seed(seed)
        model = randomize_batch_norms(ctor(weights=None).eval(), seed)
        fast = akt.compile(model, (torch.randn(1, 3, 64, 64),))
        self.assertTrue(fast.runs_whole_on_accelkit, fast.report())
        for batch in (1, 3):
            x = torch.randn(batch, 3, 64, 64)
            with torch.no_grad():
                want = model(x)
            self.assertGreater(want.std().item(), 1e-2)  # a comparison that can fail
            self.check_close(fast(x), want, f"{ctor.__name__} batch {batch}")
        return model, fast

    def test_resnet18(self):
        self.classifier(torchvision.models.resnet18, 1)

    def test_mobilenet_v2_and_refresh(self):
        model, fast = self.classifier(torchvision.models.mobilenet_v2, 2)
        x = torch.randn(2, 3, 64, 64)
        with torch.no_grad():
            model.classifier[1].weight.mul_(2.0)
            want = model(x)
        self.assertGreater(max_diff(fast(x), want), 1e-3)  # the snapshot: old weights
        fast.refresh()
        self.check_close(fast(x), want, "mobilenet_v2 after refresh")

    def test_bert_dynamic_batch_and_sequence(self):
        torch.manual_seed(3)
        model = bert_torch.Bert(inter=128, max_pos=32, as_dict=True).eval()
        g = torch.Generator().manual_seed(3)
        dyn = {0: [0, 1], 1: [0, 1], 2: [0, 1]}
        fast = akt.optimize(model, bert_inputs(2, 8, g), dynamic_axes=dyn)
        self.assertTrue(fast.runs_whole_on_accelkit, fast.report())
        for batch, seq in ((1, 5), (4, 12)):
            args = bert_inputs(batch, seq, g)
            with torch.no_grad():
                want = model(*args)
            got = fast(*args)
            self.assertIsInstance(got, dict)
            self.check_close(got, want, f"bert batch {batch} sequence {seq}")

    def test_detection_partitioned(self):
        torch.manual_seed(4)
        # score threshold 0: random weights give low scores, and the outputs must not be empty
        model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
            weights=None, weights_backbone=None, box_score_thresh=0.0,
            box_detections_per_img=20, min_size=160, max_size=224).eval()
        randomize_batch_norms(model, 4)
        # spread the random logits: near-equal objectness or class scores would leave the
        # order of top-k and NMS to rounding, in eager PyTorch as on accelkit
        with torch.no_grad():
            model.rpn.head.cls_logits.weight.mul_(100)
            model.roi_heads.box_predictor.cls_score.weight.mul_(100)
        images = [torch.rand(3, 96, 128)]
        fast = akt.compile(model, (images,))
        where = {p.name: p.runs_on for p in fast.partitions}
        self.assertEqual(where[""], "pytorch", fast.report())
        for name in ("backbone", "rpn.head", "roi_heads.box_head", "roi_heads.box_predictor"):
            self.assertEqual(where.get(name), "accelkit", f"{name}\n{fast.report()}")
        for name in ("transform", "rpn.anchor_generator", "roi_heads.box_roi_pool"):
            self.assertEqual(where.get(name), "pytorch", f"{name}\n{fast.report()}")
        self.assertIn("ImageList", fast.report())
        for imgs in (images, [torch.rand(3, 96, 128), torch.rand(3, 96, 128)]):
            with torch.no_grad():
                want = model(imgs)
            self.assertGreater(want[0]["scores"].std().item(), 1e-2)
            self.check_close(fast(imgs), want, f"detection on {len(imgs)} images")
        # the backbone's height and width are the example's (after the transform's resize)
        with self.assertRaisesRegex(ValueError, "input 0: dimension 3 is"):
            fast([torch.rand(3, 96, 96)])

    def test_data_dependent_code_stays_in_pytorch(self):
        torch.manual_seed(5)
        model = DataDependent().eval()
        x = torch.randn(2, 8)
        fast = akt.compile(model, (x,))
        where = {p.name: (p.runs_on, p.reason) for p in fast.partitions}
        self.assertEqual(where[""][0], "pytorch")
        self.assertIn("data-dependent", where[""][1])
        self.assertEqual(where["gate"][0], "accelkit")
        self.assertEqual(where["head"][0], "accelkit")
        for sign in (1.0, -1.0):  # both branches
            x = torch.randn(3, 8) * sign
            with torch.no_grad():
                want = model(x)
            self.check_close(fast(x), want, "data-dependent module")
        with self.assertRaisesRegex(RuntimeError, "data-dependent"):
            akt.compile(model, (x,), partition=False)

    def test_unsupported_operator_stays_in_pytorch(self):
        torch.manual_seed(7)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), MysteryModule(),
                                    torch.nn.Linear(8, 4)).eval()
        fast = akt.compile(model, (torch.randn(2, 8),))
        where = {p.name: (p.runs_on, p.reason) for p in fast.partitions}
        self.assertEqual(where[""][0], "pytorch")
        self.assertIn("accelkit.test:Mystery", where[""][1])
        self.assertEqual([where[n][0] for n in "012"], ["accelkit", "pytorch", "accelkit"])
        self.assertIn("unsupported operator accelkit.test:Mystery", where["1"][1])
        x = torch.randn(5, 8)
        with torch.no_grad():
            want = model(x)
        self.check_close(fast(x), want, "module with an unsupported operator")

    def test_shared_submodule_over_two_sizes(self):
        torch.manual_seed(8)
        model = SharedConv().eval()
        fast = akt.compile(model, (torch.randn(1, 3, 16, 16),), dynamic_axes={0: [0, 2, 3]})
        where = {p.name: p.runs_on for p in fast.partitions}
        self.assertEqual(where, {"": "pytorch", "conv": "accelkit", "pool": "accelkit",
                                 "mystery": "pytorch"}, fast.report())
        # the root's dynamic height and width reach both submodules
        x = torch.randn(2, 3, 12, 20)
        with torch.no_grad():
            want = model(x)
        got = fast(x)
        self.assertIsInstance(got, tuple)
        self.check_close(got, want, "shared convolution")

    def test_import_spellings(self):
        import importlib
        submodule = importlib.import_module("accelkit.torch.compile")
        model = torch.nn.Linear(4, 2).eval()
        x = torch.randn(3, 4)
        with torch.no_grad():
            want = model(x)
        for fn in (akt.compile, akt.optimize, submodule, submodule.compile):
            self.check_close(fn(model, x)(x), want, f"compiled through {fn!r}")

    def test_refusals(self):
        torch.manual_seed(6)
        model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
        fast = akt.compile(model, torch.randn(2, 8))
        with self.assertRaisesRegex(TypeError, "input 0: dtype torch.float64"):
            fast(torch.randn(2, 8, dtype=torch.float64))
        with self.assertRaisesRegex(ValueError, "input 0: rank 3"):
            fast(torch.randn(2, 8, 1))
        with self.assertRaisesRegex(ValueError, "input 0: dimension 1 is 9"):
            fast(torch.randn(2, 9))
        with self.assertRaisesRegex(TypeError, "compiled for \\(tensor\\)"):
            fast(torch.randn(2, 8), torch.randn(2, 8))
        with self.assertRaisesRegex(RuntimeError, "requires grad"):
            fast(torch.randn(2, 8, requires_grad=True))
        with self.assertRaisesRegex(RuntimeError, "for inference"):
            fast.train()
        out = fast(torch.randn(5, 8))
        self.assertFalse(out.requires_grad)
        self.assertEqual(tuple(out.shape), (5, 4))
        with self.assertRaisesRegex(TypeError, "expected a torch.nn.Module"):
            akt.compile(lambda x: x, torch.randn(2, 8))


if __name__ == "__main__":
    unittest.main()
