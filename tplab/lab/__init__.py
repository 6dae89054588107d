"""The orchestrator: one lab, from the budget check to the manifest, with its pod always ended.

A lab's life, one module each (read them in this order):

- ``config``      what a lab does (``LabConfig``) and how it ended (``LabOutcome``, the statuses)
- ``options``     the command-line flags that build a ``LabConfig`` (``tplab run``, ``tplab-tui``)
- ``providers``   where the lab gets its cloud: RunPod, a running mock, or a mock started for it
- ``stream``      the merged event stream and its subscribers (``stream.jsonl`` on disk)
- ``facts``       what the lab has learned so far (pod, money, transport, results): plain records
- ``context``     what every phase works with (config, provider, stream, facts)
- ``preflight``   inputs, budget, pods of earlier labs, the price: refuse before spending
- ``leftovers``   tplab's pods still alive (the provider's list + the instance records)
- ``provision``   authorize, create (intent first), boot until SSH answers
- ``ssh_session`` connect, upload, launch, tail the job's events, heartbeat, fetch
- ``cost``        the cost ticker: accrued dollars, the 80% alert, the lab cap
- ``teardown``    terminate, verify gone, settle the ledger, record (or detach)
- ``instances``   instance.json records that outlive a crashed client
- ``prediction``  results -> calibrated profile -> prediction, once per lab
- ``artifacts``   the closing artifacts (scaling-curve.png, manifest.json) from that prediction
- ``bundle``      what travels to the pod
- ``orchestrator`` the ``Lab`` that runs these in order and tears down on every exit
What the two faces consume (the view-model: ``LabState``, ``HeadlessView``) is ``tplab/viewmodel/``;
the dashboard lives in ``tui/``.

This file imports nothing: a face importing ``tplab.lab.options`` must not pay for asyncssh,
the provider or anything else here.
"""
