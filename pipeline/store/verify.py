"""Verification: every written layer (of the models and of the runs' frames) against its checksums; damage marked by
verify, reported by readers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import zarr

from pipeline.cli_args import command
from pipeline.schema import (
    PROFILES,
    RUNS,
    SPECTRA,
    WRITE_COMMANDS,
    ModelRow,
    layer_checksum,
    spectra_checksum,
    spectrum_width,
    statistics_checksum,
)
from pipeline.store.backend import with_store
from pipeline.store.errors import Damage, StoreError
from pipeline.store.profile_arrays import layer_prefixes, row_names
from pipeline.store.profiles import Table


class Verification:
    """verify (marks damage through the profiles table) and the read-side check (reports it, writing nothing)."""

    def __init__(self, backend, hierarchy, profiles, runs):
        self.hierarchy, self.profiles, self.runs = hierarchy, profiles, runs
        self.location = backend.location

    def verify(self, names: list[str] | None = None, mark: bool = True) -> list[Damage]:
        """Re-read every written layer (and every other group); returns what is damaged.

        A layer that does not decode (garbled chunk) or does not match its checksum (a deleted chunk reads
        as NaN) is damaged. With ``mark`` (the default, needs mode "a"), each damaged layer is cleared (not
        done, values NaN) and its model marked ``damaged`` and not complete, with the command that
        recomputes exactly those layers (the model's command, which resumes). Models already marked damaged
        and not repaired yet are listed too (layer None). The frames of every run (``runs/NAME``) are checked
        the same way, a damaged layer cleared, with the command that recomputes its revisions. ``names``: models
        and runs (a run as ``runs/NAME``, or ``NAME`` where no model has that name); None: everything.
        """
        found: list[Damage] = []
        groups = self.hierarchy.names()
        models, runs = self._chosen(names)
        if PROFILES in groups and (names is None or models):
            found += self._verify_profiles(models, mark)
        for run in runs:
            found += self.runs.damage(run, layer_problems, mark, lambda revisions, run=run: self._run_repair(run,
                                                                                                          revisions))
        if names is None:
            for group in groups:
                if group not in (PROFILES, RUNS):
                    found += self._verify_group(group)
        return found

    def _chosen(self, names: list[str] | None) -> tuple[list[str] | None, list[str]]:
        """(the models, the runs) that ``names`` asks for (None: every model and run); StoreError for a name that is
        neither."""
        runs = self.runs.names()
        if names is None:
            return None, runs
        models = self.profiles.names()
        chosen_runs = [n.removeprefix(RUNS + "/") for n in names
                       if (n.startswith(RUNS + "/") and n.removeprefix(RUNS + "/") in runs)
                       or (n in runs and n not in models)]
        chosen_models = [n for n in names if n.removeprefix(RUNS + "/") not in chosen_runs]
        unknown = [n for n in chosen_models if n not in models]
        if unknown:
            raise StoreError(f"not in the store {self.location!r}: {', '.join(unknown)} (it has: models "
                             f"{', '.join(n for n in models if n) or 'none'}; runs {', '.join(runs) or 'none'}).")
        return chosen_models, chosen_runs

    def _run_repair(self, name: str, revisions: list[str]) -> str:
        """The command that recomputes ``revisions`` of run ``name`` (the run's own command, those revisions
        alone)."""
        attrs = dict(self.runs.open(name).attrs)
        spelled = command("python -m pipeline profiles", [str(attrs.get("source", name))],
                          {"revisions": ",".join(revisions), "name": name,
                           "fold_ln": bool(attrs.get("layernorm_folded")) or None})
        return with_store(spelled, self.location)

    def _verify_profiles(self, names: list[str] | None, mark: bool) -> list[Damage]:
        g = self.profiles.open()
        try:
            stored = row_names(g)
            meta = {f: g[f][:] for f in ("n_layers", "n_heads", "d_head", "command", "source", "damaged")}
            done = np.asarray(g["layer_done"][:], dtype=bool)
            sums = np.asarray(g["layer_checksum"][:])
            extra = {c: np.asarray(g[c][:]) for c in _EXTRA if c in g}
        except Exception as exc:  # noqa: BLE001 - a garbled per-model chunk
            return [Damage(PROFILES, "", None, f"per-model metadata does not decode ({exc})",
                           f"restore {self.location!r} from a copy (git checkout, backup); the data cannot be "
                           "matched to models without it")]
        wanted = stored if names is None else list(names)
        unknown = [n for n in wanted if n not in stored]
        if unknown:
            raise StoreError(f"not in the store {self.location!r}: {', '.join(unknown)} (it has: "
                             f"{', '.join(n for n in stored if n) or 'none'}).")
        found = []
        for name in wanted:
            if not name:
                continue
            i = stored.index(name)
            L, H = int(meta["n_layers"][i]), int(meta["n_heads"][i])
            command = str(meta["command"][i]) or f"python -m pipeline profiles {meta['source'][i] or name}"
            command = with_store(command, self.location)
            bad = layer_problems(g, i, L, H, spectrum_width(int(meta["d_head"][i])), done[i], sums[i],
                                  {c: s[i] for c, s in extra.items()})
            if not bad:
                if str(meta["damaged"][i]):  # already marked, not repaired yet
                    found.append(Damage(PROFILES, name, None, f"marked damaged: {meta['damaged'][i]}", command))
                continue
            found += [Damage(PROFILES, name, layer, why, command) for layer, why in sorted(bad.items())]
            if mark:
                self.profiles.mark_damaged(name, sorted(bad), _damage_line(bad, command))
        return found

    def damage_found(self) -> dict[str, str]:
        """Read-only: the models whose written layers no longer match their checksums, not yet marked damaged.

        Model name -> one line: the damaged layers, why (verify's words), and the repair: ``verify`` (which
        clears those layers and marks the model), then the model's own command (which recomputes exactly
        them). Writes nothing, so it works on a read-only store; every reader (``list``, the dashboard)
        folds it into the rows it shows (:meth:`checked_models`).
        """
        return self._damage_found(self.profiles.read())

    def checked_models(self) -> list[ModelRow]:
        """:meth:`models`, with the damage :meth:`damage_found` finds: such a model reads damaged and not complete,
        its ``damaged`` line naming the repair. Writes nothing."""
        table = self.profiles.read()
        found = self._damage_found(table)
        return [replace(r, damaged=found[r.name], complete=False) if r.name in found else r for r in table.rows]

    def _damage_found(self, table: Table) -> dict[str, str]:
        """Only the models with written layers and no damage recorded are read, each in one block per variable."""
        g, names, cols = table.group, table.names, table.columns
        todo = [r for r in table.rows if r.layers_done and not r.damaged]
        if not todo:
            return {}
        verify = with_store("python -m pipeline verify", self.location)
        rows_at = [names.index(r.name) for r in todo]
        lengths = np.zeros(len(names), dtype=np.int64)
        lengths[rows_at] = [r.n_layers for r in todo]
        try:
            sums = layer_prefixes(g["layer_checksum"], lengths)
        except Exception as exc:  # noqa: BLE001 - a garbled checksum chunk
            return {r.name: f"its layer checksums do not decode ({type(exc).__name__}); find the damage with "
                    f"`{verify}`" for r in todo}
        out = {}
        for i, r in zip(rows_at, todo, strict=True):
            bad = layer_problems(g, i, r.n_layers, r.n_heads, spectrum_width(r.d_head),
                                  np.asarray(cols["layer_done"][i], dtype=bool), sums[i],
                                  {c: cols[c][i] for c in _EXTRA if c in cols})
            if bad:
                out[r.name] = _damage_line(bad, f"{verify} && {with_store(r.fix_command, self.location)}")
        return out

    def _verify_group(self, group: str) -> list[Damage]:
        fix = with_store(WRITE_COMMANDS.get(group, "python -m pipeline ..."), self.location)
        try:
            g = self.hierarchy.open(group)
        except StoreError as exc:
            return [Damage(group, "", None, str(exc), fix)]
        out = []
        for name, arr in g.arrays():
            try:
                arr[...]
            except Exception as exc:  # noqa: BLE001 - codec errors of a garbled chunk
                out.append(Damage(group, "", None, f"variable {name!r} does not decode ({type(exc).__name__})", fix))
        return out


def _damage_line(bad: dict[int, str], command: str) -> str:
    """The ``damaged`` line of a model: its damaged layers, why, and the command that repairs them."""
    return f"layers {sorted(bad)} damaged ({'; '.join(sorted(set(bad.values())))}); recompute them with `{command}`"


def _read(arr: zarr.Array, where: tuple, orthogonal: bool = False) -> tuple[np.ndarray | None, str]:
    """The values at ``where``, or (None, the error's type name) when a chunk there does not decode."""
    try:
        return np.asarray(arr.get_orthogonal_selection(where) if orthogonal else arr[where]), ""
    except Exception as exc:  # noqa: BLE001 - codec errors of a garbled chunk
        return None, type(exc).__name__


# The checksums of the values at d = 0 beyond the profile: checksum -> (its variables, the checksum of their values).
_EXTRA = {
    "statistics_checksum": (("head_statistics", "spectrum"), lambda v: statistics_checksum(*v)),
    "spectra_checksum": (SPECTRA, lambda v: spectra_checksum(np.stack(v))),
}
_WHAT = {"statistics_checksum": "statistics", "spectra_checksum": "spectra"}


def layer_problems(g: zarr.Group, i: int, L: int, H: int, width: int, done: np.ndarray, sums: np.ndarray,
                    extra: dict[str, np.ndarray]) -> dict[int, str]:
    """Why each written layer of row ``i`` does not match its checksums (layer -> reason; {} when all do).

    ``extra``: the row's (layer,) values of the checksums of ``_EXTRA`` the store has ('' where a layer has none).
    The model's values are read in one block per variable (its chunks are fetched together); when a block does not
    decode, its layers are read one by one to find the garbled ones.
    """
    layers = [int(x) for x in np.flatnonzero(done[:L])]
    checked = {c: s for c, s in extra.items() if all(v in g for v in _EXTRA[c][0]) and any(str(s[x]) for x in layers)}
    heads = (slice(0, H),)
    where = {"profile": heads, "norm": heads, "head_statistics": heads}
    blocks = {}
    for var in ("profile", "norm", *(v for c in checked for v in _EXTRA[c][0])):
        if layers:
            blocks[var] = _read(g[var], (i, slice(0, L)) + where.get(var, heads + (slice(0, width),)))[0]

    def values(var: str, layer: int) -> tuple[np.ndarray | None, str]:
        block = blocks.get(var)
        return ((block[layer], "") if block is not None
                else _read(g[var], (i, layer) + where.get(var, heads + (slice(0, width),))))

    bad: dict[int, str] = {}
    for layer in layers:
        (profile, e1), (norm, e2) = values("profile", layer), values("norm", layer)
        want = str(sums[layer])
        if e1 or e2:
            bad[layer] = f"its chunk does not decode ({e1 or e2})"
        elif not want:
            bad[layer] = "it was written without a checksum"
        elif layer_checksum(profile, norm) != want:
            if np.isnan(profile).all() or np.isnan(norm).all():
                bad[layer] = "its chunk is missing (the values read as NaN)"
            else:
                bad[layer] = "its values do not match the checksum written with them"
        for c, s in checked.items():
            if layer in bad or not str(s[layer]):
                continue
            got = [values(v, layer) for v in _EXTRA[c][0]]
            errors = [e for _, e in got if e]
            what = _WHAT[c]
            if errors:
                bad[layer] = f"its {what} chunk does not decode ({errors[0]})"
            elif _EXTRA[c][1]([v for v, _ in got]) != str(s[layer]):
                bad[layer] = (f"its {what} chunk is missing (the values read as NaN)"
                              if any(np.isnan(v).all() for v, _ in got)
                              else f"its {what} do not match the checksum written with them")
    return bad
