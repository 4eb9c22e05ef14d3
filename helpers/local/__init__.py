"""What makes the course run on a laptop with no key and no network: the local model servers
(llama.cpp for the packaged GGUF, transformers for trained checkpoints), the Weave clients and the
trace store on disk, the trace viewer and the offline wandb reader that stand in for the W&B web UI,
and the GGUF <-> transformers conversion. Notebooks reach them through the top-level helpers."""
