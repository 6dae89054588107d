"""MiniGPT-grammar: a ~0.5M-parameter decoder-only transformer that corrects English grammar.

It is the model the TP lab shards across ranks. Pod-side code: imports only torch and the standard
library. Modules: ``config`` (hyper-parameters), ``tokenizer`` (word-level vocabulary), ``gpt``
(single-device and tensor-parallel builds), ``checkpoint`` (strict save/load, TP slicing),
``decode`` (greedy decoding with a KV cache), ``corpus`` (synthetic bad→good pairs), ``train``.
"""
