"""Will it fit? vLLM's startup memory arithmetic before launch (`kb fit`): the model's shape from
config.json (kb/fit/shape.py), the KV cache layout vLLM builds (kb/fit/kv.py), the worker's
memory budget and the memory errors it raises, the first failure only (kb/fit/memory.py), the
smallest change of one flag that fits, proved by sizing it again (kb/fit/suggest.py), rendered by
kb/fit/report.py."""
