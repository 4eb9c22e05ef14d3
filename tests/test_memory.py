"""helpers.grpo.memory: what training frees goes back to the system, and the peak is measured with the servers."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from helpers.grpo.memory import PeakMemory

# 300 tensors of 2 MB between small ones that live on, after an 8 MB block was freed (glibc's threshold then
# rises to 8 MB, as it does after a training step's first large frees): the resident memory the trimmer gives back
# after freeing them, at the next layer boundary (its hook), with no slack.
FREE_AFTER_PINS = """
import sys, psutil, torch
from helpers.grpo.memory import HeapTrimmer
trimmer = HeapTrimmer(slack_bytes=0)
rss = lambda: psutil.Process().memory_info().rss / 2**20
big = torch.ones(8 << 18); del big
pins, blocks = [], []
for _ in range(300):
    blocks.append(torch.ones(1 << 19))
    pins.append(torch.ones(64))
before = rss(); del blocks
if sys.argv[1] == "on":
    trimmer.maybe_trim()
print(before - rss())
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_freed_training_tensors_go_back_to_the_system():
    def returned_mb(mode: str) -> float:
        done = subprocess.run([sys.executable, "-c", FREE_AFTER_PINS, mode], capture_output=True, text=True,
                              check=True)
        return float(done.stdout.strip().splitlines()[-1])

    assert returned_mb("off") < 100  # glibc keeps the freed 600 MB resident between the pins
    assert returned_mb("on") > 500


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_the_trimmer_runs_at_layer_boundaries_only_past_its_slack():
    """Hooked on a model's decoder layers, forward and backward; within the slack nothing is trimmed (a trim makes
    the system zero every page handed out again), past it the heap is trimmed."""
    import torch

    from helpers.grpo.memory import HeapTrimmer

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    calls = []
    lazy, eager = HeapTrimmer(slack_bytes=1 << 50), HeapTrimmer(slack_bytes=0)
    for trimmer in (lazy, eager):
        model = Tiny()
        trimmer.maybe_trim = lambda *a, _t=trimmer, _f=trimmer.maybe_trim: (calls.append(_t), _f(*a))[1]
        assert trimmer.attach(model)
        model(torch.ones(2, 4, requires_grad=True)).sum().backward()
    assert calls.count(lazy) == calls.count(eager) == 6  # 3 layers, forward and backward
    assert lazy.trims == 0 and eager.trims >= 1  # again whenever resident memory grew since its last trim
    assert not HeapTrimmer().attach(torch.nn.Linear(2, 2))  # no decoder layers: nothing hooked
    lazy.trim()  # before the policy server samples: whatever the slack
    assert lazy.trims == 1


def test_peak_memory_counts_the_processes_started_below():
    child = subprocess.Popen([sys.executable, "-c", "x = bytearray(300 << 20); import time; time.sleep(3)"])
    try:
        with PeakMemory(interval_s=0.05) as peak:
            child.wait(timeout=30)
    finally:
        child.kill()
    record = peak.record()
    assert record["children_gb"] > 0.25 and record["total_gb"] >= record["own_gb"] + 0.25


def test_weight_change_reads_what_safetensors_holds_one_tensor_at_a_time(tmp_path):
    """Notebook 02's weight_change reads the files itself (no memory map held open): same tensors, same dtypes,
    same figures as safetensors' own loader."""
    import torch
    from safetensors.torch import load_file, save_file

    from helpers.grpo.before_after import SafetensorsReader, weight_change

    generator = torch.Generator().manual_seed(0)
    before = {"a": torch.randn(3, 4, generator=generator), "b": torch.randn(5, generator=generator).bfloat16(),
              "steps": torch.arange(4), "empty": torch.zeros(0, 2)}
    after = {**before, "a": before["a"] + 0.5, "new": torch.ones(2)}
    for name, tensors in (("before", before), ("after", after)):
        (tmp_path / name).mkdir()
        save_file(tensors, str(tmp_path / name / "model.safetensors"))
    with SafetensorsReader(tmp_path / "after" / "model.safetensors") as reader:
        expected = load_file(str(tmp_path / "after" / "model.safetensors"))
        assert sorted(reader.names()) == sorted(expected)
        for name, tensor in expected.items():
            assert reader.tensor(name).dtype == tensor.dtype and torch.equal(reader.tensor(name), tensor), name
    change = weight_change(tmp_path / "before", tmp_path / "after")
    assert change["tensors"] == 5 and change["tensors_changed"] == 1 and abs(change["max_abs_change"] - 0.5) < 1e-6
    norm = sum(float((t.float() ** 2).sum()) for t in before.values())
    assert abs(change["relative_l2_change"] - (12 * 0.25 / norm) ** 0.5) < 1e-6


def test_gradients_at_once_change_no_gradient():
    """gradients_at_once (the trainer's hook on its loss): every trainable parameter's gradient a view into one
    block (a parameter of another dtype gets its own; a frozen one none), and the backward pass's gradients are
    the same as without it, a tied weight's two contributions included."""
    import torch

    from helpers.grpo.memory import gradients_at_once

    def model_and_loss(hook: bool):
        torch.manual_seed(0)
        embed = torch.nn.Embedding(50, 8)
        model = torch.nn.ModuleDict({"embed": embed, "mid": torch.nn.Linear(8, 8), "frozen": torch.nn.Linear(8, 8),
                                     "wide": torch.nn.Linear(8, 8).double()})
        model["frozen"].requires_grad_(False)
        x = model["mid"](embed(torch.tensor([[1, 2, 3]])))
        x = model["frozen"](x) + model["wide"](x.double()).float()
        loss = (x @ embed.weight.T).logsumexp(-1).sum()  # the embedding doubles as the output layer
        if hook:
            loss.register_hook(lambda grad: gradients_at_once(model))
        loss.backward()
        return model

    plain, hooked = model_and_loss(False), model_and_loss(True)
    for (name, a), b in zip(plain.named_parameters(), hooked.parameters()):
        assert (a.grad is None) == (b.grad is None), name
        if a.grad is not None:
            assert torch.equal(a.grad, b.grad), name
    storage = lambda module: {p.grad.untyped_storage().data_ptr() for p in module.parameters()}
    assert len(storage(hooked["embed"]) | storage(hooked["mid"])) == 1  # the float32 weights: one block
    assert len(storage(hooked["wide"]) - storage(hooked["mid"])) == 2  # the float64 weight and bias: their own
    assert hooked["frozen"].weight.grad is None
