"""The wire between the client and a pod: SSH (connect, upload, launch detached, heartbeat,
fetch: ``remote``) and the tail of the job's event file with resume (``event_tail``). Client side;
the events themselves are decoded by ``tplab.records.events`` (one decoder for both sides).
"""
