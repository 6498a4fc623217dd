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


def _covered_by_enumeration(mask, triples):
    """For each triple: is any shift of any permutation of it in the train set (straight from the definition)."""
    from itertools import permutations

    out = []
    for t in triples:
        out.append(any(mask[tuple((np.array(q) + s) % 24)] for q in permutations(t) for s in range(24)))
    return np.array(out)


def test_heldout_covered_counts_held_out_triples_with_a_trained_orbit_mate():
    from pipeline.orbits.task import heldout_covered, random_split_covered

    assert heldout_covered(split_mask(0.33, seed=4)) == 0.0  # the orbit split: no held-out triple is covered
    rng = np.random.default_rng(0)
    for f in (0.004, 0.01):
        m = split_mask(f, seed=2, kind="random")
        held = np.argwhere(~m)
        sample = held[rng.choice(len(held), 300, replace=False)]
        by_hand = _covered_by_enumeration(m, sample).mean()
        share = heldout_covered(m)
        assert abs(share - by_hand) < 4 * np.sqrt(share * (1 - share) / 300) + 1e-9, (f, share, by_hand)
        # the expectation over random splits, against the mean of 12 drawn splits
        drawn = np.mean([heldout_covered(split_mask(f, seed=s, kind="random")) for s in range(12)])
        assert abs(drawn - random_split_covered(f)) < 0.04
    assert random_split_covered(0.05) > 0.99 and random_split_covered(0.0) == 0.0
