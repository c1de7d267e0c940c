"""The verdict classes `cclab reproduce` writes into claims.json (see
harness/src/reproduce/claims.rs, `Class`), each with the `counts` key it
is counted under."""

CLASSES = {
    "pass": "pass",
    "pass-within-noise": "pass_within_noise",
    "fail": "fail",
    "fail-within-noise": "fail_within_noise",
    "unmeasured": "unmeasured",
    "n/a": "na",
    "duplicate": "duplicates",
    "contradictory": "contradictory_pairs",
    "guaranteed": "guaranteed",
}
