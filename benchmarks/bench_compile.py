"""Compiled training steps: tensorplay eager, ``tp.compile``, PyTorch eager, ``torch.compile`` and JAX ``jit``,
each library alone in its own fresh process.

A training step is zero-grad, forward, loss, backward and optimizer update, all inside the compiled
function where the library compiles it (``tp.compile`` and ``torch.compile`` of the whole step; ``jax.jit``
of a pure step with the parameters and optimizer state donated):

(a) MLP 784-256-256-10 (ReLU), batch 128, cross-entropy, SGD with momentum 0.9;
(b) CNN conv 16 3x3, relu, maxpool 2, conv 32 3x3, relu, maxpool 2, linear 10 on 1x28x28, batch 64,
    cross-entropy, SGD with momentum 0.9;
(c) pre-norm transformer block (d_model 64, 4 heads, seq 32, batch 16: layer norm, self-attention, GELU MLP,
    residuals), MSE loss, Adam.

``python -m benchmarks.bench_compile [--rounds N] [--threads default,1] [--cases mlp,cnn,block]
[--libraries ...]`` starts one worker process per (library, case, thread setting, round), alternating the
order of the libraries between rounds, and prints the median per library with the ratio against PyTorch
eager and against JAX jit. Compile times: the first calls of the step minus steady-state steps, in a fresh
process with an empty cache (``cold``: a fresh kernel cache for tensorplay, a fresh inductor cache for
torch.compile; JAX keeps no persistent cache by default), and, for tensorplay, in a fresh process whose
kernel cache a previous process filled (``cached``), and once numba has run an eager step in the process
(``cached, numba warm``). Weights and data come from a seeded numpy generator, identical in every process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("tensorplay", "tensorplay.compile", "torch", "torch.compile", "jax.jit")
CASES = ("mlp", "cnn", "block")
MARK = "BENCH-COMPILE "
Arrays = dict[str, np.ndarray[Any, Any]]
D, HEADS, SEQ, BATCH = 64, 4, 32, 16


# ---- data and weights (same in every process) ----------------------------------------------------------

def _init(shapes: dict[str, tuple[int, ...]], seed: int) -> Arrays:
    """PyTorch's default scales: uniform in +-1/sqrt(fan_in); layer norms start at weight 1, bias 0."""
    gen = np.random.default_rng(seed)
    out: Arrays = {}
    fan_in = 1
    for name, shape in shapes.items():
        if name.startswith("ln"):
            out[name] = (np.ones if name.endswith("weight") else np.zeros)(shape, np.float32)
            continue
        if len(shape) >= 2:
            fan_in = math.prod(shape[1:])
        bound = 1.0 / math.sqrt(fan_in)
        out[name] = gen.uniform(-bound, bound, shape).astype(np.float32)
    return out


SHAPES: dict[str, dict[str, tuple[int, ...]]] = {
    "mlp": {"0.weight": (256, 784), "0.bias": (256,), "2.weight": (256, 256), "2.bias": (256,),
            "4.weight": (10, 256), "4.bias": (10,)},
    "cnn": {"0.weight": (16, 1, 3, 3), "0.bias": (16,), "3.weight": (32, 16, 3, 3), "3.bias": (32,),
            "7.weight": (10, 32 * 5 * 5), "7.bias": (10,)},
    "block": {"ln1.weight": (D,), "ln1.bias": (D,), "attn.in_proj_weight": (3 * D, D), "attn.in_proj_bias": (3 * D,),
              "attn.out_proj.weight": (D, D), "attn.out_proj.bias": (D,), "ln2.weight": (D,), "ln2.bias": (D,),
              "fc1.weight": (4 * D, D), "fc1.bias": (4 * D,), "fc2.weight": (D, 4 * D), "fc2.bias": (D,)},
}


def data(case: str) -> tuple[Arrays, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(weights by PyTorch state_dict name, x, y)`` for a case."""
    gen = np.random.default_rng(1)
    if case == "mlp":
        return _init(SHAPES[case], 10), gen.standard_normal((128, 784)).astype(np.float32), gen.integers(0, 10, 128)
    if case == "cnn":
        return (_init(SHAPES[case], 20), gen.standard_normal((64, 1, 28, 28)).astype(np.float32),
                gen.integers(0, 10, 64))
    return (_init(SHAPES[case], 30), gen.standard_normal((BATCH, SEQ, D)).astype(np.float32),
            gen.standard_normal((BATCH, SEQ, D)).astype(np.float32))


# ---- tensorplay and PyTorch (the same module layout) -----------------------------------------------------

def _modules(nn: Any, case: str, torch_style: bool) -> Any:
    if case == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    if case == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 5 * 5, 10))

    class Block(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(D)
            self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True) if torch_style else \
                nn.MultiheadAttention(D, HEADS)
            self.ln2 = nn.LayerNorm(D)
            self.fc1 = nn.Linear(D, 4 * D)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * D, D)

        def forward(self, x: Any) -> Any:
            h = self.ln1(x)
            x = x + (self.attn(h, h, h, need_weights=False) if torch_style else
                     self.attn(h, need_weights=False))[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    return Block()


def _step(model: Any, opt: Any, loss_fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def tensorplay_step(case: str, compiled: bool) -> Callable[[], Any]:
    import tensorplay as tp
    import tensorplay.nn.functional as F
    from tensorplay import nn, optim

    weights, x_np, y_np = data(case)
    model = _modules(nn, case, torch_style=False)
    model.load_state_dict(weights)
    opt = optim.Adam(model.parameters(), lr=1e-3) if case == "block" else \
        optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = _step(model, opt, F.mse_loss if case == "block" else F.cross_entropy)
    if compiled:
        step = tp.compile(step)
    x, y = tp.tensor(x_np), tp.tensor(y_np)
    return lambda: step(x, y)


def torch_step(case: str, compiled: bool) -> Callable[[], Any]:
    import torch

    weights, x_np, y_np = data(case)
    model = _modules(torch.nn, case, torch_style=True)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3) if case == "block" else \
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    F = torch.nn.functional
    step = _step(model, opt, F.mse_loss if case == "block" else F.cross_entropy)
    if compiled:
        step = torch.compile(step)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    return lambda: step(x, y)


# ---- JAX -------------------------------------------------------------------------------------------------

def jax_step(case: str) -> Callable[[], Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    weights, x_np, y_np = data(case)

    def linear(p: Any, name: str, x: Any) -> Any:
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def cross_entropy(logits: Any, labels: Any) -> Any:
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    def mlp(p: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(linear(p, "0", x))
        return cross_entropy(linear(p, "4", jax.nn.relu(linear(p, "2", h))), y)

    def cnn(p: Any, x: Any, y: Any) -> Any:
        def conv(name: str, x: Any) -> Any:
            out = lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), "VALID",
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"))
            return out + p[name + ".bias"][None, :, None, None]

        def pool(x: Any) -> Any:
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        h = pool(jax.nn.relu(conv("3", pool(jax.nn.relu(conv("0", x))))))
        return cross_entropy(linear(p, "7", h.reshape(h.shape[0], -1)), y)

    def block(p: Any, x: Any, y: Any) -> Any:
        def norm(name: str, x: Any) -> Any:
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            return (x - mean) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

        h = norm("ln1", x)
        b, s, d = h.shape
        qkv = h @ p["attn.in_proj_weight"].T + p["attn.in_proj_bias"]
        q, k, v = (t.reshape(b, s, HEADS, d // HEADS).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
        probs = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // HEADS), axis=-1)
        x = x + linear(p, "attn.out_proj", (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, d))
        out = x + linear(p, "fc2", jax.nn.gelu(linear(p, "fc1", norm("ln2", x)), approximate=False))
        return jnp.mean((out - y) ** 2)

    loss = {"mlp": mlp, "cnn": cnn, "block": block}[case]
    params = {k: jnp.asarray(v) for k, v in weights.items()}
    if case == "block":  # PyTorch's Adam
        state: Any = {"m": jax.tree.map(jnp.zeros_like, params), "v": jax.tree.map(jnp.zeros_like, params),
                      "t": jnp.zeros((), jnp.float32)}

        def update(p: Any, g: Any, s: Any) -> Any:
            t = s["t"] + 1
            m = jax.tree.map(lambda m_, g_: 0.9 * m_ + 0.1 * g_, s["m"], g)
            v = jax.tree.map(lambda v_, g_: 0.999 * v_ + 0.001 * g_ * g_, s["v"], g)
            c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
            new = jax.tree.map(lambda p_, m_, v_: p_ - 1e-3 * (m_ / c1) / (jnp.sqrt(v_ / c2) + 1e-8), p, m, v)
            return new, {"m": m, "v": v, "t": t}
    else:  # PyTorch's SGD with momentum (the buffer starts as the first gradient)
        state = {"buf": jax.tree.map(jnp.zeros_like, params), "started": jnp.zeros((), jnp.bool_)}

        def update(p: Any, g: Any, s: Any) -> Any:
            buf = jax.tree.map(lambda b, g_: jnp.where(s["started"], 0.9 * b + g_, g_), s["buf"], g)
            return jax.tree.map(lambda p_, b: p_ - 0.01 * b, p, buf), {"buf": buf, "started": jnp.ones((), jnp.bool_)}

    def step(p: Any, s: Any, x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(p, x, y)
        p, s = update(p, grads, s)
        return p, s, value

    jitted = jax.jit(step, donate_argnums=(0, 1))
    holder = {"p": params, "s": state}
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)

    def run() -> Any:
        holder["p"], holder["s"], value = jitted(holder["p"], holder["s"], x, y)
        return jax.block_until_ready(value)

    return run


# ---- one worker ------------------------------------------------------------------------------------------

def _builder(library: str, case: str) -> Callable[[], Any]:
    if library == "jax.jit":
        return jax_step(case)
    if library.startswith("torch"):
        return torch_step(case, library == "torch.compile")
    return tensorplay_step(case, library == "tensorplay.compile")


def _steady(fn: Callable[[], Any], repeat: int, min_time: float, clock: Callable[[], float]) -> float:
    number = 1
    while True:
        start = clock()
        for _ in range(number):
            fn()
        if clock() - start >= min_time or number >= 1 << 14:
            break
        number *= 2
    samples = []
    for _ in range(repeat):
        start = clock()
        for _ in range(number):
            fn()
        samples.append((clock() - start) / number)
    return statistics.median(samples)


def worker(library: str, case: str, threads: str, warm_numba: bool, clock_name: str = "wall") -> dict[str, Any]:
    """Build, time the first calls (capture and compile) and then the steady step."""
    if threads != "default" and library.startswith("torch"):
        import torch
        torch.set_num_threads(int(threads))
    if warm_numba:  # an eager tensorplay step first: numba and the eager kernels are loaded
        tensorplay_step(case, compiled=False)()
    started = time.perf_counter()
    fn = _builder(library, case)
    build = time.perf_counter() - started
    first = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        first.append(time.perf_counter() - start)
    clock = time.perf_counter if clock_name == "wall" else time.process_time
    step = _steady(fn, repeat=7, min_time=0.2, clock=clock)
    compile_seconds = max(0.0, sum(first) - 3 * step)
    info: dict[str, Any] = {"step": step, "first_calls": first, "compile": compile_seconds, "build": build}
    if library == "tensorplay.compile":
        import tensorplay as tp  # noqa: F401
    return info


def worker_env(threads: str, library: str, cache_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if threads != "default":
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
                     "TP_NUM_THREADS"):
            env[name] = threads
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    if cache_dir is not None:
        env["TP_COMPILE_CACHE_DIR"] = cache_dir
        env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    return env


def run_worker(library: str, case: str, threads: str, cache_dir: str | None,
               warm_numba: bool = False, clock: str = "wall") -> dict[str, Any] | None:
    """One fresh process; its result, or ``None`` (printed) when it failed."""
    args = [sys.executable, "-m", "benchmarks.bench_compile", "--worker", library, case, "--threads", threads,
            "--clock", clock]
    if warm_numba:
        args.append("--warm-numba")
    done = subprocess.run(args, env=worker_env(threads, library, cache_dir), capture_output=True, text=True,
                          cwd=str(ROOT))
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            result: dict[str, Any] = json.loads(line[len(MARK):])
            return result
    print(f"  ({library} {case} threads={threads} failed: {done.stderr.strip().splitlines()[-1:]})")
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_compile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("LIBRARY", "CASE"))
    parser.add_argument("--threads", default="default,1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--warm-numba", action="store_true")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="steady steps timed by the wall clock (what a user waits; the default) or by the "
                             "process's CPU time (all its threads: a robust proxy on a loaded machine at one thread)")
    args = parser.parse_args(argv)
    if args.worker:
        library, case = args.worker
        print(MARK + json.dumps(worker(library, case, args.threads, args.warm_numba, args.clock)), flush=True)
        return 0
    libraries = [lib for lib in args.libraries.split(",") if lib]
    cases = [c for c in args.cases.split(",") if c]
    print(f"each library in its own fresh process; {args.rounds} rounds, alternating order; median per library; "
          f"{args.clock} clock for the steady steps, wall clock for compile times")
    print(f"malloc/openblas env: {({k: v for k, v in os.environ.items() if k.startswith(('MALLOC_', 'OPENBLAS'))}) or 'defaults'}")
    for threads in args.threads.split(","):
        print(f"\n== threads: {threads}")
        for case in cases:
            steps: dict[str, list[float]] = {lib: [] for lib in libraries}
            compiles: dict[str, list[float]] = {lib: [] for lib in libraries}
            for r in range(args.rounds):
                order = libraries if r % 2 == 0 else list(reversed(libraries))
                for lib in order:
                    with tempfile.TemporaryDirectory(prefix="bench-compile-") as cache:
                        result = run_worker(lib, case, threads, cache, clock=args.clock)
                    if result is not None:
                        steps[lib].append(result["step"])
                        compiles[lib].append(result["compile"])
            med = {lib: statistics.median(v) for lib, v in steps.items() if v}
            base, jax_time = med.get("torch"), med.get("jax.jit")
            print(f"{case}:")
            for lib, seconds in med.items():
                ratios = []
                if base:
                    ratios.append(f"{seconds / base:.2f}x torch eager")
                if jax_time:
                    ratios.append(f"{seconds / jax_time:.2f}x jax.jit")
                cold = statistics.median(compiles[lib]) if compiles[lib] else float("nan")
                compile_text = f"  compile (cold) {cold:.2f} s" if lib.endswith(("compile", "jit")) else ""
                print(f"  {lib:<20} {seconds * 1e3:8.3f} ms  ({', '.join(ratios)}){compile_text}")
            if "tensorplay.compile" in libraries:
                with tempfile.TemporaryDirectory(prefix="bench-compile-") as cache:
                    run_worker("tensorplay.compile", case, threads, cache)  # fills the kernel cache
                    cached = [run_worker("tensorplay.compile", case, threads, cache) for _ in range(args.rounds)]
                    warm = [run_worker("tensorplay.compile", case, threads, cache, warm_numba=True)
                            for _ in range(args.rounds)]
                cached_t = statistics.median(c["compile"] for c in cached if c)
                warm_t = statistics.median(c["compile"] for c in warm if c)
                print(f"  tensorplay.compile compile from the kernel cache: {cached_t:.2f} s (fresh process), "
                      f"{warm_t:.2f} s (numba already loaded by an eager step)")
    return 0


def run() -> list[tuple[str, dict[str, float]]]:
    """For ``python -m benchmarks compile``: the table is printed by :func:`main` (one process per library)."""
    main(["--rounds", "1"])
    return []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
