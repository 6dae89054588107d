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
    from tplab.money.budget import BudgetConfig, BudgetError, BudgetGuard
    try:
        conf = BudgetConfig.load(mock=mock).with_overrides(lab_cap_usd=lab_cap_usd,
                                                           phase_cap_usd=phase_cap_usd)
        summary = BudgetGuard.from_config(conf, mock=mock).summary()
    except BudgetError as exc:
        return Budget(source="ledger", problem=str(exc))
    except OSError as exc:
        return Budget(source="ledger", problem=f"the ledger could not be read ({exc.strerror or exc}"
                      f": {exc.filename or 'TPLAB_HOME'}); check TPLAB_HOME and its permissions")
    return Budget(cap_usd=summary.cap_usd, spent_usd=summary.spent_usd,
                  held_usd=summary.held_usd, remaining_usd=summary.remaining_usd,
                  lab_cap_usd=conf.lab_cap_usd,
                  needed_usd=conf.lab_cap_usd + conf.preflight_buffer_usd,
                  source="ledger", damaged_lines=len(summary.damaged),
                  holds=holds_text(summary.open_authorizations, mock))


def holds_text(auths: list, mock: bool) -> str | None:
    """'$3.00 by lab 20261203-134012-ab12cd (still running here, pid 4242)': who holds the
    money an open authorization keeps (the lab, by its instance record; whether its client
    still runs), or None when nothing is held."""
    if not auths:
        return None
    import socket

    from tplab.lab import instances
    from tplab.util.pids import pid_alive
    try:
        by_auth = {r.auth_id: r for r in instances.load_all(mock) if r.auth_id}
    except OSError:
        by_auth = {}
    host = socket.gethostname()
    parts = []
    for a in auths:
        rec = by_auth.get(a.auth_id)
        who = f"lab {rec.lab_id}" if rec is not None else f"{a.label} (authorization {a.auth_id})"
        if a.host == host and a.pid is not None and pid_alive(a.pid):
            state = f"still running here, pid {a.pid}: its hold is settled when it ends"
        elif a.host == host and a.pid is not None:
            state = "its client ended: the next lab's pre-flight settles it"
        else:
            state = f"from {a.host or 'another machine'}"
        parts.append(f"${a.amount_usd:.2f} by {who} ({state})")
    return "held: " + "; ".join(parts)


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

    from tplab.money.budget import BudgetError, BudgetGuard
    from tplab.util.pids import pid_alive
    try:
        auths = BudgetGuard.from_config(mock=mock).summary().open_authorizations
    except (BudgetError, OSError):
        return 0.0
    host = socket.gethostname()
    return sum(a.amount_usd for a in auths
               if a.host == host and a.pid is not None and not pid_alive(a.pid))
