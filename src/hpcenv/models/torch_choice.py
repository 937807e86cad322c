"""The resolver's torch answer as data (``TorchChoice``): what ``decide/torch_choice``
decides, ``resolve`` prints and a plan holds (``models/plan.Plan.torch``, which re-exports
it). Its own module: an audit's fix asks for a torch build without the plan's types."""

from __future__ import annotations

from dataclasses import dataclass

from hpcenv.models import DEFAULT_INDEX_URL


@dataclass(frozen=True, kw_only=True)
class TorchChoice:
    """The resolver's answer (the ``resolve`` contract's ``torch`` object, docs/design.md).

    ``pin`` and ``index_base`` are what the choice was made *with*, as data: code that
    re-resolves (a project swap for another torch version) reads them here, never from
    the reason sentences or by taking ``index_url`` apart.
    """

    version: str | None  # exact version, e.g. "2.9.1"
    backend: str | None  # "cpu", "cu126", ...; None when nothing can run
    index_url: str | None  # "<base>/<backend>"; None when nothing can run
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None
    pin: str = "auto"  # the backend pin asked for: "auto" or a variant ("cu126", "cpu")
    index_base: str = DEFAULT_INDEX_URL  # the index base; index_url = f"{index_base}/{backend}"


__all__ = ["TorchChoice"]
