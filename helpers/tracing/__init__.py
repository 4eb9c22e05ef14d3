"""Traces and metrics of a run, in the cloud (W&B Weave, wandb) or on this machine: the session a notebook
opens (`session`), the Weave clients it runs on (`weave_clients`), the local trace store (`store`, its files
`records`, its answers to calls queries `call_queries`) and its upload to W&B (`replay`), the trace viewer and
the notebooks' views of traces (`viewer`, `views`), offline wandb runs read back (`wandb_offline`), and notebook
04's bridge from verifiers v1 to both (`v1_bridge`)."""
