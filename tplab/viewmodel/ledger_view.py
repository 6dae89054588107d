"""The budget as the ledger has it right now, for a face to show before (and after) a lab.

Why: the one figure a user must know before pressing Start is what remains under the cap. The
lab's own ``budget`` events only come once a lab runs; this reads the same ledger and config the
lab's pre-flight will (``tplab.money.budget``, standard library only: the dashboard's first paint
reads it without importing torch or the provider) and says whether a lab would pass pre-flight.
"""

from __future__ import annotations

from tplab.viewmodel.parts import Budget


def read_ledger_budget(mock: bool = False, lab_cap_usd: float | None = None,
                       phase_cap_usd: float | None = None) -> Budget:
    """cap, spent, held, remaining, the lab cap and what pre-flight needs, and how many ledger
    lines are damaged (left out of those figures, listed by `tplab budget`); ``problem`` set
    (one sentence) instead when the config or the ledger cannot be read."""
    from tplab.money.budget import BudgetError
    from tplab.money.caps import resolve_caps
    try:
        caps = resolve_caps(mock=mock, lab_cap_usd=lab_cap_usd, phase_cap_usd=phase_cap_usd)
        summary = caps.guard().summary()
    except BudgetError as exc:
        return Budget(source="ledger", problem=str(exc))
    except OSError as exc:
        return Budget(source="ledger", problem=f"the ledger could not be read ({exc.strerror or exc}"
                      f": {exc.filename or 'TPLAB_HOME'}); check TPLAB_HOME and its permissions")
    return Budget(cap_usd=summary.cap_usd, spent_usd=summary.spent_usd,
                  held_usd=summary.held_usd, remaining_usd=summary.remaining_usd,
                  lab_cap_usd=caps.lab_cap_usd, needed_usd=caps.needed_usd,
                  source="ledger", damaged_lines=len(summary.damaged),
                  holds=holds_text(summary.open_authorizations, mock),
                  held_for=held_for_pods(summary.open_authorizations, mock))


def hold_words(auths: list, mock: bool) -> list[str]:
    """Each open authorization in words: what it holds, for which lab, and why it is still
    held ('$3.00 by lab 20261203-134012-ab12cd (still running here, pid 4242: ...)'; for a
    pod its ended lab could not prove gone: '$3.00 for pod 4711, not yet proven gone (lab
    ...): `tplab terminate 4711 --mock` settles it once the provider shows it gone')."""
    import socket

    from tplab.lab import instances
    from tplab.util.pids import pid_alive
    try:
        by_auth = {r.auth_id: r for r in instances.load_all(mock) if r.auth_id}
    except OSError:
        by_auth = {}
    host = socket.gethostname()
    out = []
    for a in auths:
        rec = by_auth.get(a.auth_id)
        if rec is not None and rec.lab_ended and rec.pod_id and rec.open:
            where = f" --provider {rec.provider}" if rec.provider not in ("", "?") else ""
            out.append(f"${a.amount_usd:.2f} for pod {rec.pod_id}, not yet proven gone (lab "
                       f"{rec.lab_id}): `tplab terminate {rec.pod_id}{where}"
                       f"{' --mock' if mock else ''}` settles it once the provider shows it gone")
            continue
        who = f"lab {rec.lab_id}" if rec is not None else f"{a.label} (authorization {a.auth_id})"
        if a.host == host and a.pid is not None and pid_alive(a.pid):
            state = f"still running here, pid {a.pid}: its hold is settled when it ends"
        elif a.host == host and a.pid is not None:
            state = "its client ended: the next lab's pre-flight settles it"
        else:
            state = f"from {a.host or 'another machine'}"
        out.append(f"${a.amount_usd:.2f} by {who} ({state})")
    return out


def held_for_pods(auths: list, mock: bool) -> str | None:
    """'pod 4711 not yet proven gone' for the open authorizations that ended labs keep for
    pods the provider has not shown gone; None when there is none."""
    from tplab.lab import instances
    try:
        recs = {r.auth_id: r for r in instances.load_all(mock) if r.auth_id}
    except OSError:
        return None
    pods = [recs[a.auth_id].pod_id for a in auths if a.auth_id in recs
            and recs[a.auth_id].lab_ended and recs[a.auth_id].open and recs[a.auth_id].pod_id]
    if not pods:
        return None
    return f"pod{'s' if len(pods) > 1 else ''} {', '.join(map(str, pods))} not yet proven gone"


def holds_text(auths: list, mock: bool) -> str | None:
    """'held: ...' with who holds what of the budget (``hold_words``), or None when nothing
    is held."""
    if not auths:
        return None
    return "held: " + "; ".join(hold_words(auths, mock))


def preflight_sentence(b: Budget) -> str | None:
    """Why a lab would be refused by the budget's pre-flight rule, or None when it would pass
    (or the figures are not known)."""
    if b.problem and b.cap_usd is None:
        return b.problem
    if b.preflight_ok is False:
        return (f"Budget pre-flight would fail: remaining ${b.remaining_usd:.2f} is below the "
                f"${b.needed_usd:.2f} needed (lab cap ${b.lab_cap_usd:.2f} + buffer)"
                + (f"; {b.holds}" if b.holds else "") + "; nothing was created — see "
                "`tplab budget`.")
    return None


def dead_clients_held_usd(mock: bool = False) -> float:
    """Dollars held by labs of this machine whose client process has ended (SIGKILL, a crash):
    the lab's pre-flight settles those holds (``leftovers.reconcile_holds``) before it checks
    the budget, so a start is not refused for them. 0.0 when the ledger cannot be read."""
    import socket

    from tplab.money.budget import BudgetError
    from tplab.money.caps import resolve_caps
    from tplab.util.pids import pid_alive
    try:
        auths = resolve_caps(mock=mock).guard().summary().open_authorizations
    except (BudgetError, OSError):
        return 0.0
    host = socket.gethostname()
    return sum(a.amount_usd for a in auths
               if a.host == host and a.pid is not None and not pid_alive(a.pid))
