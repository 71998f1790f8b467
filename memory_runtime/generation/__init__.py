"""A model running turns with its memory. ``runtime`` is the entry: the `generation` config section
and ``open_runtime``, which opens a model on its engine. Below it: ``engine`` (the turn's request and
result, and ``TurnEngine``, the interface every engine implements; ``queued_engine``: the base of those
whose turns wait in this process), the ``controller`` (the memory controller: a turn's calls executed,
the loop of a turn), the engines (``batching``: many turns at once over ``batch_cache``, or one at a time
over a streaming backend; ``vllm_backend``: vLLM), ``turn_decoder`` (one turn's tokens and exact text and
the choice of each next token, whichever engine runs the model), the backends (``backend``: the
interface; ``hf_backend``: transformers token by token; ``scripted_model``: a stand-in without weights
that writes and reads as a trained model does), call fields copied from the conversation
(``field_copy``) and writes a user can trust (``write_gate``)."""
