"""The dashboard's widgets, one module per panel; each redraws itself from a ``LabState``."""
