"""A lab's money on this machine: the caps (``budget_config``), the append-only ledger
(``ledger``), the guard that authorizes, records and settles against them (``budget``), and the
one record that carries a lab's dollars from authorize to the manifest (``lab_money``).
Client side; standard library only.
"""
