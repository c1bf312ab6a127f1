"""Will it fit? vLLM's startup memory arithmetic before launch (`kb fit`): the model's shape from
config.json (kb/fit/shape.py), the KV cache layout vLLM builds (kb/fit/kv.py), the worker's
memory budget and the memory errors it raises (kb/fit/memory.py), rendered by kb/fit/report.py."""
