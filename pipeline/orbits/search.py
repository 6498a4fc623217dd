"""The multi-seed search for the seed's 12 + 4 orbits: train seeds in batches, analyse, rank, polish, store.

One row per (recipe, seed) goes to the store's ``orbits_search`` group (the table's variables are described
in ``TABLE_DOC`` and stored with it). The table is rewritten atomically after every batch, so a killed search
resumes where it stopped: a run already in the table is never trained again.

Runs are ranked by ``runs.rank_key`` (rank 1 = best; ``RANKING`` says it in words), on the finder at 2% (the
stated finder, as for the stored run). The same key, taken from the ``orbits`` group's attributes
(``orbit_sizes``, ``median_matching_error``), decides whether the search's best run replaces the stored one:
only a strictly better key does.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import product

import numpy as np
import xarray as xr

from ..schema import (
    ORBITS,
    ORBITS_SEARCH,
    ORBITS_SEARCH_VARIABLES,
    SEARCH_COORDS,
    SEARCH_KS,
    SEARCH_SIZES,
    SEARCH_TOLS,
)
from .config import Config, adamw_epochs, differences, from_dict
from .runs import FINDER, MODEL_NAME, RANKING, commit, rank_key, run_name, store_run

TOLS, SIZES, KS = SEARCH_TOLS, SEARCH_SIZES, SEARCH_KS
SCHEDULER_TIMEOUT = "5s"  # how long the dask scheduler at --scheduler may take to answer
TABLE_DOC = {
    "seed": "the run's seed (init, split and contexts)",
    "recipe": "JSON of the Config fields that differ from the defaults (the seed aside)",
    "train_accuracy": "final train accuracy (train.METRICS)",
    "heldout_accuracy": "final held-out accuracy",
    "e3": "final relative equivariance error on all length-3 inputs (equivariance_error)",
    "matching_error": "median matching error over live heads and shifts, finder at 2%",
    "orbit_count": "number of orbits of that size (merged heads) found by the finder at that tolerance",
    "family_heads": "merged live heads whose strongest key frequency is k (summary.family_heads; an orbit at k "
    "needs 24 / gcd(k, 24) of them)",
    "families": "the frequency families as r:heads/needed, largest first; 'failed at epoch N' for a run whose "
    "loss became non-finite",
    "polished": "whether the row's numbers are after the recipe's LBFGS polishing (else after AdamW alone)",
    "rank": RANKING,
}


@dataclass(frozen=True)
class Recipe:
    label: str  # the run names' prefix, e.g. "long" or "long+init_scale=0.5"
    config: Config  # seed ignored

    def run_name(self, seed: int) -> str:
        return f"{self.label}-s{seed}"


def grid_recipes(base_label: str, base: Config, grid: dict[str, list]) -> list[Recipe]:
    """Every combination of the grid's values over the base recipe; labels name the changed settings."""
    if not grid:
        return [Recipe(base_label, base)]
    keys = list(grid)
    out = []
    for values in product(*(grid[k] for k in keys)):
        changes = dict(zip(keys, values, strict=True))
        label = base_label + "".join(f"+{k}={_fmt(v)}" for k, v in changes.items())
        out.append(Recipe(label, from_dict(base.to_dict() | changes)))
    return out


def _fmt(v) -> str:
    return ",".join(map(_fmt, v)) if isinstance(v, (list, tuple)) else f"{v:g}" if isinstance(v, float) else str(v)


def analyse(M: np.ndarray, R: np.ndarray, final: dict, seed: int, recipe: Config, name: str, polished: bool,
            failed_at: int | None = None) -> dict:
    """One table row from a run's final heads (float32 as in a saved frame, analysed in float64) and metrics."""
    from .find import find_orbits
    from .summary import families, family_heads

    M, R = np.asarray(M, np.float32).astype(np.float64), np.asarray(R, np.float32).astype(np.float64)
    counts = np.zeros((len(TOLS), len(SIZES)), dtype=np.int64)
    fam = np.zeros(len(KS), dtype=np.int64)
    summary, med = "", float("nan")
    finite = bool(np.isfinite(M).all() and np.isfinite(R).all())
    if finite:
        for i, tol in enumerate(TOLS):
            f = find_orbits(M, R, tol=tol)
            n = Counter(f.sizes)
            counts[i] = [n.get(s, 0) for s in SIZES]
            if i == 0:
                med = f.median_error
                for r, heads in family_heads(M, R, f).items():
                    fam[r] = len(set(f.group[heads]))
                summary = families(M, R, f)
    if failed_at is not None:
        summary = f"failed at epoch {failed_at}" + (f"; {summary}" if summary else "")
    return {"run": name, "seed": int(seed), "recipe": json.dumps(differences(recipe), sort_keys=True),
            "train_accuracy": float(final["train_accuracy"]), "heldout_accuracy": float(final["heldout_accuracy"]),
            "e3": float(final["equivariance_error"]), "matching_error": float(med), "orbit_count": counts,
            "family_heads": fam, "families": summary, "polished": bool(polished), "failed": failed_at is not None}


def row_key(row: dict) -> tuple:
    return rank_key(dict(zip(SIZES, (int(x) for x in row["orbit_count"][0]), strict=True)), row["matching_error"],
                    row.get("failed", False))


def stored_key(attrs: dict) -> tuple:
    """The rank key of the run in the ``orbits`` group, from its attributes (orbit sizes at the finder's tol)."""
    sizes = Counter(int(s) for s in attrs.get("orbit_sizes", []))
    med = attrs.get("median_matching_error")
    return rank_key(dict(sizes), float(med) if med is not None else math.inf)


def table_dataset(rows: list[dict], attrs: dict) -> xr.Dataset:
    """The ``orbits_search`` group (contract in the store's schema): rows ranked, sorted by run name."""
    rows = sorted(rows, key=lambda r: r["run"])
    order = sorted(range(len(rows)), key=lambda i: (row_key(rows[i]), rows[i]["run"]))
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = np.arange(1, len(rows) + 1)
    col = {k: [r[k] for r in rows] for k in ORBITS_SEARCH_VARIABLES if k != "rank"} | {"rank": rank}
    extent = {c: len(values) for c, (values, _dtype) in SEARCH_COORDS.items()}
    data = {}
    for k, (dims, dtype) in ORBITS_SEARCH_VARIABLES.items():
        values = np.array(col[k], dtype=object if dtype == "str" else dtype)
        data[k] = (dims, values.reshape((len(rows),) + tuple(extent[d] for d in dims[1:])))
    coords = {c: np.array(values, dtype=dtype) for c, (values, dtype) in SEARCH_COORDS.items()}
    ds = xr.Dataset(data, coords={"run": np.array([r["run"] for r in rows], dtype=object)} | coords)
    for k, v in TABLE_DOC.items():
        ds[k].attrs["description"] = v
    ds.attrs = dict(attrs)
    return ds


def rows_from_dataset(ds: xr.Dataset) -> list[dict]:
    """The table's rows back as dicts (the inverse of ``table_dataset``, rank aside)."""
    rows = []
    for i, name in enumerate(ds["run"].values):
        fam = str(ds["families"].values[i])
        rows.append({"run": str(name), "seed": int(ds["seed"].values[i]), "recipe": str(ds["recipe"].values[i]),
                     **{k: float(ds[k].values[i]) for k in ("train_accuracy", "heldout_accuracy", "e3",
                                                             "matching_error")},
                     "orbit_count": np.asarray(ds["orbit_count"].values[i], dtype=np.int64),
                     "family_heads": np.asarray(ds["family_heads"].values[i], dtype=np.int64),
                     "families": fam, "polished": bool(ds["polished"].values[i]),
                     "failed": fam.startswith("failed")})
    return rows


def read_table(store_path: str) -> list[dict]:
    """The rows already in the store's ``orbits_search`` group ([] when there is no store or no such group)."""
    from ..store import Store

    st = Store.open(store_path)
    if ORBITS_SEARCH not in st.groups():
        return []
    with st.dataset(ORBITS_SEARCH) as ds:
        return rows_from_dataset(ds.load())


def write_table(store_path: str, rows: list[dict], attrs: dict) -> None:
    """Replace the ``orbits_search`` group with the ranked table (atomic: ``Store.replace_group``)."""
    from ..store import Store

    Store.open(store_path).replace_group(ORBITS_SEARCH, table_dataset(rows, attrs))


def merge_tables(store_path: str, sources: Sequence[str], command: str = "") -> list[dict]:
    """Add the rows of other stores' ``orbits_search`` tables to this one (no training); rows already here win.

    For searches run elsewhere (another machine, a scratch store): the merged table is ranked anew and written
    atomically. Returns every row of the merged table.
    """
    from ..store import Store

    rows = {r["run"]: r for r in read_table(store_path)}
    commands = [table_attrs(store_path).get("command", "")]
    for src in sources:
        for r in read_table(src):
            rows.setdefault(r["run"], r)
        commands.append(table_attrs(src).get("command", ""))
    Store.open(store_path)  # refuse an unusable target before anything is written
    if rows:
        # the commands that produced the rows (not the sources' paths, which name another machine's folders)
        made_by = "; ".join(dict.fromkeys(re.sub(r" --store \S+", "", c) for c in commands if c))
        write_table(store_path, list(rows.values()), {"command": made_by + f" (tables merged by {command})",
                                                      "commit": commit(), "ranking": RANKING})
    return list(rows.values())


def table_attrs(store_path: str) -> dict:
    from ..store import Store

    st = Store.open(store_path)
    if ORBITS_SEARCH not in st.groups():
        return {}
    with st.dataset(ORBITS_SEARCH) as ds:
        return dict(ds.attrs)


def polish(cfg: Config, result: dict) -> dict:
    """The recipe's LBFGS polishing of one batched seed, as ``train`` polishes it (the same contexts)."""
    from .train import train

    return train(replace(cfg, seed=result["seed"], epochs=0, hold_epochs=0), progress=False, start=result["params"],
                 context_state=result["context_state"])


def batch_rows(cfg: Config, label: str, seeds: Sequence[int], device: str, polish_top: int, bar=None) -> list[dict]:
    """Train ``seeds`` of one recipe together, analyse each, polish the batch's best ``polish_top``: the rows."""
    import torch

    from .batch import train_batch
    from .model import circuits

    results = train_batch(cfg, seeds, device=device, bar=bar)
    rows = []
    for res in results:
        with torch.no_grad():
            M, R = circuits({k: torch.as_tensor(v) for k, v in res["params"].items()})
        rows.append(analyse(M.numpy(), R.numpy(), res["final"], res["seed"], cfg, f"{label}-s{res['seed']}",
                            polished=cfg.polish_steps == 0, failed_at=res["failed_at"]))
    if cfg.polish_steps > 0 and polish_top > 0:
        best = sorted((i for i, r in enumerate(rows) if not r["failed"]), key=lambda i: row_key(rows[i]))[:polish_top]
        for i in best:
            run = polish(cfg, results[i])
            rows[i] = analyse(run["M"][-1], run["R"][-1], run["final"], results[i]["seed"], cfg, rows[i]["run"],
                              polished=True)
    return rows


def batch_on_worker(cfg: Config, label: str, seeds: Sequence[int], device: str, polish_top: int) -> list[dict]:
    """:func:`batch_rows` as a dask worker of the search runs it: the worker's process keeps freed memory for reuse
    first (``pipeline.orbits.malloc``): the search is an entry point of the workers it is given (``--scheduler``,
    whose workers ``docs/orbits_search.md`` starts for the search), as the CLI is of its own process."""
    from .malloc import keep_freed_memory

    keep_freed_memory()
    return batch_rows(cfg, label, seeds, device, polish_top)


def search(store_path: str, recipes: list[Recipe], seeds: Sequence[int], device: str = "auto",
           batch_size: int = 32, time_budget: float | None = None, polish_top: int = 2,
           scheduler: str | None = None, progress: bool = True, command: str = "",
           log: Callable[[str], None] = print) -> list[dict]:
    """Train every (recipe, seed) not yet in the table, in batches; write the table after each batch.

    Returns every row of the table (old and new). ``time_budget`` (seconds): no batch starts after it has
    passed. ``scheduler``: a dask.distributed scheduler address; batches then run on its workers (each
    worker trains and analyses; this process alone writes the store).
    """
    rows = {r["run"]: r for r in read_table(store_path)}
    todo = [(rec, s) for rec in recipes for s in seeds if rec.run_name(s) not in rows]
    skipped = len(recipes) * len(seeds) - len(todo)
    if skipped:
        log(f"{skipped} runs already in the table: not trained again")
    per_recipe = [[s for r, s in todo if r is rec] for rec in recipes]
    batches = []  # seed chunks in order, every recipe's chunk in turn: a grid advances evenly under a time budget
    for i in range(0, max(map(len, per_recipe), default=0), batch_size):
        batches += [(rec, mine[i:i + batch_size]) for rec, mine in zip(recipes, per_recipe, strict=True)
                    if mine[i:i + batch_size]]
    attrs = {"command": command, "commit": commit(), "ranking": RANKING}
    t0 = time.time()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(b) * adamw_epochs(rec.config) for rec, b in batches), unit="seed-step",
                   desc="orbits search")

    def out_of_time() -> bool:
        return time_budget is not None and time.time() - t0 >= time_budget

    def done(new_rows: list[dict]) -> None:
        for r in new_rows:
            rows[r["run"]] = r
        write_table(store_path, list(rows.values()), attrs)
        best = min(rows.values(), key=row_key)
        log(f"{len(new_rows)} runs added ({len(rows)} in the table); best {best['run']}: "
            f"{best['families']} (matching error {best['matching_error']:.3f})")

    try:
        if scheduler:
            _search_distributed(scheduler, batches, device, polish_top, done, out_of_time, bar)
        else:
            for rec, b in batches:
                if out_of_time():
                    log(f"time budget of {time_budget:.0f} s reached: stopping before the next batch")
                    break
                done(batch_rows(rec.config, rec.label, b, device, polish_top, bar))
    finally:
        if bar is not None:
            bar.close()
    return list(rows.values())


def _search_distributed(address: str, batches, device, polish_top, done, out_of_time, bar) -> None:
    from distributed import Client, as_completed

    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT)
    except (OSError, ValueError, TypeError) as exc:
        raise ValueError(f"--scheduler {address!r}: no dask scheduler answers there ({exc})") from None
    with client:
        futures = {client.submit(batch_on_worker, rec.config, rec.label, b, device, polish_top, pure=False):
                   adamw_epochs(rec.config) * len(b) for rec, b in batches}
        for fut in as_completed(futures):
            rows = fut.result()
            if bar is not None:
                bar.update(futures[fut])
            done(rows)
            if out_of_time():
                for f in futures:
                    f.cancel()
                break


def distribution(rows: list[dict]) -> str:
    """The seed distribution: families by size (merged heads per key frequency) and orbits by size at 2%."""
    ok = [r for r in rows if not r["failed"]]
    lines = [f"{len(rows)} runs ({len(rows) - len(ok)} failed)"]
    orbits = np.sum([r["orbit_count"] for r in ok], axis=0) if ok else np.zeros((len(TOLS), len(SIZES)), int)
    for i, tol in enumerate(TOLS):
        lines.append(f"orbits at {tol:.0%} by size: " + ", ".join(
            f"{s}: {int(n)}" for s, n in zip(SIZES, orbits[i], strict=True) if n))
    fam = np.array([r["family_heads"] for r in ok]) if ok else np.zeros((0, len(KS)), int)
    for k in KS[1:]:
        if fam.size and fam[:, k].any():
            counts = np.bincount(fam[:, k])
            lines.append(f"k={k:2d} (an orbit needs {24 // np.gcd(k, 24):2d}): runs by heads there " + ", ".join(
                f"{n}:{c}" for n, c in enumerate(counts) if c and n))
    twelve = sum(1 for r in ok if r["family_heads"][2] >= 12 or r["family_heads"][10] >= 12)
    lines.append(f"runs with 12 or more heads at k = 2 or 10: {twelve} of {len(ok)}")
    return "\n".join(lines)


def store_best(store_path: str, rows: list[dict], model_name: str = MODEL_NAME, finder: dict | None = None,
               log: Callable[[str], None] = print) -> str:
    """Replace the ``orbits`` group with the table's best run when it ranks strictly above the stored run.

    The stored run's key comes from the group's attributes (``stored_key``). The best run is retrained with
    ``train`` (its recipe and seed: the movie's frames, polishing included) and its key taken again from the
    result before anything is written. Returns a one-line verdict.
    """
    import json as _json

    from ..store import Store
    from .config import Config
    from .store_io import run_from_result
    from .train import train

    ok = [r for r in rows if not r.get("failed")]
    if not ok:
        return "no finished run to store"
    best = min(ok, key=row_key)
    st = Store.open(store_path)
    if ORBITS in st.groups():
        with st.dataset(ORBITS) as ds:
            old, old_name = stored_key(dict(ds.attrs)), ds.attrs.get("run", "")
    else:
        old, old_name = rank_key({}, math.inf, failed=True), "(none)"
    if not row_key(best) < old:
        return f"kept the stored run {old_name}: the search's best, {best['run']}, does not rank above it"
    cfg = from_dict(Config().to_dict() | _json.loads(best["recipe"]) | {"seed": best["seed"]})
    log(f"{best['run']} ranks above the stored run {old_name}: retraining it with train() for the movie")
    result = train(cfg, progress=True)
    run_ = run_from_result(run_name(cfg), result)
    row = analyse(run_["M"][-1], run_["R"][-1], result["final"], cfg.seed, cfg, best["run"], polished=True)
    if not row_key(row) < old:
        return f"kept the stored run {old_name}: retrained, {best['run']} no longer ranks above it"
    for line in store_run(run_, store_path, finder or FINDER,
                          model_name=model_name):
        log(line)
    return f"stored {best['run']} as the orbits group (it ranks above {old_name})"
