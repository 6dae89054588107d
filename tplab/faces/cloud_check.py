"""Can a lab run right now? Asked of the cloud, read-only (what `tplab check` prints and the
dashboard shows in its Instance panel before Start; here, not in the command, because both
faces use it).

Why: a first lab on a real account should not be the way to learn that the key is wrong, the
balance is empty, the GPU is out of stock or the cloud no longer offers spot. ``gather_check``
asks one cloud (by registry name), creating nothing: which key (and from where) and whether the
cloud accepts it; the account balance; the on-demand price (and stock) for the lab's GPUs;
whether spot (interruptible) capacity is offered right now (and its bid); whether the lab's
worst case fits the lab cap and the ledger; the image the pod would get (``--image``, else the
default for the cloud and the GPU's generation) and whether it can drive the GPU, and, per
offer (a Vast host; RunPod's hosts of one CUDA version), whether that host can run it. With ``--provider auto`` (or keys for several
clouds) `tplab check` asks each and shows them side by side. It returns a ``CheckReport`` (one ``CheckLine`` per fact), which the dashboard can show
before Start; `tplab check` prints it and exits non-zero when a lab could not run.

Import-light: the standard library at module level; the provider, its SDK and the mock cloud
are imported inside ``gather_check``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tplab.money.worst_case import worst_case

if TYPE_CHECKING:
    from tplab.money.caps import Caps

DEFAULT_GPU_TYPE = "NVIDIA GeForce RTX 4090"
#: offers the dashboard's rows show (the command prints every offer the quote judged)
SHOWN_ROWS = 3


@dataclass(frozen=True)
class CheckLine:
    name: str            # key, image, hosts, balance, on-demand, spot, budget; offer
    ok: bool | None      # True: fine; False: a lab could not run; None: worth knowing
    text: str
    short: str = ""      # the same in a few words, for the dashboard's small panel ("": text)


@dataclass
class CheckReport:
    mock: bool
    api_url: str | None
    gpu_type: str
    gpus: int
    spot: bool                         # the lab this check is for: spot unless --on-demand
    key_source: str | None = None
    #: True: the cloud answered a read only an accepted key gets; False: refused, or not
    #: checked (``key_checked`` says which)
    key_ok: bool = False
    key_checked: bool = False
    balance_usd: float | None = None
    on_demand_usd_per_hr: float | None = None
    availability: str | None = None
    spot_offered: bool | None = None
    spot_usd_per_hr: float | None = None
    lab_cap_usd: float | None = None
    phase_cap_usd: float | None = None
    worst_case_usd: float | None = None
    provider: str = ""                 # the cloud asked (its registry name)
    image: str = ""                    # the image the pod would get
    lines: list[CheckLine] = field(default_factory=list)
    #: per offer (cheapest first), whether its host can run the image; not part of ``can_run``
    #: (the lab takes the cheapest that can: the "hosts" line says whether one can)
    offers: list[CheckLine] = field(default_factory=list)

    @property
    def can_run(self) -> bool:
        return bool(self.lines) and all(line.ok is not False for line in self.lines)

    def add(self, name: str, ok: bool | None, text: str, short: str = "") -> None:
        self.lines.append(CheckLine(name, ok, text, short))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "can_run": self.can_run}

    def rows(self) -> list[tuple[str, str]]:
        """The dashboard's rows: (name, marked sentence) per line and whether a lab can run,
        then the cheapest offers. Its Instance panel is small, so the image and hosts lines
        come in a few words, right after the key when they are a problem (they say why a lab
        cannot run) and after the verdict when they are fine."""
        mark = {True: "✓", False: "✗", None: "·"}

        def row(line: CheckLine, short: bool = False) -> tuple[str, str]:
            return line.name, f"{mark[line.ok]} {(line.short if short else '') or line.text}"
        late = ("image", "hosts")
        problems = [row(x, True) for x in self.lines if x.name in late and x.ok is not True]
        out: list[tuple[str, str]] = []
        for line in self.lines:
            if line.name not in late:  # a key not checked: its few words (why: the command)
                out.append(row(line, short=line.name == "key" and line.ok is None))
                if line.name == "key":
                    out += problems
        if not any(x.name == "key" for x in self.lines):
            out = problems + out
        out.append(("can run", "✓ yes" if self.can_run else "✗ no: nothing would be created"))
        out += [row(x, True) for x in self.lines if x.name in late and x.ok is True]
        out += [row(x, True) for x in self.offers[:SHOWN_ROWS]]
        return out


def gather_check(*, mock: bool = False, api_url: str | None = None,
                 gpu_type: str = DEFAULT_GPU_TYPE, gpus: int = 2, spot: bool = True,
                 lab_cap_usd: float | None = None, phase_cap_usd: float | None = None,
                 wall_cap_s: float = 7200.0, provider: Any = None, name: str | None = None,
                 image: str | None = None) -> CheckReport:
    """Every fact `tplab check` prints (see the module docstring). Creates nothing; in ``--mock``
    mode without ``api_url`` a mock cloud is started for the check and stopped after it.
    ``image``: the lab's ``--image`` (None: the default for the cloud and the GPU). The caps are
    the lab's (``tplab.money.caps.resolve_caps`` with ``--lab-cap`` and ``--phase-cap``)."""
    from tplab.cloud import registry
    from tplab.money.budget_config import BudgetError
    from tplab.money.caps import resolve_caps
    money: Caps | str
    try:
        money = resolve_caps(mock=mock, lab_cap_usd=lab_cap_usd, phase_cap_usd=phase_cap_usd,
                             wall_cap_s=wall_cap_s)
    except BudgetError as exc:  # said on the budget line; the cloud is still asked
        money = str(exc)
    named = name
    if not name:  # none named: RunPod's mock; with no key at all, the cloud a first lab needs
        name = registry.DEFAULT if mock or api_url or registry.configured() \
            else registry.FIRST_KEY_ORDER[0]
    report = CheckReport(mock=mock, api_url=api_url, gpu_type=gpu_type, gpus=gpus, spot=spot,
                         provider=name, image=image or "")
    if provider is not None:
        report.key_source = "the caller's provider"
        _ask(report, provider, money, wall_cap_s)
        return report
    if mock and not api_url:
        cloud = registry.package(name).start_mock()
        try:
            report.api_url = cloud.api_url
            report.key_source = "the mock cloud's own key"
            from tplab.lab.providers import MOCK_KEY, provider_for
            _ask(report, provider_for(cloud.api_key, cloud.api_url, name, MOCK_KEY), money,
                 wall_cap_s)
        finally:
            cloud.stop()
        return report
    from tplab.cloud.base import ProviderError
    from tplab.lab.options import api_url_problem
    problem = api_url_problem(mock, api_url)
    if problem:
        report.add("key", False, problem)
        return report
    found = registry.package(name).find_key()
    if found is None:
        none_at_all = not named and not registry.configured()
        report.add("key", False, registry.no_key_at_all() if none_at_all
                   else registry.package(name).NO_KEY, "no API key found")
        return report
    report.key_source = found.source
    from tplab.lab.providers import provider_for, real_api_url
    try:
        url = api_url if mock else real_api_url(api_url, name)
        prov = provider_for(found.key, url, name, found.source)
    except ProviderError as exc:
        report.add("key", False, str(exc))
        return report
    report.api_url = getattr(prov, "api_base_url", url)
    _ask(report, prov, money, wall_cap_s)
    return report


def where_asked(report: CheckReport) -> str:
    from tplab.cloud.registry import label
    name = label(report.provider)
    return f"the mock {name} cloud" if report.mock else name


def _key(report: CheckReport, provider: Any) -> bool:
    """The "key" line, from a read only an accepted key is answered: the account's pods (RunPod
    ``GET /v2/pods``, Vast ``GET /api/v1/instances``). Refused: the line says so and False (the
    rest cannot be asked). No answer: the key is "not checked", and why, never "accepted"."""
    from tplab.cloud.base import AuthError, ProviderError
    from tplab.keys.redact import error_text
    where = where_asked(report)
    try:
        provider.list_pods()
    except AuthError as exc:
        report.key_checked = True
        said = error_text(exc)
        report.add("key", False, said if str(report.key_source) in said else
                   f"{said.rstrip('.')}; the key used came from {report.key_source}.")
        return False
    except ProviderError as exc:
        report.add("key", None, f"not checked: {where} did not answer the read that proves a "
                   f"key ({error_text(exc).rstrip('.')}), so whether it accepts the key from "
                   f"{report.key_source} is unknown", "not checked: no answer")
        return True
    report.key_ok = report.key_checked = True
    report.add("key", True, f"{where} accepts the API key (from {report.key_source})")
    return True


def _ask(report: CheckReport, provider: Any, money: Caps | str, wall_cap_s: float) -> None:
    from tplab.cloud.base import AuthError, ProviderError
    from tplab.cloud.image_fit import choose_image, gpu_fit
    from tplab.keys.redact import error_text
    gpus, gpu = report.gpus, report.gpu_type
    choice = choose_image(report.provider, gpu, report.image or None)
    report.image = choice.image
    fit = gpu_fit(choice, gpu, report.provider)
    if not _key(report, provider):
        return
    try:
        quote = provider.quote(gpu, gpus, choice.image)
    except AuthError as exc:
        report.key_ok = False
        report.add("key", False, error_text(exc))
        return
    except ProviderError as exc:
        _image_line(report, choice, fit)
        report.add("on-demand", False, error_text(exc))
        return
    _image_line(report, choice, fit)
    _hosts(report, quote, image_ok=fit.ok is not False, image_cuda=choice.cuda)
    report.on_demand_usd_per_hr = quote.on_demand_usd_per_hr
    report.availability = quote.availability
    report.spot_offered = quote.spot_offered
    report.spot_usd_per_hr = quote.spot_usd_per_hr
    try:
        report.balance_usd = provider.balance()
    except ProviderError as exc:
        report.add("balance", None, f"the balance could not be read ({error_text(exc)})")
    price = quote.spot_usd_per_hr if report.spot else quote.on_demand_usd_per_hr
    if quote.on_demand_usd_per_hr is not None:
        report.add("on-demand", quote.on_demand_available or (None if report.spot else False),
                   f"{gpus}x {gpu} on-demand ${quote.on_demand_usd_per_hr:.3f}/h"
                   + (f", stock {quote.availability}" if quote.availability else ""))
    else:
        report.add("on-demand", None if report.spot else False,
                   f"{where_asked(report)} quotes no on-demand price for {gpus}x {gpu}")
    if quote.spot_available and quote.spot_usd_per_hr is not None and quote.spot_price_note:
        report.add("spot", True, f"spot offered now for {gpus}x {gpu}: "
                   f"{quote.spot_price_note}", f"spot ${quote.spot_usd_per_hr:.3f}/h (tplab's bid)")
    elif quote.spot_available and quote.spot_usd_per_hr is not None:
        report.add("spot", True, f"spot offered now: minimum bid ${quote.spot_usd_per_hr:.3f}/h "
                   f"for {gpus}x {gpu}")
    else:
        why = quote.spot_note or "no spot offer"
        hint = (" — the default lab cannot run; `tplab run --on-demand` can"
                if report.spot and quote.on_demand_available else "")
        report.add("spot", False if report.spot else None, f"spot not available: {why}{hint}")
    if report.balance_usd is not None:
        worst = worst_case(price or 0.0, wall_cap_s, report.balance_usd)  # against the balance
        ok: bool | None = True
        if report.balance_usd <= 0:
            ok = False
        elif price and not worst.fits:
            ok = None
        report.add("balance", ok, f"account balance ${report.balance_usd:.2f}"
                   + ("" if ok else f" (the lab's worst case is {worst.text()}; the provider "
                                    "stops pods when the balance runs out)"))
    _budget(report, price, money)


def _image_line(report: CheckReport, choice: Any, fit: Any) -> None:
    """The "image" line: the image, what it holds and why it was chosen; whether it can drive
    the GPU (refused or not known: that sentence first)."""
    if fit.ok:
        report.add("image", True, f"{choice.describe()}; {fit.reason}", choice.image)
    else:
        report.add("image", fit.ok, f"{fit.reason} ({choice.image}: {choice.why})",
                   f"{choice.image}: {fit.clause}")


def _hosts(report: CheckReport, quote: Any, image_ok: bool = True,
           image_cuda: str | None = None) -> None:
    """The "hosts" line (can any offer's host run the image?) and one line per offer."""
    for host in quote.hosts:
        price = f" ${host.usd_per_hr:.3f}/h" if host.usd_per_hr is not None else ""
        what = f" ({host.price_what})" if price and host.price_what else ""
        cuda = (f", driver CUDA {host.host_cuda}"
                if host.host_cuda and host.host_cuda not in host.offer else "")
        busy = "" if host.available else " (no capacity there now)"
        report.offers.append(CheckLine("offer", host.ok,
                                       f"{host.offer}{price}{what}{cuda}{busy}: {host.why}",
                                       f"{host.offer}{price}{cuda}{busy}"))
    if quote.image_refusal and not image_ok:  # the image line says why
        report.add("hosts", False, "no offer can run the image (see the image line)",
                   "no offer can run the image")
        return
    if quote.image_refusal:
        from tplab.cloud.images import cuda_tuple
        cudas = [h.host_cuda for h in quote.hosts if cuda_tuple(h.host_cuda)]
        newest = max(cudas, key=lambda c: cuda_tuple(c) or (0, 0), default=None)
        short = (f"drivers run CUDA {newest} at most; the image needs {image_cuda}"
                 if newest and image_cuda else "no offered host can run the image")
        report.add("hosts", False, f"{quote.image_refusal}; a lab would be refused before "
                   "anything is rented", short)
        return
    if not quote.hosts:
        return
    good = [h for h in quote.hosts if h.ok is not False]
    ok = True if any(h.ok for h in good) else None
    if report.provider == "runpod":
        left = [h.host_cuda for h in quote.hosts if h.ok is False]
        allowed = ", ".join(str(h.host_cuda) for h in good)
        report.add("hosts", ok, f"the create sends allowedCudaVersions {allowed}"
                   + (f", leaving out hosts with CUDA {', '.join(map(str, left))}" if left else "")
                   + ": the pod lands only where its driver runs the image",
                   f"allowedCudaVersions {allowed}")
        return
    if not good:
        report.add("hosts", None, "no offer shown can run the image")
        return
    best = next((h for h in good if h.ok), good[0])  # a known fit before an unknown host
    price = f" at ${best.usd_per_hr:.3f}/h" if best.usd_per_hr is not None else ""
    what = f" ({best.price_what})" if price and best.price_what else ""
    verb = "can" if ok else "may"
    shown = (f"{len(good)} of the {len(quote.hosts)} cheapest offers {verb} run the image"
             if len(quote.hosts) > 1 else f"the one offer found {verb} run the image")
    report.add("hosts", ok, f"{shown}; the lab takes {best.offer}{price}{what}",
               f"{len(good)} of {len(quote.hosts)} run it; takes {best.offer}{price}")


def _held_for_pods(report: CheckReport, auths: list) -> None:
    """A "held" line for money an ended lab keeps for a pod not yet proven gone (it counts
    against the budget until a `tplab terminate` or `tplab status` sees the pod gone)."""
    from tplab.viewmodel.ledger_view import hold_words
    said = [w for w in hold_words(auths, report.mock) if "not yet proven gone" in w]
    if said:
        report.add("held", None, "; ".join(said), "held for a pod not yet proven gone")


def _budget(report: CheckReport, price: float | None, money: Caps | str) -> None:
    """The "budget" line: the ledger's pre-flight under the lab's caps, and the offer's worst
    case against the lab cap (``Caps.worst_case``: the one rule)."""
    if isinstance(money, str):
        report.add("budget", False, f"the budget could not be read: {money}")
        return
    try:
        guard = money.guard()
        pre = guard.check_preflight(money.lab_cap_usd, money.preflight_buffer_usd)
        damaged = guard.summary().damaged_note()
    except Exception as exc:  # noqa: BLE001 - a broken ledger is a finding
        report.add("budget", False, f"the budget could not be read: {exc}")
        return
    if damaged:  # a lab still runs (the pre-flight counts the good lines), but say it
        report.add("ledger", None, damaged[0].upper() + damaged[1:],
                   "damaged ledger lines: see `tplab budget`")
    report.lab_cap_usd = money.lab_cap_usd
    report.phase_cap_usd = money.phase_cap_usd
    _held_for_pods(report, guard.summary().open_authorizations)
    if not pre.ok:
        report.add("budget", False, pre.message)
        return
    if price is None:
        report.add("budget", None, f"ledger fine ({pre.message}); no price to check against "
                   f"the {money.describe()}")
        return
    worst = money.worst_case(price)
    report.worst_case_usd = round(worst.usd, 6)
    kind = "spot" if report.spot else "on-demand"
    report.add("budget", worst.fits, f"{kind} worst case {worst.text()} ({worst.hours:.2f} h "
               f"wall cap) {'within' if worst.fits else 'ABOVE'} the lab cap "
               f"${money.lab_cap_usd:.2f} (phase cap ${money.phase_cap_usd:.2f}); "
               f"{pre.message}")
