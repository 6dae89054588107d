"""`tplab handin`: a finished lab and the phase's ledger, laid out where the lab sheets name them.

``spend_table`` writes the phase's spend table (experiments/35-cloud-budget.md) from the ledger;
``gather`` plans every file of the hand-in, refuses to overwrite a student's different file, and
writes the rest. Client side: no torch.
"""
