"""The orchestrator: one lab, from the budget check to the manifest, with its pod always ended.

A lab's life, one module each (read them in this order):

- ``lab_config``   what a lab does (``LabConfig``) and how it ended (``LabOutcome``, the statuses)
- ``options``      the command-line flags that build a ``LabConfig`` (``tplab run``, ``tplab-tui``)
- ``pod_python``   ``--pod-python``: the interpreter a mock lab's pods run the pod side with
- ``providers``    where the lab gets its cloud: a real one, a running mock, or a mock started for it
- ``auto_pick``    ``--provider auto``: the cheapest interruptible offer across the clouds
- ``stream``       the merged event stream and its subscribers (``stream.jsonl`` on disk)
- ``facts``        what the lab has learned so far (pod, money, transport, results): plain records
- ``context``      what every phase works with (config, provider, stream, facts)
- ``preflight``    inputs, image, budget, pods of earlier labs, the price: refuse before spending
- ``job_check``    the job's own input checks, run here in a subprocess before anything is rented
- ``leftovers``    tplab's pods still alive (the provider's list + the instance records)
- ``guard_payload`` the pod's boot guard as it travels in the create call
- ``provision``    authorize, create (intent first), boot until SSH answers
- ``ssh_session``  connect, upload, launch, tail the job's events, heartbeat, fetch
- ``bundle``       what travels to the pod
- ``cost``         the cost ticker: accrued dollars, the 80% alert, the lab cap
- ``ending``       the two calls every way out makes: terminate, and verify gone
- ``teardown``     terminate, verify gone, settle the ledger, record (or detach)
- ``instances``    instance.json records that outlive a crashed client
- ``prediction``   results -> calibrated profile -> prediction, once per lab
- ``artifacts``    the closing artifacts (scaling-curve.png, manifest.json) from that prediction
- ``manifest``     manifest.json: the seed's fields and tplab's, every one redacted
- ``lesson_notes`` the manifest's paragraph on why TP is slower here, from the run's numbers
- ``proof_png``    proof-terminated.png, the provider's answer that the pod is gone, as a picture
- ``orchestrator`` the ``Lab`` that runs these in order and tears down on every exit

What the two faces consume is the view-model (``tplab.viewmodel``: ``LabState``); the headless
face is ``tplab.faces``, the dashboard ``tui/``. The lab's one money rule before it rents is
``tplab.money.worst_case``.

This file imports nothing: a face importing ``tplab.lab.options`` must not pay for asyncssh,
the provider or anything else here.
"""
