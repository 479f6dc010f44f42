"""The training demo: a typed CNN on scikit-learn's 8x8 digits (``python -m tensorplay.demo``).

* :mod:`tensorplay.demo.data` loads and splits the data set (no download);
* :mod:`tensorplay.demo.model` is the model, annotated with its dims;
* :mod:`tensorplay.demo.train` has the training step, the epoch loop and evaluation;
* :mod:`tensorplay.demo.__main__` is the command line, with a list of post-training steps
  (``POST_TRAINING_STEPS``) where compile/export/reload checks plug in.
"""

from tensorplay.demo.data import Digits, load_digits_data
from tensorplay.demo.model import DigitsCNN
from tensorplay.demo.train import EpochStats, TrainConfig, TrainResult, evaluate, fit, predict, train_step

__all__ = ["Digits", "load_digits_data", "DigitsCNN", "TrainConfig", "TrainResult", "EpochStats", "fit",
           "evaluate", "predict", "train_step"]
