"""The refiner's rule-based reward (Tool-Use Refiner paper, Section 3.3) behind verl's ``compute_score``.

    from rewards import compute_score, score_calls
    compute_score("nestools", model_text, '{"format": "hermes", "answer": "...", "order_sensitive": false}',
                  {"upstream": upstream_text})
    score_calls(model_text, gold_calls, "hermes", upstream=upstream_text)

See ``docs/rewards.md`` for the ground-truth schema, the formulas and the edge cases.
"""

from rewards.components import VARIANTS, CallFeatures  # noqa: F401
from rewards.ground_truth import Gold, GroundTruthError, make_ground_truth, parse_ground_truth  # noqa: F401
from rewards.score import (  # noqa: F401
    RESULT_KEYS,
    Breakdown,
    breakdown,
    breakdown_calls,
    compute_score,
    is_exact,
    parse_output,
    score_calls,
    score_gold,
)
