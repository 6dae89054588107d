"""The orchestrator: one lab, from the budget check to the manifest, with its pod always ended.

A lab is a few owners, each holding its own state and its rule, built by the ``Lab`` and handed
to the stages that need them (no record that every stage reads and writes). Read in this order:

The owners

- ``lab_config``   what a lab does (``LabConfig``: its caps, the job's arguments, the commands it
                   names) and how it ended (``LabOutcome``, the statuses, ``LabStop``)
- ``stream``       the merged event stream and its subscribers (``stream.jsonl`` on disk), and
                   when each of the lab's stages began
- ``report``       what the lab will say at its end (``LabReport``): its outcome, the job's
                   results or the figures streamed before it stopped, its files, the transport
- ``pod``          the lab's pod and its end (``LabPod``): intent record, create, the provider's
                   answers, terminate + verify gone, the proof
- ``ssh_session``  the SSH session with the pod (``PodSession``): connect, upload, launch, tail the
                   job's events, heartbeat, watch the pod, fetch
- the money is ``tplab.money.lab_money.LabMoney`` (caps, hold, cost figure)

Before a lab, what builds it

- ``options``      the command-line flags that build a ``LabConfig`` (``tplab run``, ``tplab-tui``)
- ``pod_python``   ``--pod-python``: the interpreter a mock lab's pods run the pod side with
- ``providers``    where the lab gets its cloud: a real one, a running mock, or a mock started for it
- ``auto_pick``    ``--provider auto``: the cheapest interruptible offer across the clouds

The stages, in the order a lab takes them (each a function of the owners it needs)

- ``preflight``    inputs, image, budget, pods of earlier labs, the price: refuse before spending
- ``job_check``    the job's own input checks, run here in a subprocess before anything is rented
- ``provision``    authorize, create (intent first), boot until SSH answers
- ``guard_payload`` the pod's boot guard as it travels in the create call
- ``bundle``       what travels to the pod
- ``cost``         the cost ticker: accrued dollars, the 80% alert, the lab cap
- ``ending``       the bounded end every way out makes: terminate, and verify gone
- ``teardown``     every way out: the pod ended and proven gone, the ledger settled (or detach)
- ``instances``    instance.json records that outlive a crashed client
- ``leftovers``    tplab's pods still alive (the provider's list + the instance records), ending them

The report's files (what the lab leaves in its folder)

- ``prediction``   results -> calibrated profile -> prediction, once per lab
- ``artifacts``    the closing artifacts (scaling-curve.png, manifest.json) from that prediction
- ``manifest``     manifest.json: the lab sheet's fields and tplab's, every one redacted
- ``lesson_notes`` the manifest's paragraph on why TP is slower here, from the run's numbers
- ``proof_png``    proof-terminated.png, the provider's answer that the pod is gone, as a picture

- ``orchestrator`` the ``Lab`` that builds the owners, runs the stages in order and tears down on
                   every exit

What the two faces consume is the view-model (``tplab.viewmodel``: ``LabState``); the headless
face is ``tplab.faces``, the dashboard ``tui/``. The lab's one money rule before it rents is
``tplab.money.worst_case``; its caps are resolved once, by ``tplab.money.caps.resolve_caps``
(``LabConfig.caps``).

This file imports nothing: a face importing ``tplab.lab.options`` must not pay for asyncssh,
the provider or anything else here.
"""
