"""GRPO training in notebook 02: where it trains (`backends`: the CPU, its precision and threads, or GPUs; on
GPUs also `gpu_plan`, `gpu_recipes`, `launcher`), the reward functions TRL calls (`rewards`), the rollouts sampled
from a llama.cpp policy server (`policy_server`, `server_rollouts`) and the loss over them in chunks
(`chunked_logps`), memory (`memory`), time per step (`step_timer`), the run's folder (`run_folder`), the
evaluation before and after and the weights it moved (`before_after`), and how a run is shown: its log and live
chart (`training_log`) and what it learned (`verdict`). Which reward a run trains is said by helpers.reward_choice."""
