"""Refuse a start that cannot work, before anything exists: one sentence, no lab folder.

Why in the faces: ``tplab run`` and the dashboard's Start both build a ``Lab``, which makes its
folder and writes a FAILED manifest even when it could never have begun (no API key, a missing
or unreadable input file, ``--gpus 1``, a budget that fails pre-flight, an image that cannot
drive the lab's GPU). Those are the user's to fix, not a lab's history; this checks them first,
from local facts only (no network, no torch), and the lab's own pre-flight still checks them
again.
"""

from __future__ import annotations

import os
from typing import Any


def _names(config: Any, registry: Any) -> list[str]:
    name = config.provider_name()
    return list(registry.PROVIDERS) if name == registry.AUTO else [name]


def _image_refusal(config: Any, names: list[str]) -> str | None:
    """Why the pod's image cannot drive the lab's GPU on any of ``names`` (the torch range, the
    GPU's kernels, sshd on RunPod, a compiler for --compile), or None."""
    from tplab.cloud.image_fit import choose_image, gpu_fit
    image, gpu, compile = getattr(config, "image", None), config.gpu_type, config.compile
    fits = [gpu_fit(choose_image(n, gpu, image, compile=compile), gpu, n, compile=compile)
            for n in names]
    if not fits or any(f.ok is not False for f in fits):
        return None
    reason = fits[0].reason
    return f"{reason[0].upper()}{reason[1:]}. Nothing was created."


def refusal(config: Any) -> str | None:
    """One sentence saying why a lab with ``config`` (a ``LabConfig``) would be refused before
    it creates anything, or None."""
    from tplab.lab.preflight import input_problem
    problem = input_problem(config)
    if problem:
        return problem
    if config.out_dir:  # one run a folder: a finished lab is never overwritten, nor mixed
        from tplab.home.lab_folders import out_dir_problem
        bad_out = out_dir_problem(config.out_dir)
        if bad_out:
            return f"{bad_out} Nothing was created."
    from tplab.cloud import registry
    try:
        names = _names(config, registry)
    except registry.UnknownProviderError as exc:
        return f"{exc} Nothing was created."
    image = _image_refusal(config, names)
    if image:
        return image
    if config.mock and config.api_url:
        var = registry.package(names[0]).KEY_VAR
        if not os.environ.get(var, "").strip():
            return f"--api-url needs that cloud's API key in {var}. Nothing was created."
    if not config.mock and not any(registry.package(n).find_key() for n in names):
        if len(names) > 1:   # no cloud named and no key anywhere: say every cloud's key
            return registry.no_key_at_all()
        return (" ".join(registry.package(n).NO_KEY for n in names)
                + " Or use --mock to run against the local mock cloud.")
    from tplab.viewmodel.ledger_view import (dead_clients_held_usd, preflight_sentence,
                                             read_ledger_budget)
    budget = read_ledger_budget(config.mock, config.lab_cap_usd, config.phase_cap_usd)
    sentence = preflight_sentence(budget)
    if sentence and budget.preflight_ok is False and budget.remaining_usd is not None:
        # holds that killed clients left are settled by the lab's own pre-flight first
        freed = dead_clients_held_usd(config.mock)
        if freed and budget.remaining_usd + freed >= (budget.needed_usd or 0.0):
            return None
    return sentence
