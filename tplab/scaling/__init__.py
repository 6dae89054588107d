"""The scaling model: the latency model and its crossover (``latency``), calibrating it from a
run (``calibration``; ``split_compare``: its worst error with TP's terms fitted each way), and
drawing the curve (``chart``). Client side; no torch.
"""
