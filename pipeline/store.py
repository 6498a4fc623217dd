"""The Zarr store: the one data contract between the pipeline and the dashboard.

Light on purpose (numpy, xarray, zarr only): the dashboard imports this module and must never pull
in torch. See DESIGN.md, "The store contract", for the names users rely on.

Layout of ``profiles`` (chunks in brackets)::

    profile    (model, layer, head, d, coordinate) float64   [1, 1, H0, 129, 4]   NaN = no such head / not written
    norm       (model, layer, head, d)             float64   [1, 1, H0, 129]
    layer_done (model, layer)                      bool      [1, 1]   written together with the layer's values
    n_layers, n_heads, n_kv_heads, d_model, d_head, rotary_dim        (model) int32
    positional, source, revision, family, command                     (model) variable-length str
    complete, layernorm_folded                                        (model) bool

Writes follow template -> regions -> metadata. A model row is registered first (its metadata, data all
NaN), then every (model, layer) region is written independently (one process per layer is safe: no
two layers share a chunk), and ``complete`` is set only after every layer is written. Registering a
model larger than the store grows the layer/head dimensions in place (a metadata-only resize); nothing
already written is rewritten or lost. The root carries consolidated metadata, refreshed after every
structural change, so ``xr.open_zarr(path, group="profiles")`` opens quickly and without warnings.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import xarray as xr
import zarr

SCHEMA_VERSION = 1
PROFILES = "profiles"
ORBITS = "orbits"
N_OFFSETS = 129
COORDINATES = ("a", "b", "c", "d")
POSITIONAL_KINDS = ("learned absolute", "alibi", "rope", "none")

INT_FIELDS = ("n_layers", "n_heads", "n_kv_heads", "d_model", "d_head", "rotary_dim")
STR_FIELDS = ("positional", "source", "revision", "family", "command")
BOOL_FIELDS = ("complete", "layernorm_folded")

PROFILE_ATTRS = {
    "schema_version": SCHEMA_VERSION,
    "bilinear_form": "L = W_K^T W_Q, torch Linear layout (q = W_Q x, k = W_K x); raw checkpoint weights, "
    "biases ignored",
    "score": "score(query position i, key position j) = scale * x_j^T L(i - j) x_i (+ bias terms)",
    "offset": "d = query position - key position; rotary models: L(d) = W_K^T R(d) W_Q; "
    "position-independent models repeat their value at every d",
    "layernorm_folding": "per model in variable layernorm_folded: false = raw weights (the default), "
    "true = L -> diag(g) L diag(g) with g the gain of the layer norm feeding attention",
    "profile": "scale L to ||L||_F = 1; S, T = symmetric, antisymmetric parts; lambda_+/- = positive / "
    "absolute negative eigenvalues of S, decreasing, zero-padded; a = ||T||^2, b = 2<lambda_+, lambda_->, "
    "c = ||(lambda_+ - lambda_-)_+||^2, d = ||(lambda_+ - lambda_-)_-||^2; NaN where L = 0 (norm 0)",
    "norm": "Frobenius norm of L(d) before scaling",
    "complete": "true only when every layer of the model is written",
}


class StoreError(RuntimeError):
    """A problem with the store that the user can fix; the message says how."""


@dataclass
class ModelInfo:
    """Per-model metadata of the ``profiles`` group (one row of the model dimension)."""

    name: str
    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    positional: str
    source: str = ""
    revision: str = ""
    family: str = ""
    command: str = ""
    n_kv_heads: int = 0
    rotary_dim: int = 0
    layernorm_folded: bool = False

    def __post_init__(self):
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}; got {self.positional!r}")
        if not self.name.strip():
            raise ValueError("a model needs a non-empty name")
        if self.n_kv_heads == 0:
            self.n_kv_heads = self.n_heads


# ----------------------------------------------------------------------------------------- opening


def _group(path, group: str, mode: str = "a") -> zarr.Group:
    return zarr.open_group(str(path), path=group, mode=mode, use_consolidated=False)


def _consolidate(path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "consolidated metadata is not part of the v3 spec"
        zarr.consolidate_metadata(str(path))


def _check_path(path) -> None:
    p = str(path)
    if "://" in p:
        return
    if not os.path.exists(p):
        raise StoreError(
            f"no store at {p!r}. Create it with `python -m pipeline profiles MODEL --store {p}`, "
            "or point at the committed store.zarr."
        )
    if not os.path.exists(os.path.join(p, "zarr.json")) and not os.path.exists(os.path.join(p, ".zgroup")):
        raise StoreError(f"{p!r} is not a Zarr store (no zarr.json). Point at a store written by `python -m pipeline`.")


def open_group_dataset(path, group: str) -> xr.Dataset:
    """Open one group read-only as an xarray Dataset, with clear errors for every way it can be wrong."""
    _check_path(path)
    try:
        root = zarr.open_group(str(path), mode="r")
    except Exception as exc:  # noqa: BLE001 - zarr raises several types for a non-store
        raise StoreError(f"{str(path)!r} is not a readable Zarr store ({exc}).") from exc
    if group not in root:
        fix = ("python -m pipeline profiles MODEL" if group == PROFILES else "python -m pipeline orbits")
        raise StoreError(f"the store {str(path)!r} has no {group!r} group. Write it with `{fix} --store {path}`.")
    version = root[group].attrs.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"the {group!r} group of {str(path)!r} has schema version {version}, this code reads version "
            f"{SCHEMA_VERSION}. Recompute it with this version of the pipeline (`python -m pipeline ...`)."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # consolidated fallback on hand-made stores
        return xr.open_zarr(str(path), group=group)


def open_profiles(path) -> xr.Dataset:
    return open_group_dataset(path, PROFILES)


def open_orbits(path) -> xr.Dataset:
    return open_group_dataset(path, ORBITS)


# ------------------------------------------------------------------------------------ profiles writes


def _create_profiles(path, n_layers: int, n_heads: int) -> zarr.Group:
    g = _group(path, PROFILES, mode="a")
    L, H = max(n_layers, 1), max(n_heads, 1)

    def arr(name, shape, chunks, dtype, dims, fill):
        return g.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                              dimension_names=dims)

    arr("model", (0,), (1,), str, ["model"], "")
    arr("layer", (L,), (4096,), "int32", ["layer"], 0)[:] = np.arange(L)
    arr("head", (H,), (4096,), "int32", ["head"], 0)[:] = np.arange(H)
    arr("d", (N_OFFSETS,), (N_OFFSETS,), "int32", ["d"], 0)[:] = np.arange(N_OFFSETS)
    arr("coordinate", (4,), (4,), str, ["coordinate"], "")[:] = np.array(COORDINATES, dtype=object)
    arr("profile", (0, L, H, N_OFFSETS, 4), (1, 1, H, N_OFFSETS, 4), "float64",
        ["model", "layer", "head", "d", "coordinate"], np.nan)
    arr("norm", (0, L, H, N_OFFSETS), (1, 1, H, N_OFFSETS), "float64", ["model", "layer", "head", "d"], np.nan)
    arr("layer_done", (0, L), (1, 1), bool, ["model", "layer"], False)
    for f in INT_FIELDS:
        arr(f, (0,), (1,), "int32", ["model"], 0)
    for f in STR_FIELDS:
        arr(f, (0,), (1,), str, ["model"], "")
    for f in BOOL_FIELDS:
        arr(f, (0,), (1,), bool, ["model"], False)
    g.attrs.update(PROFILE_ATTRS)
    return g


def _profiles_group(path, create_for: tuple[int, int] | None = None) -> zarr.Group:
    exists = True
    try:
        root = zarr.open_group(str(path), mode="r", use_consolidated=False)
        exists = PROFILES in root
    except FileNotFoundError:
        exists = False
    except Exception as exc:  # noqa: BLE001
        if "://" not in str(path) and os.path.exists(str(path)):
            raise StoreError(f"{str(path)!r} exists but is not a Zarr store ({exc}); choose another --store.") from exc
        exists = False
    if not exists:
        if create_for is None:
            raise StoreError(f"the store {str(path)!r} has no profiles yet; run `python -m pipeline profiles ...`.")
        return _create_profiles(path, *create_for)
    g = _group(path, PROFILES)
    if g.attrs.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(
            f"the profiles group of {str(path)!r} has schema version {g.attrs.get('schema_version')}; this "
            f"pipeline writes version {SCHEMA_VERSION}. Write to a new --store, or move the old one aside."
        )
    return g


def model_names(g: zarr.Group) -> list[str]:
    return [str(x) for x in g["model"][:]] if g["model"].shape[0] else []


def _model_index(g: zarr.Group, name: str) -> int:
    names = model_names(g)
    if name not in names:
        raise StoreError(f"model {name!r} is not in the store (it has: {', '.join(names) or 'none'}).")
    return names.index(name)


def _grow(g: zarr.Group, n_layers: int, n_heads: int) -> None:
    """Grow the layer/head dimensions in place; resize keeps every chunk already written."""
    L0, H0 = g["layer"].shape[0], g["head"].shape[0]
    L, H = max(L0, n_layers), max(H0, n_heads)
    if (L, H) == (L0, H0):
        return
    for name in ("profile", "norm", "layer_done"):
        a = g[name]
        shape = list(a.shape)
        shape[1] = L
        if name != "layer_done":
            shape[2] = H
        a.resize(tuple(shape))
    g["layer"].resize((L,))
    g["layer"][:] = np.arange(L)
    g["head"].resize((H,))
    g["head"][:] = np.arange(H)


def register_model(path, info: ModelInfo) -> int:
    """Add a model row (or refresh the metadata of an incomplete one); returns its index.

    Creates the store and the group if needed and grows them if the model is larger than the store.
    The data of an existing row are kept (so an interrupted run resumes); use ``reset_model`` first
    to recompute.
    """
    g = _profiles_group(path, create_for=(info.n_layers, info.n_heads))
    _grow(g, info.n_layers, info.n_heads)
    names = model_names(g)
    if info.name in names:
        i = names.index(info.name)
        if bool(g["complete"][i]):
            old = {f: int(g[f][i]) for f in ("n_layers", "n_heads", "d_model", "d_head")}
            new = {f: getattr(info, f) for f in old}
            if old != new:
                raise StoreError(
                    f"the store already holds a complete {info.name!r} with shape {old}, but this checkpoint "
                    f"has {new}. Use --name to store it under another name, or --force to replace it."
                )
    else:
        i = len(names)
        for name in g.array_keys():
            a = g[name]
            if a.metadata.dimension_names and a.metadata.dimension_names[0] == "model":
                a.resize((i + 1,) + a.shape[1:])
        g["model"][i] = info.name
    row = asdict(info)
    for f in INT_FIELDS:
        g[f][i] = int(row[f])
    for f in STR_FIELDS:
        g[f][i] = str(row[f])
    g["layernorm_folded"][i] = bool(info.layernorm_folded)
    _consolidate(path)
    return i


def model_info(path, name: str) -> ModelInfo:
    g = _profiles_group(path)
    i = _model_index(g, name)
    kw = {f: int(g[f][i]) for f in INT_FIELDS} | {f: str(g[f][i]) for f in STR_FIELDS}
    return ModelInfo(name=name, layernorm_folded=bool(g["layernorm_folded"][i]), **kw)


def layers_done(path, name: str) -> np.ndarray:
    """Boolean (n_layers,) of the layers of ``name`` already written."""
    g = _profiles_group(path)
    i = _model_index(g, name)
    return np.asarray(g["layer_done"][i, : int(g["n_layers"][i])], dtype=bool)


def is_complete(path, name: str) -> bool:
    g = _profiles_group(path)
    return bool(g["complete"][_model_index(g, name)])


def write_layer(path, name: str, layer: int, profile: np.ndarray, norm: np.ndarray) -> None:
    """Region write of one (model, layer): profile (H, 4) or (H, D, 4), norm (H,) or (H, D).

    Position-independent layers pass (H, 4) and are repeated at every d. Safe to call from several
    processes at once for different layers.
    """
    g = _profiles_group(path)
    i = _model_index(g, name)
    H, L = int(g["n_heads"][i]), int(g["n_layers"][i])
    if not 0 <= layer < L:
        raise StoreError(f"layer {layer} out of range for {name!r} with {L} layers")
    profile = np.asarray(profile, dtype=np.float64)
    norm = np.asarray(norm, dtype=np.float64)
    if profile.ndim == 2:
        profile = np.broadcast_to(profile[:, None, :], (profile.shape[0], N_OFFSETS, 4))
        norm = np.broadcast_to(norm[:, None], (norm.shape[0], N_OFFSETS))
    if profile.shape != (H, N_OFFSETS, 4) or norm.shape != (H, N_OFFSETS):
        raise StoreError(f"layer {layer} of {name!r}: expected profile ({H}, {N_OFFSETS}, 4) and norm "
                         f"({H}, {N_OFFSETS}); got {profile.shape} and {norm.shape}")
    g["profile"][i, layer, :H] = profile
    g["norm"][i, layer, :H] = norm
    g["layer_done"][i, layer] = True


def mark_complete(path, name: str, revision: str | None = None) -> None:
    """Set ``complete`` once every layer is written; refuses otherwise."""
    g = _profiles_group(path)
    i = _model_index(g, name)
    done = np.asarray(g["layer_done"][i, : int(g["n_layers"][i])], dtype=bool)
    if not done.all():
        missing = np.flatnonzero(~done).tolist()
        raise StoreError(f"cannot mark {name!r} complete: layers {missing} are not written")
    if revision is not None:
        g["revision"][i] = str(revision)
    g["complete"][i] = True


def reset_model(path, name: str) -> None:
    """Forget the values of a model (for --force): its data back to NaN, no layer done, not complete."""
    g = _profiles_group(path)
    i = _model_index(g, name)
    g["complete"][i] = False
    g["layer_done"][i] = False
    g["profile"][i] = np.nan
    g["norm"][i] = np.nan


# ------------------------------------------------------------------------------ whole-group writes


def _vlen_strings(ds: xr.Dataset) -> xr.Dataset:
    """Numpy fixed-width strings (<U) become variable-length strings in Zarr v3."""
    out = ds.copy()
    for name, var in list(out.variables.items()):
        if var.dtype.kind == "U":
            out[name] = var.astype(object)
    return out


def write_group(path, group: str, ds: xr.Dataset, attrs: Mapping | None = None) -> None:
    """Replace one group of the store (e.g. ``orbits``) with ``ds``, leaving the other groups alone.

    Written to a side group first and swapped in, so a failure leaves the old group intact.
    """
    if group == PROFILES:
        raise StoreError("the profiles group is written layer by layer; use register_model/write_layer")
    ds = _vlen_strings(ds)
    ds.attrs = dict(ds.attrs) | dict(attrs or {}) | {"schema_version": SCHEMA_VERSION}
    for v in ds.variables.values():
        v.encoding = {}
    side = f"{group}.__writing__"
    ds.to_zarr(str(path), group=side, mode="w", consolidated=False, zarr_format=3)
    root = zarr.open_group(str(path), mode="a", use_consolidated=False)
    if "://" in str(path):
        raise StoreError("replacing a whole group is supported on local stores only")
    old = os.path.join(str(path), group)
    if group in root:
        os.replace(old, old + ".__old__")
    os.replace(os.path.join(str(path), side), old)
    if os.path.exists(old + ".__old__"):
        import shutil

        shutil.rmtree(old + ".__old__")
    _consolidate(path)
