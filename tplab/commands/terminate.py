"""`tplab terminate ID | --all`: terminate tplab pods and verify with the provider they are gone."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "terminate tplab pods (by id, or --all) and verify they are gone"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod_ids", nargs="*", metavar="ID", help="pod id(s) to terminate")
    parser.add_argument("--all", action="store_true", help="every live tplab pod")
    parser.add_argument("--mock", action="store_true",
                        help="the pods of the mock clouds running on this machine")
    from tplab.lab.options import add_provider_argument
    add_provider_argument(parser)
    parser.add_argument("--api-url", metavar="URL", default=None,
                        help="ask the (mock) cloud API at URL instead; its key comes from the "
                             "provider's key variable (`tplab check` names it)")
    from tplab.lab.ending import END_BOUND_S, SAY_EVERY_S
    parser.add_argument("--timeout", type=float, default=END_BOUND_S, metavar="S",
                        help="the bound on ending each pod: terminate calls and looks until "
                             "the provider shows it gone, whatever it answers; a line every "
                             f"{SAY_EVERY_S:.0f} s says what it is doing "
                             f"(default {END_BOUND_S:.0f})")


def _mock_targets(providers: list | None = None) -> tuple[list, dict]:
    """The providers of the mock clouds running on this machine (or those given: every cloud
    with a key), and which one lists each live pod (so `tplab terminate ID --mock` reaches a
    mock lab running in another terminal, and an id finds its cloud)."""
    from tplab.cloud.base import GONE_STATES
    from tplab.commands.status import mock_providers
    if providers is None:
        providers = [provider for _, provider in mock_providers()]
    by_pod = {pod.id: provider for provider in providers for pod in provider.list_pods()
              if pod.state.upper() not in GONE_STATES}
    return providers, by_pod


def retry_command(args: argparse.Namespace, pod_id: str) -> str:
    """The exact command that tries again to end ``pod_id`` as this one was asked."""
    parts = ["tplab terminate", pod_id]
    if getattr(args, "provider", None) and args.provider != "auto":
        parts.append(f"--provider {args.provider}")
    if args.mock:
        parts.append("--mock")
    if args.api_url:
        parts.append(f"--api-url {args.api_url}")
    return " ".join(parts)


def main(args: argparse.Namespace) -> int:
    import asyncio
    from tplab.cloud.base import AuthError, ProviderError
    from tplab.commands.status import cli_names, gather, no_key_at_all
    from tplab.lab.leftovers import end_pod
    from tplab.lab.providers import cli_provider
    if not args.pod_ids and not args.all:
        print("tplab terminate: name pod id(s) or pass --all (see `tplab status`).",
              file=sys.stderr)
        return 2
    none = no_key_at_all(args)
    if none:
        print(f"tplab terminate: {none}", file=sys.stderr)
        return 1
    live_mock_pods: set[str] | None = None
    settled: list[str] = []  # holds of ended labs whose pods the listing found gone
    try:
        if args.mock and not args.api_url:  # the mock clouds running on this machine
            providers, by_pod = _mock_targets()
            live_mock_pods = set(by_pod)
            if not providers and args.pod_ids:
                print("tplab terminate: no mock cloud is running on this machine, so no mock "
                      "pod is alive.", file=sys.stderr)
                return 1
            provider = providers[0] if providers else None  # for the holds dead clients left
            ids = list(args.pod_ids) + ([p for p in by_pod if p not in args.pod_ids]
                                        if args.all else [])
            pick = lambda pod_id: by_pod.get(pod_id, providers[0])  # noqa: E731
        elif len(names := cli_names(args)) > 1:  # every cloud with a key: find each id's
            providers, by_pod = _mock_targets([cli_provider(False, None, n) for n in names])
            provider = providers[0]
            ids = list(args.pod_ids) + ([p for p in by_pod if p not in args.pod_ids]
                                        if args.all else [])
            pick = lambda pod_id: by_pod.get(pod_id, providers[0])  # noqa: E731
        else:
            provider = cli_provider(args.mock, args.api_url, names[0])
            ids = list(args.pod_ids)
            if args.all:
                ids += [r["pod_id"] for r in gather(args.mock, args.api_url, names[0], settled)
                        if r["pod_id"] not in ids]
            pick = lambda pod_id: provider  # noqa: E731
    except ProviderError as exc:
        print(f"tplab terminate: {exc}", file=sys.stderr)
        return 1
    if not ids:
        print("No live tplab pods." if provider is not None else "No live tplab pods (no mock "
              "cloud is running; mock pods live only as long as their mock cloud).")
    for note in settled:
        print(note)
    failed = 0
    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    for pod_id in ids:  # one pod's failure never stops the others
        try:
            ended = asyncio.run(end_pod(pick(pod_id), pod_id, args.mock, args.timeout, say=say))
        except AuthError as exc:  # the key: the same for every pod, and nothing was ended
            print(f"tplab terminate: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # noqa: BLE001 - reported, and the next pod still goes
            failed += 1
            print(f"{pod_id}: could not be terminated ({exc}); check the provider console and "
                  "retry.", file=sys.stderr)
            continue
        if not ended.proof.gone:
            failed += 1
            report = ended.report
            from tplab.lab.ending import cloud_words
            noun, verb = cloud_words(pick(pod_id))
            sentence = (report.sentence(retry_command(args, pod_id), noun, verb) if report
                        else f"{noun} {pod_id} is not proven gone")
            print(f"tplab terminate: {sentence[0].upper()}{sentence[1:]}", file=sys.stderr)
            continue
        print(f"{pod_id}: gone (checked {ended.proof.checked_at}: "
              f"{json.dumps(ended.proof.answer, sort_keys=True)[:120]})")
        for note in ended.settled:
            print(f"{pod_id}: {note}")
    if args.all:  # and what dead clients left held with nothing billing against it (also when
        # every pod had already gone: a watchdog that ended the pod of a killed client)
        from tplab.lab.leftovers import reconcile_holds
        for note in reconcile_holds(provider, args.mock, live_mock_pods):
            print(note)
    return 1 if failed else 0
