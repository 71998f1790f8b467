"""learning_loop: the model improves itself, above data_gen, training and eval.

    self_instruct.py  `memlm self-instruct`: model-phrased tasks, executed, rewarded, kept, trained on
    reward.py         reward: 0/1 score of a turn against a task's gold (self-instruct's filter)

Feedback from chat and serve (memory_runtime.feedback) becomes Records in trajectories.jsonl that
`memlm train` takes through data.extra_jsonl.
"""
