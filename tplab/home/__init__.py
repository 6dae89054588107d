"""What tplab keeps on this machine and how it keeps it safe: where its state lives
(``paths``: TPLAB_HOME), the mock clouds running here (``mock_clouds``), and keeping secrets out
of every text it shows or writes (``redact``). Client side; standard library only.
"""
