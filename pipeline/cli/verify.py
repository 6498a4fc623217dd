"""``python -m pipeline verify``: check every written layer against its checksum, repair interrupted writes."""

from __future__ import annotations

import argparse
import sys

from pipeline.store.location import DEFAULT_HELP

HELP = """\
Check a store: finish or clean up what a killed writer left (a half-registered model, a half-swapped
group), re-read every written layer of the profiles group and compare it with the checksum written with
it, and decode every array of the other groups.

A layer whose chunk does not decode (garbled) or whose values no longer match their checksum (a deleted
chunk reads as NaN) is damaged: verify clears it, marks its model damaged and not complete, and prints
the command that recomputes exactly the damaged layers (the model's own command, which resumes). Each
layer has three checksums: one over its profile and norm, one over its head statistics and spectrum,
one over the spectra of T and L. A layer written without statistics or spectra (by a pipeline older
than them) is not damaged; verify lists its model as "statistics not computed" or "spectra of T and L
not computed" with the command that adds them (the model's own command: it recomputes the layers that
lack them).

The frames of every run of revisions (runs/NAME, written by `profiles MODEL --revisions SPEC`) are checked
the same way: a damaged layer is cleared, and verify prints the command that recomputes those revisions.
Name a run as runs/NAME (or NAME, where no model has that name).

Exit status: 0 when the store is sound, 1 when damage was found, 2 on bad input (no store, not a Zarr v3
store, an unknown model, a store of another schema version without --upgrade).

--upgrade brings a store of an older schema version to the current one in place,
keeping every group and every value (new per-model fields start empty; the checksums of the layers
already written are computed from their stored values), and adds the optional variables a store
written before them lacks (the statistics, the spectra of T and L, the baseline fields, the models'
conventions), empty. The per-model fields of a store written with a chunk per model are rewritten with
many models to a chunk (the values kept), which makes reading the models table several times faster.

examples:
  python -m pipeline verify                        # the default store (see --store)
  python -m pipeline verify gpt2 opt-125m --store my.zarr
  python -m pipeline verify --upgrade              # after updating the pipeline
"""


def register(sub) -> None:
    p = sub.add_parser("verify", help="check the store's layers against their checksums; repair or upgrade it",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="models (and runs, as runs/NAME) to check (default: every model, run and group)")
    p.add_argument("--store", default=None,
                   help=f"Zarr store (path or fsspec URL; default: {DEFAULT_HELP})")
    p.add_argument("--upgrade", action="store_true",
                   help="upgrade a store of an older schema version in place first (keeps all data)")
    p.add_argument("--dry-run", action="store_true",
                   help="report damage without marking it in the store")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pipeline.store import Store, StoreError

    try:
        store = Store.open(args.store, mode="r")  # a missing store is an error here, not a new store
        if not args.dry_run:
            store = Store.open(store.location, mode="a")
        for line in ([] if args.dry_run else store.recover()):
            print(f"repaired: {line}")
        if args.upgrade:
            if args.dry_run:
                raise StoreError("--upgrade changes the store; leave out --dry-run")
            done = store.upgrade()
            for line in done:
                print(f"upgraded: {line}")
            if not done:
                print(f"{store.location}: already at the current schema version")
        damage = store.verify(args.models or None, mark=not args.dry_run)
        missing = [m for m in store.models() if (m.statistics_note or m.spectra_note)
                   and (not args.models or m.name in args.models)]
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not damage:
        print(f"{store.location}: every written layer matches its checksum; every group decodes")
    for m in missing:  # not damage: layers without statistics or spectra
        print(f"{m.name}: {m.statistics_note or m.spectra_note}")
    if not damage:
        return 0
    for d in damage:
        print(d.line())
    repairs = sorted({d.repair for d in damage})
    marked = "" if args.dry_run else " (marked damaged in the store)"
    print(f"{len(damage)} damaged piece(s){marked}; to repair run:")
    for r in repairs:
        print(f"  {r}")
    return 1
