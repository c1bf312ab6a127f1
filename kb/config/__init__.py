"""vLLM's configuration read from its own source (never imported): the `vllm serve` flags with
their defaults, choices, help and the config class and field each sets."""
