"""The training suite's tiny-model fixtures (a supervised LoRA run to start from), for GRPO's tests."""

from tests.training.conftest import records, reference_run, tiny_datasets  # noqa: F401 (fixtures)
