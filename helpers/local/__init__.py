"""What makes the course run on a laptop with no key and no network: the local model servers
(llama.cpp for the packaged GGUF, transformers for trained checkpoints), notebook 02's policy server,
server rollouts and run folder, the Weave clients and the trace store on disk, the trace viewer and
the offline wandb reader that stand in for the W&B web UI, the GGUF <-> transformers conversion, and
the scrubbing of secrets from everything written. Notebooks reach most of it through the top-level
helpers; notebook 02 imports its rollout server, trainer and run folder from here."""
