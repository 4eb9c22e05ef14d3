"""What makes the course run on a laptop with no key and no network: the local model servers
(llama.cpp for the packaged GGUF, transformers for trained checkpoints), the Weave trace store on
disk, and the GGUF <-> transformers conversion. Notebooks do not call these directly."""
