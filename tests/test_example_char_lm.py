"""``examples/char_lm.py``, the PyTorch-style character LM, end to end: each stage checked here (against eager
tensorplay and against the same model run in PyTorch), and the script run as users run it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "char_lm.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("char_lm_example", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return _example()


@pytest.fixture(scope="module")
def run(example: ModuleType) -> dict[str, Any]:
    return example.main(steps=60, seed=1, verbose=False)  # type: ignore[no-any-return]


def test_eager_training_lowers_the_loss(run: dict[str, Any], example: ModuleType) -> None:
    losses = run["eager_losses"]
    assert len(losses) == 60 and all(np.isfinite(losses))
    vocab = len(set(example.TEXT))
    assert abs(np.mean(losses[:3]) - np.log(vocab)) < 0.5  # starts near chance
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])


def test_the_compiled_step_gives_the_eager_losses(run: dict[str, Any]) -> None:
    n = len(run["compiled_losses"])
    assert n == 50
    np.testing.assert_allclose(run["compiled_losses"], run["eager_losses"][:n], rtol=1e-5, atol=1e-5)


def test_the_loaded_program_matches_eager_at_every_size(run: dict[str, Any], example: ModuleType) -> None:
    sizes = set(run["export_diffs"])
    assert {(1, 1), (1, example.BLOCK)} <= sizes and any(b > 1 for b, _ in sizes)
    assert all(d < 1e-5 for d in run["export_diffs"].values())
    assert run["export_dims"] == {"batch": (1, 64), "seq": (1, example.BLOCK)}


def test_generation(run: dict[str, Any], example: ModuleType) -> None:
    for text in (run["greedy"], run["sampled"]):
        assert text.startswith("To be") and len(text) == len("To be") + 40
        assert set(text) <= set(example.TEXT)
    assert run["greedy"] != run["sampled"]
    assert run["greedy_loaded"] == run["greedy"]  # the loaded program generates the same text


def test_the_model_computes_what_torch_computes(example: ModuleType) -> None:
    """The example's model, with its weights copied into the same model written in PyTorch, gives PyTorch's
    logits and loss (so the stages above compare a right model, not just tensorplay with itself)."""
    tp.manual_seed(0)
    dataset, chars = example.make_data(example.BLOCK)
    V = len(chars)
    ours = example.CharLM(V)
    d = 32
    theirs = _torch_char_lm(V, d, example.BLOCK)
    state = {k: torch.from_numpy(np.array(v.detach().numpy())) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)
    x, y = dataset[3][0][None], dataset[3][1][None]
    x2 = tp.stack([dataset[i][0][:7] for i in range(3)])
    for idx in (x, x2):
        want = theirs(torch.from_numpy(idx.numpy().copy())).detach().numpy()
        np.testing.assert_allclose(ours(idx).detach().numpy(), want, rtol=1e-4, atol=1e-5)
    loss = example.loss_fn(ours, x, y)
    tl = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x.numpy().copy())).view(-1, V),
                                           torch.from_numpy(y.numpy().copy()).view(-1))
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5)


def _torch_char_lm(V: int, d: int, block: int) -> torch.nn.Module:
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            T = x.shape[1]
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
            h = self.ln1(x)
            a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
            x = x + a
            return x + self.mlp(self.ln2(x))

    class CharLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(V, d)
            self.pos = nn.Embedding(block, d)
            self.blocks = nn.Sequential(Block(), Block())
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, V)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
            return self.head(self.ln_f(self.blocks(x)))  # type: ignore[no-any-return]

    return CharLM()


def test_the_loaded_program_refuses_a_sequence_past_the_table(example: ModuleType, tmp_path: Path) -> None:
    tp.manual_seed(0)
    dataset, chars = example.make_data(example.BLOCK)
    model = example.CharLM(len(chars)).eval()
    seq = tp.export.Dim("seq", min=1, max=example.BLOCK)
    ep = tp.export.export(model, (dataset[0][0][None],), dynamic_shapes={"idx": {1: seq}})
    tp.export.save(ep, tmp_path / "lm.tpexport")
    loaded = tp.export.load(tmp_path / "lm.tpexport")
    with pytest.raises(tp.export.InputConstraintError, match="seq"):
        loaded.module()(tp.zeros(1, example.BLOCK + 1, dtype=tp.int64))


def test_the_script_runs() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, str(SCRIPT), "--steps", "30"], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["eager", "compiled", "export", "greedy", "sampled"]
