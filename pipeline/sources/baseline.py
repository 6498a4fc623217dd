"""A random baseline as a source the run path reads like a checkpoint: its layers' Q/K are made, not read.

:class:`BaselineSource` is what ``pipeline.run.tasks`` opens for a baseline's tasks: it has a checkpoint's
``config``, ``revision`` and ``provenance``, and ``make_layer(l)`` gives layer l's heads (a
``pipeline.families.LayerQK``) from :class:`pipeline.sources.iid_heads.IidHeads` or
:class:`pipeline.sources.init_heads.InitHeads`, which the run path profiles at every offset, with its statistics and
spectra, exactly as it profiles a checkpoint's layer (``pipeline.run.tasks.read_layer``). So a baseline goes through
the one run path: its executors (``--workers``, ``--scheduler``), its writers, resumption and locks.

A task carries its source as text: for a baseline, :data:`PREFIX` and a JSON object of the kind, the seed, the model
it is the baseline of and the whole config (:attr:`BaselineSource.text`), so a worker makes the same heads without
the store or the registry (:func:`open_baseline`). Its ``revision`` is a digest of that text and of the version of the
library that draws the heads (transformers and torch for ``init``, numpy for ``iid``): a worker with other versions is
refused like a checkpoint that changed, and a rerun with other versions finds the stored values from another
revision (``--force`` replaces them).
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version

from pipeline.families import layout_from_config
from pipeline.schema import BASELINE_KINDS, Provenance
from pipeline.sources.iid_heads import check_seed

PREFIX = "baseline:"  # a task source that starts with it is a baseline (BaselineSource.text)
# The libraries whose versions decide a kind's values.
LIBRARIES = {"iid": ("numpy",), "init": ("transformers", "torch")}
DESCRIPTION = {"iid": "W_Q, W_K with i.i.d. standard normal entries at the shape of {of}, seed {seed}",
               "init": "the heads transformers' _init_weights gives {of}'s config as training starts (each attention "
                       "module reseeded), seed {seed}"}


KINDS = BASELINE_KINDS
KIND_HELP = {"iid": "W_Q, W_K with i.i.d. standard normal entries at the model's shape",
             "init": "the heads transformers' own _init_weights gives a model of the config as training starts"}


def baseline_heads(config: dict, kind: str, seed: int, tower: str | None = None):
    """The baseline of ``kind`` and ``seed`` for ``config`` (its ``tower``, for a model of several): the i.i.d.
    Gaussian products (:class:`IidHeads`) or the library's own initialisation (:class:`InitHeads`), an object with
    ``layout`` and ``layer(l) -> LayerQK``, the form of a checkpoint's layer on its way to
    :func:`pipeline.profile.head_profiles`."""
    if kind not in KINDS:
        raise ValueError(f"baseline kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if kind == "iid":
        from pipeline.sources.iid_heads import IidHeads

        return IidHeads(layout_from_config(config, tower), seed)
    from pipeline.sources.init_heads import InitHeads

    return InitHeads(config, seed, tower)



class BaselineError(ValueError):
    """A baseline that cannot be made for what was given; the message says why and what to give instead."""


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


class BaselineSource:
    """The baseline of ``kind`` and ``seed`` of the model ``of`` (a name: what it is the baseline of), whose config is
    ``config`` (a Hugging Face config dict), of its ``tower`` for a model of several (CLIP, T5, Whisper: ``of`` is then
    the tower's store name, NAME/tower). ``layout`` is the config's Layout (a rotary model's R(d) with it)."""

    def __init__(self, kind: str, seed: int, config: dict, of: str, tower: str = ""):
        if kind not in BASELINE_KINDS:
            raise BaselineError(f"baseline kind must be one of {', '.join(BASELINE_KINDS)}; got {kind!r}")
        try:
            seed = check_seed(seed)
        except ValueError as exc:
            raise BaselineError(str(exc)) from None
        self.kind, self.seed, self.config, self.of, self.tower = kind, seed, dict(config), str(of), str(tower or "")
        self.layout = layout_from_config(self.config, self.tower or None)
        self._heads = None
        self._first = None  # (layer, LayerQK): the first layer with a form, made by check(), until make_layer takes it

    @property
    def text(self) -> str:
        """The source a task carries (module docstring)."""
        spec = {"kind": self.kind, "seed": self.seed, "of": self.of, "config": self.config}
        if self.tower:  # only then: a model of one tower keeps the text, and so the revision, it had without towers
            spec["tower"] = self.tower
        return PREFIX + json.dumps(spec, sort_keys=True, separators=(",", ":"))

    @property
    def revision(self) -> str:
        """``sha256:`` and 16 hex digits of :attr:`text` and the versions of the libraries that draw the heads."""
        libraries = ",".join(f"{p}=={_version(p)}" for p in LIBRARIES[self.kind])
        return "sha256:" + hashlib.sha256(f"{self.text}\n{libraries}".encode()).hexdigest()[:16]

    @property
    def provenance(self) -> Provenance:
        """No file: the package that draws the heads and a one-line note of what they are."""
        package = LIBRARIES[self.kind][0]
        return Provenance(package=f"{package}=={_version(package)}",
                          note=DESCRIPTION[self.kind].format(of=self.of, seed=self.seed))

    @property
    def heads(self):
        """The IidHeads or InitHeads that make the layers (made once: InitHeads builds the model on the meta
        device)."""
        if self._heads is None:
            self._heads = baseline_heads(self.config, self.kind, self.seed, self.tower or None)
        return self._heads

    def check(self) -> None:
        """For ``init``, make the first layer with a form (kept for its first ``make_layer``; a hybrid model's
        layer 0 may be Mamba or a convolution, which has no heads): the model is built and its initialisation
        checked (InitBaselineError) before anything is written. (Nothing to check for ``iid``.)"""
        if self.kind == "init" and self._first is None:
            layer = next(i for i in range(self.layout.n_layers) if self.layout.positional_of(i).kind != "no form")
            self._first = (layer, self.heads.layer(layer))

    def make_layer(self, layer: int):
        """Layer ``layer``'s heads (``pipeline.families.LayerQK``), as ``pipeline.run.tasks.read_layer`` takes
        them."""
        if self._first is not None and self._first[0] == layer:
            qk, self._first = self._first[1], None
            return qk
        return self.heads.layer(layer)


def is_baseline(source: str) -> bool:
    """Whether a task's source text is a baseline's (:attr:`BaselineSource.text`)."""
    return str(source).startswith(PREFIX)


def open_baseline(text: str) -> BaselineSource:
    """The :class:`BaselineSource` a task's source text describes."""
    spec = json.loads(text[len(PREFIX):])
    return BaselineSource(spec["kind"], spec["seed"], spec["config"], spec["of"], spec.get("tower", ""))
