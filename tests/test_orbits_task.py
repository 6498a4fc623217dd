"""The task's targets and its splits."""

import numpy as np
import pytest

from pipeline.orbits.task import all_triples, orbit_labels, split_mask, targets


def test_targets_are_the_sum_of_the_other_two_tokens():
    t = targets()
    assert t[3, 5, 22] == (5 + 22) % 24 and t[0, 23, 23] == 22 and t.shape == (24, 24, 24)


def test_orbit_labels_are_invariant_under_shifts_and_permutations():
    ids = orbit_labels()
    x = all_triples()
    for s in (1, 7):
        y = (x + s) % 24
        assert np.array_equal(ids[tuple(x.T)], ids[tuple(y.T)])
    assert np.array_equal(ids, ids.transpose(1, 0, 2)) and np.array_equal(ids, ids.transpose(0, 2, 1))
    # every orbit is one shift-class of multisets: sizes divide 24 * 6
    assert (144 % np.bincount(ids.ravel()) == 0).all()


@pytest.mark.parametrize("frac", [0.2, 0.5])
def test_orbit_split_is_closed_and_has_the_requested_size(frac):
    m = split_mask(frac, seed=1)
    assert abs(m.mean() - frac) < 0.02
    ids = orbit_labels()
    for i in np.unique(ids):  # every orbit is wholly on one side
        assert m[ids == i].all() or not m[ids == i].any()


def test_bad_fraction_and_kind_are_refused():
    with pytest.raises(ValueError, match="strictly between"):
        split_mask(1.0, 0)
    with pytest.raises(ValueError, match="'orbit' or 'random'"):
        split_mask(0.5, 0, kind="nope")
