"""``python -m tensorplay.demo``: train the typed CNN on the 8x8 digits and report test accuracy.

After training, every function in ``POST_TRAINING_STEPS`` runs with the trained model, the data
and the training result: the place where later steps plug in (compile the model, export it,
reload it, check that its predictions match :func:`tensorplay.demo.train.predict`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from tensorplay.demo.compiled import compiled_step
from tensorplay.demo.data import Digits, load_digits_data
from tensorplay.demo.exported import export_step
from tensorplay.demo.train import TrainConfig, TrainResult, fit

PostTrainingStep = Callable[[TrainResult, Digits], None]
"""``step(result, data)``: runs after training (``result.model`` is the trained model)."""

POST_TRAINING_STEPS: list[PostTrainingStep] = [export_step, compiled_step]
"""Steps run after training, in order: export the model with a dynamic batch dim, save it, reload it in a fresh
process and check its predictions (:mod:`tensorplay.demo.exported`); train with the step compiled by
``tp.compile`` and report its compile and step times against eager (:mod:`tensorplay.demo.compiled`)."""


def register_post_training_step(step: PostTrainingStep) -> PostTrainingStep:
    """Add ``step`` to :data:`POST_TRAINING_STEPS` (usable as a decorator)."""
    POST_TRAINING_STEPS.append(step)
    return step


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="python -m tensorplay.demo",
                                     description="Train the typed CNN on scikit-learn's 8x8 digits and report "
                                                 "the test accuracy after each epoch.")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--limit", type=int, default=None, help="use only this many images (quick runs)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel training over MPI: mpiexec -n 2 python -m tensorplay.demo --distributed "
                             "(prints each rank's throughput and rank 0's final accuracy; skips the post-training "
                             "steps)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> TrainResult:
    """Train, report, then run the post-training steps; returns the training result."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    start = time.perf_counter()
    data = load_digits_data(seed=config.seed, limit=args.limit)
    if args.distributed:
        from tensorplay.demo.distributed import report
        return report(config, data)
    print(f"digits: {len(data.y_train)} training and {len(data.y_test)} test images of 8x8 pixels, "
          f"{data.num_classes} classes")
    result = fit(config, data, progress=not args.no_progress)
    print(f"final test accuracy {100 * result.final_accuracy:.2f}% after {config.epochs} epochs; "
          f"training took {result.seconds:.1f} s ({time.perf_counter() - start:.1f} s in all)")
    for step in POST_TRAINING_STEPS:
        step(result, data)
    return result


if __name__ == "__main__":
    main()
