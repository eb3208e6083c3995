"""The release's Method text lists how the ICL protocol differs from the paper's."""
from leaderboard.markdown import PAPER_DIFFERENCES, method_text


def test_method_text_ends_with_the_differences_from_the_paper():
    text = method_text({"n_boot": 1000, "baseline": "softmax", "alpha": 0.05})
    assert text.endswith(PAPER_DIFFERENCES)
    block = " ".join(PAPER_DIFFERENCES.split())
    for phrase in ("judged on `ssa_gpt2`, with `ssa`", "100i + 10j", "independent draws",
                   "in expectation only", "[1, −1, −2, 1000]", "−70 at point 6 and 70000 at point 8",
                   "`mse_T9_id`", "`mse_T9_shifted`", "fp32 in every profile", "`demote_headlines`"):
        assert phrase in block, phrase
