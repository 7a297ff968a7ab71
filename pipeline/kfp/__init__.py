"""Kubeflow Pipelines: the compiled KFP v2 spec and what open-source KFP needs on top of TFX's, the check of a
spec against the backend's admission rules, the steps' container entry point, and the API client (submit,
schedule)."""
