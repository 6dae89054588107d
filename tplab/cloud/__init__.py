"""Cloud providers: the Provider protocol and its RunPod implementation."""
