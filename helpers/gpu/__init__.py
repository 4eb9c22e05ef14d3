"""The multi-GPU backend of notebook 02: verifiers' own GRPOTrainer with a vLLM server (>= 2 GPUs)."""
