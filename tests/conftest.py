"""Test-session settings."""

from tensorplay.interpreters.eager.kernels import payoff

# The check that drops the second thread when it does not pay off (payoff.py) times the machine and
# may change its verdict in the middle of a test that asserts which GEMMs get threads; its own tests
# (test_thread_payoff.py) turn it on with a fake clock.
payoff.set_enabled(False)
