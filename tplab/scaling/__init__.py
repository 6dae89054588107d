"""The scaling model: the latency model and its crossover (``latency``), calibrating it from a
run (``calibration``), and drawing the curve (``chart``). Client side; no torch.
"""
