"""The model card: what it predicts, its data, metrics by slice, thresholds, limitations, versions."""

import re

from tests.pipeline.reports.test_html import refused_page, sample_page
from tfxflow.pipeline.reports import model_card


def test_markdown_card_of_a_pushed_model():
    card = model_card.render_markdown(sample_page())
    assert card.startswith("# Model card: tfxflow-taxi version 1796055012\n")
    for text in (
        "## What it predicts",
        "`big_tipper`: the probability that tips > 0.2 x fare",
        "| numeric | fare |",
        "## Training data",
        "Rows per split: train 1,486, eval 514.",
        "| fare | numeric | 1,480 | 6 | mean 13.2, std 10.8, range 0 to 78.4 |",
        "6 values, most often Cash (957)",
        "| binary_accuracy | 0.78 | 0.76 |",
        "### By slice",
        "| payment_type=Cash | 0.9 |",
        "- binary_accuracy at least 0.6 (overall)",
        "## Limitations",
        "Evaluated on a sample of 172 of the 514 eval rows (every 3rd)",
        "| code commit | 240f057 |",
        "| TFX | 1.16.0 |",
    ):
        assert text in card, text


def test_markdown_tables_are_well_formed():
    card = model_card.render_markdown(sample_page())
    for table in re.findall(r"(?:^\|.*\|\n)+", card, flags=re.M):
        lines = table.strip().split("\n")
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}
        assert len(widths) == 1, table  # every row has the header's columns
        assert re.fullmatch(r"\|(---\|)+", lines[1])


def test_pipes_and_markup_in_values_are_escaped():
    page = sample_page(code_commit="a|b<script>")
    assert "a\\|b<script>" in model_card.render_markdown(page)
    document = model_card.render_html(page)
    assert "<script" not in document and "a|b&lt;script&gt;" in document


def test_html_card_is_self_contained():
    document = model_card.render_html(sample_page())
    assert "Content-Security-Policy" in document and "<script" not in document
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", document)
    assert "<code>big_tipper</code>" in document and "<h2>Limitations</h2>" in document


def test_card_of_a_model_that_was_not_pushed_says_so():
    card = model_card.render_markdown(refused_page())
    assert "# Model card: tfxflow-taxi (not pushed)" in card
    assert "Not pushed: the run stopped at DataGate." in card
    assert "The model was not evaluated in this run." in card


def test_card_without_a_feature_config():
    card = model_card.render_markdown(sample_page(features=None))
    assert "The run recorded no feature config" in card
