"""``python -m benchmarks [MODULE ...] [options]``: every comparison, each library alone in its own
fresh process, at default threads and at one thread each.

Modules: ``training`` (three training steps), ``kernels`` (compute kernels), ``dispatch`` (per-op cost
of small tensor operations), ``memory`` (peak resident memory of training), ``func`` (function
transforms) compare tensorplay with PyTorch (and JAX where installed); ``compile`` compares
``tp.compile``'s training steps with PyTorch eager, ``torch.compile`` and JAX ``jit`` (and reports
compile times); ``onnx`` compares ONNX Runtime on exported models with tensorplay eager and compiled
(inference latency); ``graph`` and ``shapecheck``
time tensorplay alone. With no module named, all run. Options:

``--threads default,1``  the thread settings to run (see :mod:`benchmarks.isolated`);
``--rounds N``           fresh processes per library and case (order alternates; median reported);
``--libraries a,b``      restrict the libraries (default: tensorplay and every one installed);
``--per-case``           one process per case even for modules that group their cases;
``--quiet-wait S``       before each worker, wait up to S seconds for other processes to go quiet
                         (below 0.3 busy cores; default 0: no wait); the load seen is printed;
``--clock cpu``          time CPU seconds of each worker process (all its threads) instead of wall
                         time: a robust proxy on a loaded machine at one thread, not what a user
                         waits; the wall clock is the default and the figure to quote;
``--only TEXT``          only the cases whose name contains TEXT (case-insensitive; ``|`` separates
                         alternatives);
``--baseline DIR``       one more column, ``tensorplay@baseline``: tensorplay imported from another
                         checkout DIR (e.g. ``git worktree add DIR main``; the current ``benchmarks``
                         folder is copied into it), measured in alternation with the others: a
                         before/after comparison that a change of load hits alike;
``--in-process``         the old mode, all libraries in this one process, interleaved: labelled as
                         such, since libraries sharing a process fight over the cores. Never quote it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from typing import Any

from benchmarks.isolated import (THREAD_SETTINGS, add_baseline, available, default_libraries, describe_info,
                                 format_table, geometric_mean_ratio, malloc_settings, measure_module, worker_env)

COMPARISONS = ("training", "kernels", "dispatch", "memory", "func", "compile", "onnx")
ALONE = ("graph", "shapecheck")
MODULES = COMPARISONS + ALONE


def _in_process(name: str, threads: str) -> int:
    """Run a module's cases (or its ``run()``) in this process and print a labelled table."""
    from benchmarks.timing import environment, interleaved, table

    module: Any = importlib.import_module(f"benchmarks.bench_{name}")
    print(environment())
    if hasattr(module, "cases"):
        print(f"\n== {name} [IN-PROCESS: every library in one process, sharing its cores and thread pools; "
              "not what a user gets, do not quote]")
        rows = []
        for case in module.cases():
            fns = {lib: build() for lib, build in case.builders.items()}
            if case.metrics:
                results = {lib: fn() for lib, fn in fns.items()}
                for key in next(iter(results.values())):
                    rows.append((f"{case.name}: {key}", {lib: r[key] for lib, r in results.items()}))
                continue
            rows.append((case.name, {lib: s / case.per_call for lib, s in interleaved(fns).items()}))
        print(table(rows, "torch"))
    else:
        print(f"\n== {name} (tensorplay alone, threads={threads})")
        rows = module.run()
        print(table(rows, next(iter(rows[0][1])) if rows else ""))
    return 0


def _alone(name: str, threads: str) -> None:
    """A tensorplay-only module, in one fresh process with the thread setting."""
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--in-process", name, "--threads", threads],
                          env=worker_env(threads),
                          capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if not ln.startswith(("malloc/", "threadpool"))]
    print("\n".join(lines) + (f"\n(failed: {done.stderr.strip().splitlines()[-1:]})" if done.returncode else ""))


def main(argv: list[str]) -> int:
    """Parse the options and print one table per module and thread setting."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(MODULES))
    parser.add_argument("--threads", default=",".join(THREAD_SETTINGS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--libraries", default=None)
    parser.add_argument("--per-case", action="store_true")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--min-time", type=float, default=None)
    parser.add_argument("--quiet-wait", type=float, default=0.0)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--only", default=None)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args(argv)
    selected = args.modules or list(MODULES)
    unknown = [m for m in selected if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose from {', '.join(MODULES)}")
    settings = [t.strip() for t in args.threads.split(",") if t.strip()]
    if args.in_process:
        for name in selected:
            _in_process(name, settings[0])
        return 0
    libraries = args.libraries.split(",") if args.libraries else default_libraries()
    if args.baseline:
        libraries.insert(1, add_baseline(args.baseline))
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cpus; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(malloc_settings())
    print(f"each library alone in a fresh process; {args.rounds} rounds, library order alternating; "
          f"median per library over rounds (± is the min-max spread over rounds); tp/other is the ratio of "
          f"the medians, then the range of each round's own ratio (a round's processes run one after another)")
    for name in selected:
        module: Any = importlib.import_module(f"benchmarks.bench_{name}")
        for threads in settings:
            label = "default threads" if threads == "default" else f"{threads} thread(s) each"
            if not hasattr(module, "cases"):
                print(f"\n== {name} [{label}]")
                _alone(name, threads)
                continue
            cases = module.cases()
            module_libraries = libraries
            if not args.libraries and hasattr(module, "LIBRARIES"):  # columns of its own (``torch.compile``)
                module_libraries = [lib for lib in module.LIBRARIES
                                    if lib == "tensorplay" or available(lib.split(".")[0])]
            if args.only:
                wanted = [w.lower() for w in args.only.split("|")]
                keep = [i for i, c in enumerate(cases) if any(w in c.name.lower() for w in wanted)]
            else:
                keep = list(range(len(cases)))
            m = measure_module(name, cases, module_libraries, keep, threads, args.rounds, args.per_case,
                               args.repeat, args.min_time, quiet_wait=args.quiet_wait, clock=args.clock)
            print(f"\n== {name} [{label}{', CPU time' if args.clock == 'cpu' else ''}]")
            print(format_table(m, module_libraries, getattr(module, "UNIT", "s")))
            for other in ("torch", "jax"):
                gm = geometric_mean_ratio(m, other)
                if gm is not None and len(m.order) > 3 and getattr(module, "UNIT", "s") == "s" \
                        and getattr(module, "GEOMETRIC_MEAN", True):
                    print(f"geometric mean tensorplay/{other}: {gm:.2f}x")
            print(describe_info(m))
            for error in m.errors:
                print(f"  ERROR {error}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
