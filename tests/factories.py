"""Synthetic values and stores the store tests share: random layer values and a model written through the Store."""

from __future__ import annotations

import numpy as np

from pipeline import store as st


def random_layer(rng: np.random.Generator, n_heads: int, rotary: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One layer's (profile, norm): points of the simplex (Dirichlet) and norms in [1, 2); (H, 4) and (H,), or
    (H, 129, 4) and (H, 129) for a rotary layer."""
    p = rng.dirichlet(np.ones(4), size=(n_heads, st.N_OFFSETS) if rotary else n_heads)
    return p, rng.uniform(1, 2, size=p.shape[:-1])


def random_layers(rng: np.random.Generator, n_layers: int, n_heads: int, rotary: bool = False) -> list:
    """``n_layers`` layers of :func:`random_layer`, drawn in order from ``rng``."""
    return [random_layer(rng, n_heads, rotary) for _ in range(n_layers)]


def write_model(path, row: st.ModelRow, values: list, layers=None, complete: bool = True,
                revision: str | None = None) -> None:
    """Register ``row``, write ``values[layer]`` for each of ``layers`` (default: all) with a fresh handle each, as
    separate runs would, and mark the model complete (with ``revision`` when given) if ``complete``."""
    st.Store.open(path).register(row)
    for layer in range(len(values)) if layers is None else layers:
        st.Store.open(path).write_layer(row.name, layer, *values[layer])
    if complete:
        st.Store.open(path).mark_complete(row.name, revision=revision)


def narrow_chunks(path) -> list[str]:
    """Rewrite the per-model variables and the ``model`` coordinate of the store at ``path`` with a chunk per row, as
    an earlier version wrote them (dtype, fill, dimensions and values kept), by plain zarr; returns their names."""
    import zarr

    g = zarr.open_group(str(path), path="profiles", mode="r+", zarr_format=3)
    names = sorted(name for name, a in g.arrays() if a.metadata.dimension_names == ("model",))
    for name in names:
        a = g[name]
        values, dtype, fill = a[:], a.dtype, a.metadata.fill_value
        del g[name]
        b = g.create_array(name, shape=values.shape, chunks=(1,), dtype=dtype, fill_value=fill,
                           dimension_names=["model"])
        b[:] = values
    st.Store(str(path), "a").journal.consolidate()
    return names
