"""Which steps are kept: log-spaced steps, and every fall of the lowest repeated-half loss by loss_step."""

import numpy as np

from pipeline.induction.schedule import Keeper, log_steps


def test_log_steps_span_the_run_evenly_in_log_step():
    steps = sorted(log_steps(2000, 40))
    assert steps[:3] == [0, 1, 2] and steps[-1] == 2000 and len(steps) <= 41
    late = np.array([s for s in steps if s >= 50])  # past the rounding of the early steps
    ratios = late[1:] / late[:-1]
    assert np.allclose(ratios, 2000 ** (1 / 39), rtol=0.05)
    assert log_steps(10, 0) == {0, 10}


def kept(curve, loss_step, count=0):
    keeper = Keeper(len(curve) - 1, count, loss_step)
    return {step: why for step, loss in enumerate(curve) if (why := keeper.reasons(step, loss))}


def test_the_loss_rule_keeps_falls_of_the_lowest_loss_not_noise():
    # noise around 3 (one dip to 2.875, less than a loss_step below 3), then a fall of 1/16 a step from 3 to 1,
    # then noise again around 1; values exact in binary
    noise = [3.0, 3.125, 2.875, 3.125, 3.0, 3.25, 3.0]
    fall = [3.0 - k / 16 for k in range(1, 33)]  # steps 7 .. 38, down to 1.0
    tail = [1.125, 1.0, 1.25, 1.0625, 1.125]
    found = kept(noise + fall + tail, loss_step=0.25)
    # step 0 and the last by the log rule; then the loss rule against 3.0 (kept at step 0): the lowest loss is
    # 2.875 from step 2, and first reaches 3 - 0.25 k at step 7 + 4 k - 1
    assert found == {0: ["log"], **{6 + 4 * k: ["loss"] for k in range(1, 9)}, 43: ["log"]}


def test_a_step_both_rules_keep_names_both():
    found = kept([3.0, 2.0, 1.0], loss_step=0.5, count=3)
    assert found == {0: ["log"], 1: ["log", "loss"], 2: ["log", "loss"]}
