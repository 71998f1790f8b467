"""learning_loop: the model improves itself, above data_gen, training and eval.

    self_instruct.py  `memlm self-instruct`: model-phrased tasks, executed, rewarded, kept, trained on
    reward.py         the reward of an executed turn (graded; exact for self-instruct's filter)
    review.py         `memlm feedback list | accept | reject`: feedback reviewed before it trains

Feedback from chat and serve (memory_runtime.serving.feedback) is kept per user in pending/ until it is
accepted into accepted.jsonl, which `memlm train` takes through data.extra_jsonl.
"""
