"""``mpiexec -n N python -m tensorplay.demo --distributed``: the demo's training, data-parallel over MPI.

Every rank builds the same model (``DistributedDataParallel`` copies rank 0's weights), trains on its own
share of each epoch's images (``DistributedSampler``, reshuffled per epoch with a shared seed) with the
configured batch size per rank (the effective batch is ``batch_size * world_size``), and the gradients are
averaged after each backward, so every rank holds the same weights throughout. Rank 0 evaluates and prints;
at the end it prints every rank's throughput. Started without ``mpiexec`` it is a world of one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import distributed as dist
from tensorplay.demo.data import Digits
from tensorplay.demo.train import EpochStats, TrainConfig, TrainResult, evaluate, make_model, make_optimizer


@dataclass(frozen=True)
class RankThroughput:
    """One rank's training work: images it trained on and seconds spent in its training steps (from the
    second epoch on when there are several: the first includes compiling kernels)."""

    rank: int
    images: int
    seconds: float

    @property
    def images_per_second(self) -> float:
        """Training throughput of that rank."""
        return self.images / self.seconds if self.seconds > 0 else float("nan")


def fit_distributed(config: TrainConfig, data: Digits,
                    log: Callable[[str], None] | None = print) -> tuple[TrainResult, list[RankThroughput]]:
    """Train as :func:`tensorplay.demo.train.fit` does, on every rank of the MPI world (see the module
    docstring); ``log`` (rank 0 only) receives one line per epoch. Returns the result (the same weights on
    every rank) and every rank's throughput."""
    world = dist.init()
    model = make_model(config)
    ddp = dist.DistributedDataParallel(model)
    tp.manual_seed(config.seed + 1 + world.rank)  # dropout: each rank its own masks
    opt = make_optimizer(ddp, config)
    result = TrainResult(model=model, optimizer=opt)
    sampler = dist.DistributedSampler(len(data.y_train), seed=config.seed)
    images, busy = 0, 0.0
    start = time.perf_counter()
    for epoch in range(1, config.epochs + 1):
        if epoch == 2:  # throughput from the second epoch on: the first includes compiling the kernels
            images, busy = 0, 0.0
        sampler.set_epoch(epoch)
        mine = sampler.indices()
        model.train()
        epoch_start = time.perf_counter()
        losses = []
        for lo in range(0, len(mine), config.batch_size):
            index = mine[lo:lo + config.batch_size]
            x, y = np.ascontiguousarray(data.x_train[index]), data.y_train[index]
            step_start = time.perf_counter()
            opt.zero_grad()
            loss = F.cross_entropy(ddp(tp.tensor(x)), tp.tensor(y))
            loss.backward()
            opt.step()
            busy += time.perf_counter() - step_start
            images += len(index)
            losses.append(float(loss.item()))
        result.batch_losses.extend(losses)
        mean_loss = float(dist.all_reduce(np.array([np.mean(losses)]), op="mean")[0])
        if world.rank == 0:
            test_loss, accuracy = evaluate(model, data.x_test, data.y_test)
        else:
            test_loss, accuracy = float("nan"), float("nan")
        stats = EpochStats(epoch, mean_loss, test_loss, accuracy, time.perf_counter() - epoch_start)
        result.history.append(stats)
        if log is not None and world.rank == 0:
            log(f"epoch {epoch:2d}/{config.epochs}  train loss {stats.train_loss:.4f}  "
                f"test loss {stats.test_loss:.4f}  test accuracy {100 * stats.test_accuracy:5.2f}%  "
                f"({stats.seconds:.2f} s)")
    result.seconds = time.perf_counter() - start
    rows = dist.all_gather(np.array([images, busy], dtype=np.float64))
    throughput = [RankThroughput(r, int(row[0]), float(row[1])) for r, row in enumerate(rows)]
    return result, throughput


def report(config: TrainConfig, data: Digits, log: Callable[[str], None] = print) -> TrainResult:
    """Train with :func:`fit_distributed` and print (on rank 0) every rank's throughput and the final
    test accuracy."""
    result, throughput = fit_distributed(config, data, log=log)
    if dist.rank() == 0:
        n = dist.world_size()
        log(f"data parallel over {n} process{'es' if n > 1 else ''} (MPI), batch {config.batch_size} per rank")
        for t in throughput:
            log(f"rank {t.rank}: {t.images_per_second:.0f} images/s ({t.images} images in {t.seconds:.2f} s of "
                f"training steps{', epochs 2 on' if config.epochs > 1 else ''})")
        log(f"final test accuracy {100 * result.final_accuracy:.2f}% after {config.epochs} epochs (rank 0); "
            f"training took {result.seconds:.1f} s")
    return result


__all__ = ["RankThroughput", "fit_distributed", "report"]
