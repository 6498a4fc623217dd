"""The sequences: the second half repeats the first, drawn from the seed alone."""

import torch

from pipeline.induction import data


def test_the_second_half_repeats_the_first():
    x = data.repeated(data.generator(3, "train"), 50, 11, 64)
    assert x.shape == (50, 22) and x.dtype == torch.int64
    assert torch.equal(x[:, 11:], x[:, :11])
    assert int(x.min()) >= 0 and int(x.max()) < 64
    assert len(torch.unique(x)) == 64  # 550 uniform draws reach every token id


def test_the_draws_come_from_the_seed_and_the_stream_alone():
    def draw(seed, stream):
        gen = data.generator(seed, stream)
        return [data.repeated(gen, 4, data.half_length(gen, 8, 24), 64) for _ in range(5)]

    first, again = draw(7, "train"), draw(7, "train")
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    for other in (draw(8, "train"), draw(7, "init")):
        assert not torch.equal(first[0], other[0])
    assert torch.equal(data.eval_batch(16, 16, 64), data.eval_batch(16, 16, 64))


def test_a_batch_half_length_covers_its_range():
    gen = data.generator(0, "train")
    seen = {data.half_length(gen, 8, 24) for _ in range(400)}
    assert seen == set(range(8, 25))
