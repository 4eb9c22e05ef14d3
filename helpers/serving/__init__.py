"""The model behind the course's OpenAI-compatible endpoint, on this machine: the endpoint a notebook talks to
(`endpoint`), the llama.cpp server for the packaged GGUF (`llama_server`, its child `llama_child`), the
transformers server for trained checkpoints (`hf_server`, `hf_child`), the child processes they run in
(`child_process`, `child_guard`), and the model's preparation: GGUF -> transformers (`gguf_convert`),
transformers -> GGUF (`gguf_export`), once ahead of a workshop (`prepare`)."""
