"""The demo's first eager training step on a fresh install: ``python -m benchmarks.first_step``.

Each round runs a fresh process with empty kernel caches (``NUMBA_CACHE_DIR`` and ``TP_COMPILE_CACHE_DIR``
pointed at a new temporary directory, so nothing compiled by an earlier run is reused), which builds the
demo's CNN (:class:`tensorplay.demo.model.DigitsCNN`, AdamW) and times its first training step on a batch of
32 float32 images (synthetic: the kernels do not depend on the values), then its second. Printed per round:
the first step (wall and CPU seconds: it includes importing numba and starting its CPU target), the second
step, and which numba dispatchers compiled which signatures (``numba.core.event``: each compilation's time
with and without the compilations it started, and its LLVM part). Options:

``--rounds N``      fresh processes (default 1);
``--precompile``    run ``python -m tensorplay.precompile --only demo`` into the empty caches first (what a
                    user who runs it after installing gets);
``--baseline DIR``  also run tensorplay from another checkout DIR, alternating with this one;
``--top K``         list the K slowest compilations of each round (default 12).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

_CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import tensorplay as tp
from tensorplay.demo.train import TrainConfig, make_model, make_optimizer, sample_batch, train_step
import_seconds = time.perf_counter() - t0
config = TrainConfig()
model = make_model(config)
opt = make_optimizer(model, config)
x, y = sample_batch(config)
records = []
stack = []
llvm = [0.0]

def listen():
    from numba.core import event

    class Listener(event.Listener):
        def on_start(self, ev):
            if ev.kind == "numba:compile":
                stack.append([time.perf_counter(), 0.0, 0.0])
            else:
                llvm[0] = time.perf_counter()

        def on_end(self, ev):
            now = time.perf_counter()
            if ev.kind == "numba:llvm_lock":
                if stack:
                    stack[-1][2] += now - llvm[0]
                return
            start, children, in_llvm = stack.pop()
            total = now - start
            if stack:
                stack[-1][1] += total
            py = getattr(ev.data["dispatcher"], "py_func", None)
            name = (getattr(py, "__module__", "?").rsplit(".", 1)[-1] + "." + getattr(py, "__qualname__", "?"))
            records.append({"name": name, "args": str(ev.data.get("args")), "total": total,
                            "self": total - children, "llvm": in_llvm, "depth": len(stack)})

    listener = Listener()
    event.register("numba:compile", listener)
    event.register("numba:llvm_lock", listener)

start, cpu = time.perf_counter(), time.process_time()
import numba  # imported by the step's first kernel anyway; timed with the step
from numba.core import event  # noqa: F401
listen()
train_step(model, opt, x, y)
first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
start = time.perf_counter()
train_step(model, opt, x, y)
second = time.perf_counter() - start
print(json.dumps({"import": import_seconds, "first": first, "first_cpu": first_cpu, "second": second,
                  "compiles": records}))
'''


def one_round(root: str, precompile: bool) -> dict[str, Any]:
    """One fresh process on empty caches, importing tensorplay from ``root``; its measurements."""
    caches = tempfile.mkdtemp(prefix="first-step-")
    try:
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(caches, "numba"),
                   TP_COMPILE_CACHE_DIR=os.path.join(caches, "tensorplay"),
                   PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        if precompile:
            subprocess.run([sys.executable, "-m", "tensorplay.precompile", "--only", "demo"], cwd=root, env=env,
                           check=True, capture_output=True)
        done = subprocess.run([sys.executable, "-c", _CHILD], cwd=root, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        shutil.rmtree(caches, ignore_errors=True)


def report(label: str, r: dict[str, Any], top: int) -> None:
    """Print one round."""
    outer = [c for c in r["compiles"] if c["depth"] == 0]
    print(f"{label}: first step {r['first']:.2f} s wall ({r['first_cpu']:.2f} s CPU, numba's import and start "
          f"included), second {1e3 * r['second']:.1f} ms; {len(r['compiles'])} signatures compiled "
          f"({len(outer)} called from Python) in {sum(c['total'] for c in outer):.2f} s, LLVM "
          f"{sum(c['llvm'] for c in r['compiles']):.2f} s")
    if top:
        print(f"    {'total':>6} {'self':>6} {'llvm':>6}  dispatcher (signature)")
        for c in sorted(r["compiles"], key=lambda c: -c["self"])[:top]:
            print(f"    {c['total']:6.2f} {c['self']:6.2f} {c['llvm']:6.2f}  {'  ' * c['depth']}{c['name']} "
                  f"{c['args'][:90]}")


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_step")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--precompile", action="store_true")
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = [("tensorplay", here)] + ([("baseline", os.path.abspath(args.baseline))] if args.baseline else [])
    firsts: dict[str, list[float]] = {label: [] for label, _ in roots}
    for k in range(args.rounds):
        for label, root in (roots if k % 2 == 0 else roots[::-1]):
            result = one_round(root, args.precompile)
            firsts[label].append(result["first"])
            report(f"round {k + 1} {label}", result, args.top)
    for label, values in firsts.items():
        print(f"{label}: first step median {statistics.median(values):.2f} s over {len(values)} rounds "
              f"(min {min(values):.2f}, max {max(values):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
